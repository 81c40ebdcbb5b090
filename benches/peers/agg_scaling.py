"""Window aggregation scaling: windgate's rows/s against panes per window, keys, aggregates and threads,
each cell beside DuckDB and Polars on the same data in the same run, with a numpy read-only pass as the
ceiling.

The data of every cell is generated in memory with numpy (``--seed``): ``--rows`` rows (default 4 M), one
per millisecond in time order (``ts``, ``timestamp[ms, tz=UTC]``), ``key`` int64 drawn uniformly at random
from ``keys`` values ("random") or round-robin ``i % keys`` ("regular"), ``value`` random float64 in [0, 1).
Windows align like Spark's ``window()``: window ``j`` covers ``[j*slide, j*slide + size)``, one output row
per (window, key) that holds at least one row of the key, ordered by (window_start, key).

Four tables (rows/s; tables 1-3 on one thread for every engine):

1. panes per window 1, 6, 60, 288, 1440: 100 random keys, slide 1 s (1000 rows a pane, 10 a key), size =
   ppw * slide, count + sum + max. 288 is the "24 h window sliding 5 min over 100 sensors" shape.
2. keys 10, 1k, 100k, 1M, random and regular order: 60 s windows sliding 10 s (6 panes), count + sum + max.
3. aggregates count; count + sum + max; mean + std + min + max + first + last: 1k random keys, 60 s / 10 s.
4. threads 1 and 2 (1k random keys, 60 s / 10 s, count + sum + max): windgate's ``strategy="auto"`` and
   every parallel strategy of its registry (``windgate._native.strategies``) but the multi-source ones,
   DuckDB (``SET threads``) and Polars (``POLARS_MAX_THREADS`` in a subprocess), with the 1 -> 2 speed-up.

Engines, each timed best of ``--repeat`` from data already in its own memory format (not timed) to a
materialised result ordered by (window_start, key):

* ``windgate``: ``windgate.window_aggregate(table, time="ts", by="key", size, slide, aggs, threads)``.
* ``duckdb``: the direct SQL (each row exploded into its windows with a lateral ``range()``, GROUP BY), run
  only below 60 panes a window (it does ppw times the work); ``duckdb panes+frame``: partial aggregates per
  (key, pane), then one window frame over panes per key (``RANGE BETWEEN ppw-1 PRECEDING AND CURRENT
  ROW``) on those rows plus one empty filler row per window whose last pane the key does not have (so a
  window exists iff the key has a row in one of its panes, as in windgate), see :func:`duckdb_frame_query`.
* ``polars``: ``group_by_dynamic(every=slide, period=size, group_by=key)``; ``polars panes+rolling``: the
  same pane partials and filler rows, then ``rolling_*_by`` over a (key, pane) index, see
  :func:`polars_panes`. Both run after the other engines, in one worker subprocess per thread count
  (``POLARS_MAX_THREADS``) that reads each data set once.
* ``numpy read pass`` (``ts.min()``, ``key.sum()``, ``value.sum()``) and ``numpy bincount``
  (``bincount(key, weights=value)``): rows/s of just reading the columns, the physical reference.

A peer that runs longer than ``--peer-timeout`` seconds or twice windgate's time in the cell, whichever is
longer, is stopped (DuckDB interrupted, the Polars process killed and restarted for the next query) and shown
as ``timeout``; in table 2 it is then skipped at more keys in the same order (shown as ``skipped``). Repeats
stop once another run would pass that budget too (windgate is never stopped). Cells that run the same query on
the same data (table 2's 1k random keys, table 3's count + sum + max, table 4's single thread) share one
measurement. Every peer's result is checked against windgate's in the same cell: output rows, sum of keys, sum
of window numbers, sum of counts (exact) and the sum of every float column (1e-9 relative); a difference shows
as ``MISMATCH`` in the table, is logged and makes the script exit 1.

    .venv/bin/python -m benches.peers agg_scaling            # 4 M rows a cell, best of >= 5 runs, >= 1 s
    .venv/bin/python -m benches.peers agg_scaling --quick    # 200 k rows, 1 run, fewer cells (< 60 s)

Results: ``<out>/agg_scaling.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import report, runner
from .agg_scaling_peers import (
    AGG_SETS,
    KEY,
    MIN_SECONDS,
    ORDERS,
    PEERS,
    STANDARD,
    TIME,
    Case,
    DuckDB,
    duckdb_direct_query,
    duckdb_frame_query,
    polars_worker,
    run_polars,
    summary,
)
from .agg_scaling_report import pivot, plot, thread_table
from .report import best_of, log

NAME = "agg_scaling"
PPW = (1, 6, 60, 288, 1440)
KEYS = (10, 1_000, 100_000, 1_000_000)
DIRECT_MAX_PPW = 59  # the direct DuckDB SQL explodes every row ppw times: only for short windows
#: The tables: number -> heading (formatted with the table's first cell ``c`` and STANDARD).
TABLES = {
    "1": "1. rows/s against panes per window ({c.keys} random keys, slide {c.slide_ms:,} ms, {std}, 1 core)",
    "2": "2. rows/s against keys ({c.ppw} panes a window, slide {c.slide_ms:,} ms, {std}, 1 core)",
    "3": "3. rows/s against aggregates ({c.keys:,} random keys, {c.ppw} panes a window, 1 core)",
    "4": "4. rows/s against threads ({c.keys:,} random keys, {c.ppw} panes a window, {std})",
}


def cases(rows: int, quick: bool, tables: list[str]) -> list[Case]:
    """The cells of the chosen tables; ``quick`` keeps the extremes of tables 1 and 2."""
    ppws = (1, 6, 288) if quick else PPW
    keys = (10, 100_000) if quick else KEYS
    out = []
    if "1" in tables:
        out += [Case("1", f"{p} ppw", rows, 100, "random", 1_000, p) for p in ppws]
    if "2" in tables:
        out += [Case("2", f"{k:,} {o}", rows, k, o, 10_000, 6) for k in keys for o in ORDERS]
    if "3" in tables:
        out += [Case("3", a, rows, 1_000, "random", 10_000, 6, a) for a in AGG_SETS]
    if "4" in tables:
        out.append(Case("4", "1k random", rows, 1_000, "random", 10_000, 6, threads=(1, 2)))
    return out


def make_data(rows: int, keys: int, order: str, seed: int) -> pa.Table:
    """``rows`` rows, one per millisecond from 0, keys random or round-robin, values random."""
    rng = np.random.default_rng(seed)
    ts = np.arange(rows, dtype=np.int64)
    key = rng.integers(0, keys, rows, dtype=np.int64) if order == "random" else ts % keys
    value = rng.random(rows)
    return pa.table(
        {TIME: pa.array(ts, pa.timestamp("ms", tz="UTC")), KEY: pa.array(key), "value": pa.array(value)}
    )


def windgate_strategies() -> list[str]:
    """``auto``, then the registry's parallel strategies for one source (the multi-source designs need
    several time-sorted inputs)."""
    try:
        from windgate import _native

        reg = _native.strategies("window_aggregate")
    except Exception:  # an older build without the registry: the production ones
        return ["auto", "farm"]
    names = [s["name"] for s in reg if s["parallel"] and not s["sorted_sources"] and s["name"] != "auto"]
    return ["auto", *names]


# --------------------------------------------------------------------------------------------- checks


def check(result: dict, ref: dict | None) -> str:
    """ "ok" when the summaries agree (floats to 1e-9 relative), else "FAIL: " and what differs."""
    if ref is None:
        return "not checked (windgate did not run)"
    problems = []
    for k, want in ref.items():
        got = result.get(k)
        if isinstance(want, float):
            if got is None or not abs(got - want) <= 1e-9 * max(abs(got), abs(want), 1.0):
                problems.append(f"{k} {got!r} != {want!r}")
        elif got != want:
            problems.append(f"{k} {got!r} != {want!r}")
    return "FAIL: " + "; ".join(problems) + " (windgate)" if problems else "ok (windgate)"


# --------------------------------------------------------------------------------------------- engines


def run_windgate(
    table: pa.Table, case: Case, strategy: str, threads: int, repeat: int, budget: float, min_total: float
):
    import windgate

    def once():
        return windgate.window_aggregate(
            table,
            time=TIME,
            by=KEY,
            size=f"{case.size_ms}ms",
            slide=f"{case.slide_ms}ms",
            aggs=AGG_SETS[case.aggs],
            threads=threads,
            strategy=strategy,
        )

    best, runs, out = best_of(once, repeat, budget, min_total)
    return best, runs, summary(out, case.slide_ms)


def run_refs(table: pa.Table, repeat: int) -> dict[str, tuple[float, list[float]]]:
    """The physical reference: a pass that only reads the three columns, and a bincount by key."""
    ts = table.column(TIME).combine_chunks().cast(pa.int64()).to_numpy()
    key = table.column(KEY).to_numpy()
    value = table.column("value").to_numpy()
    reps = max(repeat, 5)
    read = best_of(lambda: (ts.min(), key.sum(), value.sum()), reps)
    binc = best_of(lambda: np.bincount(key, weights=value), reps)
    return {"numpy read pass": read[:2], "numpy bincount": binc[:2]}


# --------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runner.parser(
        __doc__,
        rows=4_000_000,
        rows_help="input rows per cell (default 4,000,000)",
        quick="200,000 rows, 1 run, 1/6/288 panes in table 1, 10 and 100k keys in table 2 (smoke test); "
        "--rows overrides",
        # Five, not three: a windgate cell runs in tens of milliseconds, and on a shared two-core machine the
        # second core's pauses decide the best of three two-thread runs (1.68x to 1.81x from one build).
        repeat=5,
        repeat_help="timed runs per engine and cell, best kept (default 5; a run past the budget stops them)",
    )
    p.add_argument("--tables", default="1,2,3,4", help="comma list of 1,2,3,4 (default all)")
    p.add_argument(
        "--peer-timeout",
        type=float,
        default=10.0,
        help="seconds a peer may take per cell, its repeats included, at least twice windgate's (default 10)",
    )
    p.add_argument(
        "--strategies",
        default=None,
        help="windgate strategies of table 4 (default: auto and every single-source parallel one)",
    )
    runner.add_worker_options(p, "--case")
    args = p.parse_args(argv)
    args.tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if unknown := sorted(set(args.tables) - set(TABLES)):
        p.error(f"unknown table(s) {', '.join(unknown)}; choose from 1, 2, 3, 4")
    if args.quick:
        given = any(a == "--rows" or a.startswith("--rows=") for a in argv or [])
        args.rows = args.rows if given else 200_000
        args.repeat = 1
    args.min_seconds = 0.0 if args.quick else MIN_SECONDS
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker == "polars":
        polars_worker(args.case, args.repeat)
        return 0

    all_cases = cases(args.rows, args.quick, args.tables)
    strategies = args.strategies.split(",") if args.strategies else windgate_strategies()
    run = runner.Run(NAME, args.out)
    timeout = args.peer_timeout
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="windgate-bench-"))
    todo = Pending()
    try:
        for data in dict.fromkeys(c.data for c in all_cases):
            rows, keys, order = data
            log(f"data: {rows:,} rows, {keys:,} {order} keys")
            table = make_data(rows, keys, order, args.seed)
            ipc = tmp / f"{keys}-{order}.arrow"
            with pa.OSFile(str(ipc), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
                w.write_table(table)
            run_data_set(
                run, table, [c for c in all_cases if c.data == data], str(ipc), strategies, args, todo
            )
            del table
        run_all_polars(run, todo, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    results = run.results
    wall = time.perf_counter() - t_start
    failed = run.failed()
    params = {
        "rows": args.rows,
        "repeat": args.repeat,
        "peer_timeout_s": timeout,
        "tables": args.tables,
        "windgate_strategies": strategies,
        "seed": args.seed,
        "wall_seconds": round(wall, 1),
        **run.load(),
    }
    notes = [
        "rows/s: input rows over the best run's seconds, from data already in the engine's memory to a "
        "materialised result ordered by (window_start, key). Tables 1-3: every engine on 1 thread.",
        "windgate / best peer: windgate (strategy auto) over the fastest peer whose result matched, in the "
        "same cell; '> x' when every peer run timed out (a bound from the timeout). windgate / read pass: "
        "its rows/s over the numpy pass that only reads the three columns (the physical ceiling here).",
        "Checks: output rows, sum of keys, sum of window numbers and sum of counts exactly, sums of every "
        "float column to 1e-9 relative, against windgate's result in the same cell. MISMATCH marks a "
        f"difference (the run exits 1); timeout: stopped after {timeout:g} s or twice windgate's seconds in "
        "the cell, whichever is longer; skipped: not run at more keys once it timed out at fewer (table 2).",
        f"duckdb (direct explode) runs below {DIRECT_MAX_PPW + 1} panes a window only; duckdb panes+frame: "
        "pane partials, then a RANGE frame of ppw panes per key over pane rows plus empty filler rows for "
        "the windows whose last pane the key lacks; std from the sum of squares.",
        "polars: group_by_dynamic(every=slide, period=size, offset=-size, group_by=key); polars "
        "panes+rolling: the same partials and fillers, rolling_*_by over a (key, pane) index, last by "
        "forward fill, first by an as-of join; one worker subprocess per thread count (POLARS_MAX_THREADS).",
        f"The machine has {report.machine()['cores']} cores and is shared: compare within this run.",
        f"Wall time of the run: {wall:.0f} s.",
    ]
    sections = []
    for t, heading in TABLES.items():
        tc = [c for c in all_cases if c.table == t]
        if tc:
            body = thread_table(results, tc[0]) if t == "4" else pivot(results, tc)
            sections.append(f"## {heading.format(c=tc[0], std=STANDARD)}\n\n{body}")
    sections.append("## Notes\n\n" + "\n".join(f"* {n}" for n in notes))
    sections.append("## Every measurement\n\n" + report.markdown_table(results, COLUMNS))
    paths = run.write(
        title=f"Window aggregation scaling: rows/s against panes per window, keys, aggregates and threads "
        f"({args.rows:,} rows a cell)",
        params=params,
        sections=sections,
        columns=COLUMNS,
        plot=plot,
        groups=[],
        extra={"notes": notes, "cases": [asdict(c) for c in all_cases]},
    )
    for s in sections[:-2]:
        print("\n" + s)
    print()
    for r in failed:
        log(f"MISMATCH: {r['engine']}, {r['threads']} threads, table {r['table']} {r['case']}: {r['check']}")
    return run.done(paths, failed, what="case")


COLUMNS = (
    ("table", "table"),
    ("case", "cell"),
    ("engine", "engine"),
    ("threads", "cores"),
    ("rows", "rows in"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("out_rows", "output rows"),
    ("check", "check"),
    ("shared", "notes"),
)


@dataclass
class Pending:
    """What the data sets leave for the end: windgate auto's summary per (table, cell) on the cell's first
    thread count, the checks' reference, and the Polars queries (items per thread count, their result rows
    by item id)."""

    refs: dict[tuple, dict] = field(default_factory=dict)
    polars: dict[int, list[dict]] = field(default_factory=dict)
    rows: dict[int, list[dict]] = field(default_factory=dict)
    #: query key (see :func:`query_key`) -> the result measured first (cells of several tables that run the
    #: same query on the same data share one measurement) or the Polars item id queued for it
    memo: dict[tuple, dict | int] = field(default_factory=dict)
    #: (table, engine, order, threads) -> the keys at which that peer timed out (table 2 skips more keys)
    timed_out: dict[tuple, int] = field(default_factory=dict)


def query_key(case: Case, threads: int, engine: str) -> tuple:
    return (case.data, case.slide_ms, case.ppw, case.aggs, threads, engine)


MEASURED = ("seconds", "runs", "timeout", "skipped", "error", "check", "out_rows", "key_sum", "window_sum")


def shared(r: dict, first: dict) -> dict:
    """``r`` (a cell's row) with the measurement of ``first`` (the same query on the same data)."""
    r.update({k: v for k, v in first.items() if k in MEASURED or k.endswith(("_sum", "_value"))})
    r["shared"] = f"measured once for table {first['table']} {first['case']}"
    return r


def skip_reason(todo: Pending, case: Case, engine: str, threads: int) -> str | None:
    """Table 2: a peer that timed out at fewer keys (same order, threads) is not run again at more."""
    k = todo.timed_out.get((case.table, engine, case.order, threads))
    if case.table == "2" and k is not None and case.keys > k:
        return f"timed out at {k:,} keys"
    return None


def run_data_set(run, table, cases_: list[Case], ipc: str, strategies, args, todo: Pending) -> None:
    """The engines on the cells of one data set: per cell windgate auto first (the reference of the
    checks), its other strategies (table 4), DuckDB; the numpy reference once. The Polars queries are queued
    in ``todo`` for :func:`run_all_polars` (one worker process per thread count for every data set)."""
    timeout = args.peer_timeout
    refs = todo.refs
    duck = DuckDB(table)
    try:
        for case in cases_:
            log(f"table {case.table}: {case.label} ({case.ppw} panes of {case.slide_ms} ms, {case.aggs})")
            common = {
                "table": case.table,
                "case": case.label,
                "rows": case.rows,
                "keys": case.keys,
                "order": case.order,
                "ppw": case.ppw,
                "aggs": case.aggs,
            }
            wg_strategies = strategies if case.table == "4" else ["auto"]
            for n in case.threads:
                limit = timeout
                for strategy in wg_strategies:
                    name = "windgate" if strategy == "auto" else f"windgate {strategy}"
                    r = {**common, "engine": name, "threads": n, "scaling_group": name}
                    key = query_key(case, n, name)
                    if isinstance(todo.memo.get(key), dict):
                        shared(r, todo.memo[key])
                        if (ref := refs.get(todo.memo[key]["ref_of"])) is not None:
                            refs.setdefault((case.table, case.label), ref)
                        run.add(r, f"  {name} ({n} threads): {r['shared']}")
                        continue
                    todo.memo[key] = r
                    r["ref_of"] = (case.table, case.label)
                    try:
                        # no timeout for windgate: past the peers' budget a cell gets one run
                        best, runs, s = run_windgate(
                            table, case, strategy, n, args.repeat, timeout, args.min_seconds
                        )
                        r.update(seconds=best, runs=runs, **s)
                        if strategy == "auto":  # the peers get at least twice windgate's time
                            limit = max(timeout, 2 * best)
                        ref = refs.get((case.table, case.label))
                        if ref is None:
                            refs[(case.table, case.label)] = s
                        r["check"] = "reference" if ref is None else check(s, ref)
                    except Exception as exc:
                        r.update(report.failure(name, n, exc))
                    _add(run, r)
                for engine in PEERS:
                    if engine == "duckdb" and case.ppw > DIRECT_MAX_PPW:
                        continue
                    r = {**common, "engine": engine, "threads": n, "scaling_group": engine}
                    key = query_key(case, n, engine)
                    first = todo.memo.get(key)
                    if engine.startswith("polars"):
                        if isinstance(first, int):  # queued already: the item's result goes to this row too
                            todo.rows[first].append(r)
                            continue
                        item = {"id": len(todo.rows), "ipc": ipc, "case": asdict(case), "engine": engine}
                        item["timeout"] = limit
                        item["min_seconds"] = args.min_seconds
                        todo.memo[key] = item["id"]
                        todo.rows[item["id"]] = [r]
                        todo.polars.setdefault(n, []).append(item)
                        continue
                    if first is not None:
                        run.add(shared(r, first), f"  {engine} ({n} threads): {r['shared']}")
                        continue
                    todo.memo[key] = r
                    if why := skip_reason(todo, case, engine, n):
                        r.update(seconds=None, skipped=why)
                        run.add(r, f"  {engine} ({n} threads): skipped, {why}")
                        continue
                    try:
                        q = duckdb_direct_query(case) if engine == "duckdb" else duckdb_frame_query(case)
                        got = duck.run(q, n, args.repeat, limit, case.slide_ms, args.min_seconds)
                        if got is None:
                            log(f"  {engine} ({n} threads): timeout after {limit:.1f} s")
                            todo.timed_out[(case.table, engine, case.order, n)] = case.keys
                    except Exception as exc:
                        got = exc
                    _add_peer(run, r, got, refs, limit)
    finally:
        duck.close()
    c = cases_[0]
    t = run_refs(table, args.repeat)
    for case in cases_:
        for engine, (best, runs) in t.items():
            common = {"table": case.table, "case": case.label, "rows": case.rows, "keys": case.keys}
            row = {**common, "order": case.order, "ppw": case.ppw, "aggs": case.aggs}
            run.add({**row, "engine": engine, "threads": 1, "seconds": best, "runs": runs, "check": "-"}, "")
    log(
        f"  numpy read pass: {c.rows / t['numpy read pass'][0] / 1e6:.0f} M rows/s, "
        f"bincount: {c.rows / t['numpy bincount'][0] / 1e6:.0f} M rows/s"
    )


def run_all_polars(run, todo: Pending, args) -> None:
    """The queued Polars queries, one worker process per thread count, checked against windgate."""
    for n, items in todo.polars.items():
        log(f"polars, {n} thread{'s' if n > 1 else ''}: {len(items)} queries in a worker process")
        try:
            got = run_polars(items, n, args.repeat)
        except Exception as exc:  # the worker could not run at all
            got = {it["id"]: f"{type(exc).__name__}: {exc}" for it in items}
        for it in items:
            first, *more = todo.rows[it["id"]]
            _add_peer(run, first, got.get(it["id"], "no result"), todo.refs, it["timeout"])
            for r in more:
                run.add(shared(r, first), "")


def _add_peer(run, r: dict, got, refs: dict, timeout: float) -> None:
    """Record a peer's result: ``(seconds, runs, summary)``, None (timed out), or an exception (text)."""
    if got is None:
        r.update(seconds=None, timeout=timeout)
    elif isinstance(got, dict):  # {"skipped": why}
        r.update(seconds=None, **got)
    elif isinstance(got, tuple | list):
        best, runs, s = got
        r.update(seconds=best, runs=runs, **s)
        r["check"] = check(s, refs.get((r["table"], r["case"])))
    else:
        msg = got if isinstance(got, str) else f"{type(got).__name__}: {got}".strip()
        log(f"{r['engine']} ({r['threads']} threads) failed: {msg.splitlines()[0]}")
        r.update(seconds=None, error=msg)
    _add(run, r)


def _add(run, r: dict) -> None:
    if r.get("check", "").startswith("FAIL"):
        log(f"  MISMATCH {r['engine']} ({r['threads']} threads): {r['check']}")
    if r.get("seconds"):
        run.add(
            r,
            f"  {r['engine']} ({r['threads']} threads): {r['seconds']:.3f} s, "
            f"{r['rows'] / r['seconds'] / 1e6:.2f} M rows/s, {r.get('out_rows', 0):,} rows out, {r['check']}",
        )
    else:
        run.add(r, "")
