"""Multiway aggregation as in Cederman, Gulisano, Nikolakopoulos, Papatriantafilou and Tsigas, *Efficient
data streaming multiway aggregation through concurrent algorithmic designs and new abstract data types*: the
designs against each other and against peers, on the paper's queries.

Data and queries come from :mod:`windgate.queries` (the paper's Table 2): ``smartgrid`` with 243 meters
reporting once a second, split by meter into N time-sorted sources, and ``soundcloud`` with 40,000
Zipf-skewed songs, comments round-robin over the sources. Experiments, after the paper's evaluation:

* **(a) sources**: throughput and latency against the number of sources N in ``--sources`` (default 1,
  2, 4, 8, 12, 20) for every design, on k-OS (``first`` per meter; order-sensitive) and k-OI (``count``).
* **(b) windows per row** (w/W): w-OS (20 s windows sliding 2 s: 10 windows a row) against W-OS (40 s / 2 s:
  20 windows a row) at ``--fixed-sources`` (default 20).
* **(c) keys** (k/K): k-OS (243 meters) against K-OS (40,000 songs) at ``--fixed-sources``; the paper's K
  also changes the data set, so K-OS is run on soundcloud with 243 songs too (keys alone changed).
* **(d) peers**: k-OI on the union of the same ``--fixed-sources`` sources: DuckDB (SQL: each row
  joined to the windows holding it with a lateral ``range()``, then GROUP BY), Polars (``group_by_dynamic``),
  Spark's native ``window()`` group-by on ``local[2]`` and windgate through Spark (``windgate.queries.
  spark_query``), next to windgate's batch call on the N sources.

Designs (``windgate.WindowAggregator(..., sources=N, strategy=...)``): ``mq``, ``mqlf``, ``tumlsc``,
``tumlmc`` and ``wiml`` (a name an older build rejects is reported as skipped), and ``auto``
(the batched production path, today the pane engine; with one source it runs with ``lateness=0``, which is
the same for a sorted source, since without lateness one source closes nothing before ``flush``).

Streaming protocol: the sources are cut into rounds of event time holding about ``--round-rows`` rows
together; in each round every source pushes its rows of that round, source 0 first (round-robin over the
sources, as N feeders interleave), then every source is closed (``close_source``) and the operator flushed.
Throughput = input rows over the wall time of the whole stream. Latency of a push = from the moment it
starts to the moment the last of the windows it made final (every source has passed their end) has been
returned by a push, a ``close_source`` or the ``flush``; reported as p50, p99 and mean over the pushes that
made a window final. It is measured at full speed (the stream is pushed as fast as the operator takes it),
so it includes the time spent pushing other sources' rows before a threaded design hands the windows back.
Each configuration runs ``--repeat`` times; the fastest run is kept (with its latencies). Every streamed
result must equal ``strategy="reference"`` on the same sources, row for row, and every peer's rows, sorted,
must equal windgate's; any difference prints FAIL and the script exits 1.

    .venv/bin/python -m benches.peers multiway --out bench-results           # about 5 minutes on 2 cores
    .venv/bin/python -m benches.peers multiway --out bench-results --quick   # about 1 minute

Results: ``<out>/multiway.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import gc
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import plot as plots
from . import report, runner
from .multiway_peers import key_table, run_duckdb, run_polars, run_spark
from .report import best_of, failure, fmt_rate, log

NAME = "multiway"
DESIGNS = ("mq", "mqlf", "tumlsc", "tumlmc", "wiml", "auto")
SOURCE_COUNTS = (1, 2, 4, 8, 12, 20)
QUICK_SOURCE_COUNTS = (1, 4, 20)
INF = math.inf

#: The paper's surviving numbers, for the Markdown.
PAPER = (
    "Paper (Java, 2 x 6-core Xeon E5645, 24 hardware threads): the T-Gate alone merges about "
    "**2.2 M tuples/s at 20 inputs** (latency about 1 ms) against 1.5 M tuples/s (1.6 ms) for a concurrent "
    "skip list with an O(N) readiness scan; the new designs reach **up to 10x the queue-based MQ** in both "
    "throughput and latency; with more inputs MQ/MQLF fall linearly, TuMLSC stays flat and WiML rises. Most "
    "other figures were lost with the paper's plots. The paper's latency is a mean at a sustained injection "
    "rate; here it is per push at full speed, on 2 cores shared by N feeder threads and the output thread "
    "(at 20 sources this measures multiplexed feeders, not a 12-core machine)."
)


# --------------------------------------------------------------------------------------------- helpers


def windgate_modules():
    """``windgate`` and ``windgate.queries``; when the installed wheel predates ``queries`` (and the
    soundcloud generator), the source tree's Python modules are put first on the package's path (the
    extension stays the installed one)."""
    import windgate

    try:
        from windgate import queries
    except ImportError:
        src = report.ROOT / "python" / "windgate"
        windgate.__path__.insert(0, str(src))
        sys.modules.pop("windgate.datasets", None)
        from windgate import queries

        log(f"the installed windgate has no queries module; using {src} (Python modules only)")
    return windgate, queries


def accepted(strategy: str) -> bool:
    """Whether the installed extension knows ``strategy`` (tumlmc and wiml arrive later)."""
    windgate, _ = windgate_modules()
    t = pa.table({"ts": [1]})
    try:
        windgate.window_aggregate([t, t], time="ts", size=2, aggs={"*": "count"}, strategy=strategy)
    except windgate.InvalidParameterError as exc:
        if "unknown strategy" in str(exc):
            return False
        raise
    return True


def ts_int(column) -> np.ndarray:
    """An int64 view of a time column (timestamps in their unit: ms for smartgrid)."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    return np.asarray(column.to_numpy(), dtype=np.int64)


class Data:
    """The prepared sources of one query at one N, with the reference result and the streaming plan."""

    def __init__(self, query, rows: int, n: int, seed: int, round_rows: int, **gen):
        _, queries = windgate_modules()
        self.query, self.n, self.gen = query, n, gen
        raw = queries.generate(query.dataset, rows, sources=n, seed=seed, **gen)
        self.sources = [queries.prepare(query, s).combine_chunks() for s in raw]
        self.rows = sum(s.num_rows for s in self.sources)
        self.plan = self._plan(round_rows)
        self.pushes = sum(len(r) for r in self.plan)

    def _plan(self, round_rows: int) -> list[list[tuple[int, pa.RecordBatch, int]]]:
        """Rounds of event time with about ``round_rows`` rows in all; per round, (source, its rows in the
        round, their last ts) for every source with rows in it, source 0 first."""
        times = [ts_int(s.column(self.query.time)) for s in self.sources]
        lo = min((int(t[0]) for t in times if t.size), default=0)
        hi = max((int(t[-1]) for t in times if t.size), default=0)
        rounds = max(1, math.ceil(self.rows / round_rows))
        step = max(1, math.ceil((hi - lo + 1) / rounds))
        bounds = np.arange(lo, hi + step + 1, step, dtype=np.int64)
        cuts = [np.searchsorted(t, bounds, side="left") for t in times]
        batches = [s.to_batches()[0] if s.num_rows else None for s in self.sources]
        plan = []
        for k in range(len(bounds) - 1):
            round_ = []
            for i, (t, c) in enumerate(zip(times, cuts, strict=True)):
                a, b = int(c[k]), int(c[k + 1])
                if b > a:
                    round_.append((i, batches[i].slice(a, b - a), int(t[b - 1])))
            if round_:
                plan.append(round_)
        return plan


def stream(data: Data, strategy: str) -> dict:
    """One streamed run (see the module docstring): seconds, the output table and the push latencies."""
    windgate, _ = windgate_modules()
    n = data.n
    lateness = 0 if (n == 1 and strategy in ("auto", "pane")) else None
    agg = windgate.WindowAggregator(**data.query.kwargs(), sources=n, strategy=strategy, lateness=lateness)
    last = [-INF] * n
    events: list[tuple[float, float, float, pa.RecordBatch]] = []  # (start, end, frontier after, output)
    gc.collect()
    clock = time.perf_counter
    t0 = clock()
    for round_ in data.plan:
        for i, batch, last_ts in round_:
            t = clock()
            out = agg.push(batch, source=i)
            e = clock()
            last[i] = last_ts
            events.append((t, e, min(last), out))
    for i in range(n):
        t = clock()
        out = agg.close_source(i)
        e = clock()
        last[i] = INF
        events.append((t, e, min(last), out))
    t = clock()
    out = agg.flush()
    events.append((t, clock(), INF, out))
    seconds = clock() - t0
    stats = agg.stats
    parts = [ev[3] for ev in events if ev[3].num_rows]
    schema = agg.schema if agg.schema is not None else (parts[0].schema if parts else None)
    table = pa.Table.from_batches(parts, schema=schema) if schema is not None else None
    return {
        "seconds": seconds,
        "table": table,
        "latencies_ms": latencies(events),
        "threads": stats.get("threads"),
        "resolved": stats.get("strategy"),
    }


def latencies(events: list[tuple[float, float, float, pa.RecordBatch]]) -> np.ndarray:
    """Per push that made windows final: ms from its start until a return held the last of them."""
    ends = [
        (k, int(ts_int(ev[3].column("window_end")).max())) for k, ev in enumerate(events) if ev[3].num_rows
    ]
    if not ends:
        return np.zeros(0)
    ret_event = np.array([k for k, _ in ends])
    ret_end = np.maximum.accumulate(np.array([e for _, e in ends], dtype=np.int64))
    all_ends = np.unique(
        np.concatenate([np.unique(ts_int(ev[3].column("window_end"))) for ev in events if ev[3].num_rows])
    )
    out, done = [], -INF
    for k, (start, _, frontier, _) in enumerate(events):
        idx = (
            int(np.searchsorted(all_ends, frontier, side="right")) - 1
            if frontier != INF
            else len(all_ends) - 1
        )
        if idx < 0 or all_ends[idx] <= done:
            continue
        target = int(all_ends[idx])
        done = target
        j = int(np.searchsorted(ret_end, target, side="left"))  # first return holding that window end
        j = max(j, int(np.searchsorted(ret_event, k, side="left")))
        if j < len(ret_event):
            out.append(events[ret_event[j]][1] - start)
    return np.array(out) * 1e3


def run_streamed(
    data: Data, designs: list[str], repeat: int, reference: pa.Table, labels: dict
) -> list[dict]:
    """Every design on ``data``, best of ``repeat`` by throughput, checked against ``reference``."""
    results = []
    for design in designs:
        base = {"engine": f"windgate {design}", "sources": data.n, "rows": data.rows, **labels}
        if not AVAILABLE.get(design, True):
            results.append(
                {
                    **base,
                    "threads": None,
                    "seconds": None,
                    "check": "skipped",
                    "notes": f"strategy {design!r} is not in this build of windgate._native yet",
                }
            )
            continue
        try:
            runs = [stream(data, design) for _ in range(max(1, repeat))]
        except Exception as exc:  # one design failing must not stop the run
            results.append({**base, **failure(base["engine"], None, exc)})
            continue
        best = min(runs, key=lambda r: r["seconds"])
        lat = best["latencies_ms"]
        got = best["table"]
        check = (
            "ok (reference)"
            if got is not None and got.equals(reference)
            else (
                "FAIL: "
                + (
                    report.describe_difference(got, reference, "reference")
                    if got is not None
                    else "no output"
                )
            )
        )
        note = f"{data.pushes:,} pushes in {len(data.plan):,} rounds, threads={best['threads']}"
        if design == "auto":
            note += f"; auto -> {best['resolved']}" + (", lateness=0 (one source)" if data.n == 1 else "")
        r = {
            **base,
            "threads": best["threads"],
            "seconds": best["seconds"],
            "runs": [round(x["seconds"], 4) for x in runs],
            "out_rows": got.num_rows if got is not None else 0,
            "pushes": data.pushes,
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
            "p99_ms": float(np.percentile(lat, 99)) if lat.size else None,
            "mean_ms": float(lat.mean()) if lat.size else None,
            "closing_pushes": int(lat.size),
            "check": check,
            "notes": note,
        }
        report.finish(r)
        log(
            f"  {r['experiment']} {r['query']} N={data.n:>2} {design:>7}: "
            f"{r['rows_per_s'] / 1e6:6.2f} M rows/s, "
            f"latency p50 {r['p50_ms'] or 0:.2f} ms p99 {r['p99_ms'] or 0:.2f} ms, {check}"
        )
        results.append(r)
    return results


AVAILABLE: dict[str, bool] = {}
SKIPPED: set[str] = set()  # designs the extension rejects


# --------------------------------------------------------------------------------------------- peers


def run_peers(args, q, n: int, rows: int, tmp: Path) -> list[dict]:
    windgate, queries = windgate_modules()
    data = Data(q, rows, n, args.seed, args.round_rows)
    union = queries.union(data.sources)
    size_ms, slide_ms = q.size_ticks * 1000, q.slide_ticks * 1000
    log(f"(d) peers: {q.name} on {data.rows:,} rows, {n} sources and their union")
    results = []
    ref = None
    wg_runs = [("windgate auto", data.sources, "auto", f"window_aggregate() on the {n} sources")]
    wg_runs += [
        (f"windgate {d}", data.sources, d, f"window_aggregate() on the {n} sources")
        for d in ("tumlsc", "mq")
        if AVAILABLE.get(d)
    ]
    wg_runs.append(("windgate auto, union", [union], "auto", "window_aggregate() on the union (one source)"))
    for label, srcs, strategy, note in wg_runs:
        try:
            best, runs, res = best_of(
                lambda s=srcs, st=strategy: windgate.window_aggregate(s, **q.kwargs(), strategy=st),
                args.repeat,
            )
        except Exception as exc:
            results.append(failure(label, None, exc))
            continue
        if ref is None:
            ref = key_table(res, q.by)
        # The designs run an input thread per source and an output thread (as their stats say); auto is one.
        results.append(
            {
                "engine": label,
                "threads": len(srcs) + 1 if strategy != "auto" else 1,
                "seconds": best,
                "runs": runs,
                "table": res,
                "notes": note,
            }
        )
    engines = [
        ("duckdb", lambda: [run_duckdb(union, q, size_ms, slide_ms, args.repeat, os.cpu_count())]),
        ("polars", lambda: [run_polars(union, q, size_ms, slide_ms, args.repeat)]),
    ]
    if args.spark:
        master = args.spark_master
        engines.append(("spark", lambda: run_spark(union, q, size_ms, slide_ms, 1, master, tmp, queries)))
    for name, fn in engines:
        log(f"  running {name}")
        try:
            results.extend(fn())
        except Exception as exc:
            results.append(failure(name, None, exc))
    out = []
    for r in results:
        r.update(experiment="d: peers", query=q.name, sources=n, rows=data.rows)
        table = r.pop("table", None)
        if table is not None:
            got = key_table(table, q.by)
            r["out_rows"] = got.num_rows
            r["check"] = (
                "ok (windgate)"
                if got.equals(ref)
                else "FAIL: " + report.describe_difference(got, ref, "windgate")
            )
        report.finish(r)
        if r.get("seconds"):
            log(
                f"  {r['engine']}: {r['seconds']:.3f} s, {r['rows_per_s'] / 1e6:.2f} M rows/s, "
                f"{r.get('check')}"
            )
        out.append(r)
    return out


# --------------------------------------------------------------------------------------------- report


def _ms(x) -> str:
    return f"{x:.2f}"


COLUMNS = (
    ("experiment", "experiment"),
    ("query", "query"),
    ("sources", "N"),
    ("engine", "design / engine"),
    ("threads", "threads"),
    ("rows", "rows in"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("p50_ms", "p50 ms", _ms),
    ("p99_ms", "p99 ms", _ms),
    ("mean_ms", "mean ms", _ms),
    ("out_rows", "output rows"),
    ("check", "check"),
    ("notes", "notes"),
)


def pivot(results: list[dict], experiment: str, query: str, key: str, fmt) -> str:
    """A design x N table of ``key`` for one experiment and query."""
    rows = [r for r in results if r.get("experiment") == experiment and r.get("query") == query]
    ns = sorted({r["sources"] for r in rows})
    designs = list(dict.fromkeys(r["engine"] for r in rows))
    lines = ["| design | " + " | ".join(f"N={n}" for n in ns) + " |", "|---|" + "---:|" * len(ns)]
    for d in designs:
        cells = []
        for n in ns:
            r = next((x for x in rows if x["engine"] == d and x["sources"] == n), None)
            v = None if r is None else r.get(key)
            cells.append("" if v is None else fmt(v))
        if not any(cells):
            cells = ["not in this build yet" if d.split()[-1] in SKIPPED else "failed", *cells[1:]]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare(results: list[dict], experiment: str, what: str) -> str:
    """A design x query table of rows/s and p99 latency for one experiment."""
    rows = [r for r in results if r.get("experiment") == experiment]
    labels = list(dict.fromkeys(r["query"] for r in rows))
    designs = list(dict.fromkeys(r["engine"] for r in rows))
    lines = [
        "| design | " + " | ".join(f"{lab} rows/s | {lab} p99 ms" for lab in labels) + " |",
        "|---|" + "---:|" * (2 * len(labels)),
    ]
    for d in designs:
        cells = []
        for lab in labels:
            r = next((x for x in rows if x["engine"] == d and x["query"] == lab), None)
            cells.append("" if r is None or not r.get("rows_per_s") else fmt_rate(r["rows_per_s"]))
            cells.append("" if r is None or r.get("p99_ms") is None else _ms(r["p99_ms"]))
        if not any(cells):
            cells = ["not in this build yet" if d.split()[-1] in SKIPPED else "failed", *cells[1:]]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return f"{what}\n\n" + "\n".join(lines)


def plot(results, path, title):
    """Per query of experiment (a): throughput and p99 latency against the number of sources."""
    rows = [r for r in results if r.get("experiment") == "a: sources" and r.get("rows_per_s")]
    if not rows:
        return None
    panels = []
    for qn in dict.fromkeys(r["query"] for r in rows):
        mine = [r for r in rows if r["query"] == qn]
        designs = list(dict.fromkeys(r["engine"] for r in mine))
        styles = {d: "-o" if "auto" in d else "--s" for d in designs}
        for y, scale, ylabel, what in (
            ("rows_per_s", 1e6, "M rows/s (log)", "throughput"),
            ("p99_ms", 1.0, "p99 ms per push (log)", "latency"),
        ):
            panels.append(
                plots.Lines(
                    f"{qn}: {what}",
                    {d: plots.points(mine, "sources", y, scale=scale, engine=d) for d in designs},
                    xlabel="sources N",
                    ylabel=ylabel,
                    yscale="log",
                    plain_log_labels=True,
                    styles=styles,
                    xticks=sorted({r["sources"] for r in mine}),
                    legend=what == "throughput",
                )
            )
    return plots.figure(path, title, panels, ncols=2, panel_size=(5.5, 3.6), dpi=110)


# --------------------------------------------------------------------------------------------- main


def parse_args(argv):
    p = runner.parser(__doc__, quick="fewer rows, N in 1, 4, 20, one run each (~1 min)")
    p.add_argument(
        "--rows", type=int, default=None, help="smartgrid rows for (a)-(c) (default 1,000,000; quick 150,000)"
    )
    p.add_argument(
        "--sc-rows", type=int, default=None, help="soundcloud rows for (c) (default 400,000; quick 60,000)"
    )
    p.add_argument(
        "--peer-rows",
        type=int,
        default=None,
        help="smartgrid rows for (d) (default 1,000,000; quick 150,000)",
    )
    p.add_argument(
        "--sources", default=None, help="N for (a), comma list (default 1,2,4,8,12,20; quick 1,4,20)"
    )
    p.add_argument("--fixed-sources", type=int, default=20, help="N for (b), (c), (d) (default 20)")
    p.add_argument("--designs", default=",".join(DESIGNS), help=f"comma list (default {','.join(DESIGNS)})")
    p.add_argument(
        "--round-rows", type=int, default=8192, help="rows per round of pushes, all sources (default 8192)"
    )
    p.add_argument(
        "--repeat", type=int, default=None, help="runs per configuration, best kept (default 3; quick 1)"
    )
    p.add_argument("--no-spark", dest="spark", action="store_false", help="leave Spark out of (d)")
    p.add_argument("--spark-master", default="local[2]")
    args = p.parse_args(argv)
    q = args.quick
    args.rows = args.rows or (150_000 if q else 1_000_000)
    args.sc_rows = args.sc_rows or (60_000 if q else 400_000)
    args.peer_rows = args.peer_rows or (150_000 if q else 1_000_000)
    args.repeat = args.repeat or (1 if q else 3)
    counts = QUICK_SOURCE_COUNTS if q else SOURCE_COUNTS
    args.sources = [int(x) for x in args.sources.split(",")] if args.sources else list(counts)
    args.designs = [d.strip() for d in args.designs.split(",") if d.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = runner.Run(NAME, args.out)
    _, queries = windgate_modules()
    for d in args.designs:
        AVAILABLE[d] = accepted(d)
        if not AVAILABLE[d]:
            SKIPPED.add(d)
            log(f"strategy {d!r}: not in this build of windgate._native; reported as skipped")
    t_start = time.perf_counter()
    results = run.results
    refs: dict = {}

    def experiment(label: str, qname: str, rows: int, n: int, tag: str | None = None, **gen) -> None:
        q = queries.QUERIES[qname]
        data = Data(q, rows, n, args.seed, args.round_rows, **gen)
        # Order-insensitive answers do not depend on how the rows are split into sources.
        key = (qname, rows, tuple(sorted(gen.items())), n if q.order_sensitive else None)
        if key not in refs:
            refs[key] = queries.run_query(q, data.sources, strategy="reference")
        shown = tag or qname
        results.extend(
            run_streamed(data, args.designs, args.repeat, refs[key], {"experiment": label, "query": shown})
        )

    log(f"(a) throughput and latency against sources N in {args.sources}, {args.rows:,} smartgrid rows")
    for qname in ("k-OS", "k-OI") if not args.quick else ("k-OS",):
        for n in args.sources:
            experiment("a: sources", qname, args.rows, n)
    nf = args.fixed_sources
    log(f"(b) windows per row 10 vs 20 at N={nf}")
    for qname in ("w-OS", "W-OS"):
        experiment("b: windows/row", qname, args.rows, nf)
    log(f"(c) keys 243 vs 40,000 at N={nf}")
    experiment("c: keys", "k-OS", args.rows, nf, tag="k-OS (243 meters)")
    experiment("c: keys", "K-OS", args.sc_rows, nf, tag="K-OS (40,000 songs)")
    experiment("c: keys", "K-OS", args.sc_rows, nf, tag="K-OS (243 songs)", songs=243)
    tmp = Path(tempfile.mkdtemp(prefix="windgate-bench-multiway-"))
    try:
        results.extend(run_peers(args, queries.QUERIES["k-OI"], nf, args.peer_rows, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total_s = time.perf_counter() - t_start
    load = run.load()
    busy_at_start, others = load["cpu_busy_at_start"], load["cpu_busy_by_others"]

    params = {
        "smartgrid_rows": args.rows,
        "soundcloud_rows": args.sc_rows,
        "peer_rows": args.peer_rows,
        "sources": args.sources,
        "fixed_sources": nf,
        "round_rows": args.round_rows,
        "repeat": args.repeat,
        "designs": {d: ("ok" if AVAILABLE[d] else "not in this build") for d in args.designs},
        "seed": args.seed,
        **load,
        "wall_seconds": round(total_s, 1),
    }
    load = (
        f"Machine load: other processes kept {busy_at_start:.0%} of the cores busy just before the run and "
        f"{others:.0%} during it"
        if busy_at_start is not None and others is not None
        else "Machine load: unknown (no /proc/stat)"
    )
    if (others or 0) > 0.1 or (busy_at_start or 0) > 0.1:
        load += " (above 10%: timings are skewed; compare designs within this run, not across runs)"
    notes = [
        load + ".",
        'Every streamed result equals strategy="reference" on the same sources, row for row (check column); '
        "peers are compared with windgate's (window_start, key, count) rows, sorted.",
        "rows/s: input rows over the wall time of the whole stream (pushes, close_source, flush). "
        "Latency: per push that made windows final, from its start until they were returned (see the "
        "script's docstring).",
        "threads: operator threads (the designs: one input thread per source and one output thread; auto: "
        f"the pane engine, one thread). The machine has {os.cpu_count()} cores: with many sources the input "
        "threads share them.",
        "k-OS, w-OS, W-OS: first of value per meter (243 meters, windows 30/3, 20/2, 40/2 s); k-OI: count; "
        "K-OS: first comment id per song (windows 30/3 ticks). See windgate.queries.",
    ]
    sections = [
        "## Paper context\n\n" + PAPER,
        "## (a) rows/s against sources N, k-OS\n\n"
        + pivot(results, "a: sources", "k-OS", "rows_per_s", fmt_rate),
        "## (a) p99 latency (ms per push) against sources N, k-OS\n\n"
        + pivot(results, "a: sources", "k-OS", "p99_ms", _ms),
    ]
    if not args.quick:
        sections += [
            "## (a) rows/s against sources N, k-OI\n\n"
            + pivot(results, "a: sources", "k-OI", "rows_per_s", fmt_rate),
            "## (a) p99 latency (ms per push) against sources N, k-OI\n\n"
            + pivot(results, "a: sources", "k-OI", "p99_ms", _ms),
        ]
    sections += [
        "## (b) windows per row\n\n"
        + compare(results, "b: windows/row", f"N={nf}; w-OS: 10 windows a row, W-OS: 20."),
        "## (c) keys\n\n"
        + compare(
            results,
            "c: keys",
            f"N={nf}; the paper's k/K also changes the data set: K-OS with 243 songs changes only the keys.",
        ),
    ]
    peers = [r for r in results if r.get("experiment") == "d: peers"]
    peer_columns = [
        c for c in COLUMNS if c[0] in ("engine", "threads", "rows", "seconds", "rows_per_s", "check", "notes")
    ]
    sections.append(
        f"## (d) peers on the union, k-OI (count per meter, 30 s windows sliding 3 s), N={nf}\n\n"
        + report.markdown_table(peers, peer_columns)
    )
    title = (
        "Multiway aggregation: designs against sources, windows and keys; peers on the union "
        f"({os.cpu_count()} cores)"
    )
    paths = run.write(
        title=title,
        params=params,
        notes=notes,
        columns=COLUMNS,
        sections=sections,
        plot=plot,
    )
    print(report.markdown_table(results, COLUMNS))
    for s in sections[1:]:
        print("\n" + s)
    print(f"\nwall time {total_s:.0f} s; wrote " + ", ".join(str(p) for p in paths.values()))
    return 1 if run.failed() else 0
