"""The band join of Gulisano, Nikolakopoulos, Papatriantafilou and Tsigas, *ScaleJoin: a Deterministic,
Disjoint-Parallel and Skew-Resilient Stream Join*, side by side: windgate, DuckDB, Polars and Spark on the
same data.

The query (the paper's band-join benchmark): R and S from :func:`windgate.datasets.bandjoin` (default
100,000 rows a side, 100 rows per time unit, in ``ts`` order), joined on ``|l.ts - r.ts| <= 100`` (the
window) and ``|x - a| <= 10`` and ``|y - b| <= 10`` (x, y, a, b uniform on [1, 10000]: about 1 in 250,000
pairs of the time band match). Every engine returns every matching pair with all columns of both sides
(``left_*``, ``right_*``) and ``ts = max(l.ts, r.ts)``.

Engines, each timed best-of-N from data already in its own memory format (loading is not timed):

* ``windgate``: ``windgate.band_join(..., index=True)`` and ``windgate_noindex`` (``index=False``: every pair
  of the time band is compared), at each ``--threads``. Skipped with a note while the installed windgate has
  no ``band_join``.
* ``duckdb``: SQL inner join with the six comparisons spelled out (DuckDB plans an IE join), ``SET threads``.
  ``duckdb_between`` (not run by default) is the same join written with ``BETWEEN``: DuckDB then puts
  ``x >= a - 10`` and ``y >= b - 10`` first, joins on those two and takes ~100x longer.
* ``polars``: ``join_where`` with the time band first, in a subprocess per thread count
  (``POLARS_MAX_THREADS``).
* ``spark``: a DataFrame join on the same comparisons (Spark plans a broadcast nested-loop join: every pair
  of the inputs is compared), ``local[2]``, to a ``noop`` sink. Its time grows with rows squared, so it runs
  on the largest prefix of both sides it finishes in about ``--spark-budget`` seconds (estimated from two
  calibration runs), and says so; ``--spark-rows`` fixes the row count instead.

Reported per engine: seconds, output pairs, time-band pairs/s (the pairs with ``|l.ts - r.ts| <= window``,
counted exactly, over the seconds: ScaleJoin's "comparisons per second", whatever the engine compares),
rows/s (both sides' rows over the seconds). Check: every engine's set of pairs, as sorted
``(left ts, x, y, right ts, a, b)`` rows, must equal a numpy oracle's on the same rows, and windgate's must
also equal DuckDB's; any difference prints FAIL and the script exits 1.

    .venv/bin/python -m benches.peers band_join                  # 100 k rows a side, ~2 G time-band pairs
    .venv/bin/python -m benches.peers band_join --quick          # 5 k rows a side (smoke test)

Results: ``<out>/band_join.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import plot as plots
from . import report, runner
from .band_join_peers import (
    EPS_X,
    EPS_Y,
    TIME,
    pairs_of,
    polars_worker,
    run_duckdb,
    run_polars,
    run_spark,
)
from .report import best_of, failure, fmt_rate, log

NAME = "band_join"
# windgate variants: engine name -> (label, index).
WINDGATE = {"windgate": ("windgate index", True), "windgate_noindex": ("windgate no index", False)}
ENGINES = (*WINDGATE, "duckdb", "duckdb_between", "polars", "spark")
DEFAULT_ENGINES = ("windgate", "windgate_noindex", "duckdb", "polars", "spark")


# --------------------------------------------------------------------------------------------- helpers


def time_band_pairs(left: pa.Table, right: pa.Table, window: int) -> int:
    """Exactly how many (l, r) pairs have ``|l.ts - r.ts| <= window``: a searchsorted per left row."""
    lt = left.column(TIME).to_numpy()
    rt = np.sort(right.column(TIME).to_numpy())
    hi = np.searchsorted(rt, lt + window, side="right")
    lo = np.searchsorted(rt, lt - window, side="left")
    return int((hi - lo).sum())


def oracle(left: pa.Table, right: pa.Table, window: int, chunk: int = 1 << 23) -> pa.Table:
    """Every matching pair, by brute force in numpy: right rows sorted by ``a``; each left row's candidates
    are the right rows with ``a`` in ``[x - 10, x + 10]`` (a searchsorted), filtered on ``y``/``b`` (exact in
    float64) and on the time band. Left rows go in groups of about ``chunk`` candidates (memory bound)."""
    lts, lx, ly = (left.column(c).to_numpy() for c in (TIME, "x", "y"))
    rts, ra, rb = (right.column(c).to_numpy() for c in (TIME, "a", "b"))
    order = np.argsort(ra, kind="stable")
    ra_sorted = ra[order]
    lo = np.searchsorted(ra_sorted, lx.astype(np.int64) - EPS_X, side="left")
    hi = np.searchsorted(ra_sorted, lx.astype(np.int64) + EPS_X, side="right")
    count = hi - lo
    step = max(1, int(chunk * lx.size / max(int(count.sum()), 1)))  # left rows per group
    li_parts, rj_parts = [], []
    for a in range(0, lx.size, step):
        b = min(a + step, lx.size)
        c = count[a:b]
        total = int(c.sum())
        if total == 0:
            continue
        li = np.repeat(np.arange(a, b), c)
        start = np.repeat(lo[a:b] - (np.cumsum(c) - c), c)  # position in ra_sorted = start + k-th candidate
        rj = order[start + np.arange(total)]
        keep = np.abs(lts[li] - rts[rj]) <= window
        keep &= np.abs(ly[li].astype(np.float64) - rb[rj].astype(np.float64)) <= EPS_Y
        li_parts.append(li[keep])
        rj_parts.append(rj[keep])
    li = np.concatenate(li_parts) if li_parts else np.zeros(0, np.int64)
    rj = np.concatenate(rj_parts) if rj_parts else np.zeros(0, np.int64)
    out = pa.table(
        {
            "left_ts": lts[li],
            "left_x": lx[li],
            "left_y": ly[li],
            "right_ts": rts[rj],
            "right_a": ra[rj],
            "right_b": rb[rj],
        }
    )
    return pairs_of(out)


def check(pairs: pa.Table, expected: pa.Table, duckdb_pairs: pa.Table | None) -> str:
    """An engine's sorted pairs against the oracle's and (windgate) DuckDB's: "ok ..." or what differs."""
    problems = []
    if not pairs.equals(expected):
        problems.append(report.describe_difference(pairs, expected, "oracle"))
    if duckdb_pairs is not None and not pairs.equals(duckdb_pairs):
        problems.append(report.describe_difference(pairs, duckdb_pairs, "duckdb"))
    if problems:
        return "FAIL: " + "; ".join(problems)
    return "ok (oracle + duckdb)" if duckdb_pairs is not None else "ok (oracle)"


# --------------------------------------------------------------------------------------------- engines
# Each engine function returns a list of result dicts (one per variant) with seconds, runs, out_rows and
# "pairs" (the sorted pair identities, dropped before the report is written).


def run_windgate(left, right, variant: str, window: int, threads: list[int], repeat: int) -> list[dict]:
    label, index = WINDGATE[variant]
    try:
        import windgate
    except Exception as exc:  # the wheel may be half-built
        return [skipped(label, f"windgate is not importable ({type(exc).__name__}: {exc})")]
    if not hasattr(windgate, "band_join"):
        return [skipped(label, "the installed windgate has no band_join yet")]
    on = [windgate.band("x", "a", EPS_X), windgate.band("y", "b", EPS_Y)]
    out = []
    for n in threads:
        try:
            best, runs, res = best_of(
                lambda n=n: windgate.band_join(
                    left, right, time=TIME, window=window, on=on, threads=n, index=index
                ),
                repeat,
            )
        except Exception as exc:  # report this variant, go on with the next
            out.append(failure(label, n, exc))
            continue
        out.append(
            {
                "engine": label,
                "threads": n,
                "seconds": best,
                "runs": runs,
                "out_rows": res.num_rows,
                "pairs": pairs_of(res),
                "notes": f"band_join() on the in-memory Arrow tables, index={index}, threads={n}",
            }
        )
    return out


def streaming_latency(left, right, window: int, threads: list[int], batch: int = 1000) -> list[dict]:
    """windgate.BandJoiner fed like a stream: ``batch`` rows of the left side, then of the right, and so on,
    with ``lateness=0``; each push returns the pairs that became final. Latency = one push's wall time (rows
    in to their final pairs out), as percentiles over all pushes; throughput = both sides' rows over the
    total time."""
    import windgate

    out = []
    on = [windgate.band("x", "a", EPS_X), windgate.band("y", "b", EPS_Y)]
    lb, rb = left.to_batches(batch), right.to_batches(batch)
    for n in threads:
        j = windgate.BandJoiner(time=TIME, window=window, on=on, threads=n, lateness=0)
        lat, pairs = [], 0
        t0 = time.perf_counter()
        for lbatch, rbatch in zip(lb, rb, strict=False):
            for side, b in (("left", lbatch), ("right", rbatch)):
                t = time.perf_counter()
                pairs += j.push(b, side=side).num_rows
                lat.append(time.perf_counter() - t)
        pairs += j.flush().num_rows
        total = time.perf_counter() - t0
        ms = np.percentile(np.array(lat) * 1e3, [50, 90, 99])
        row = {
            "threads": n,
            "batch_rows": batch,
            "pushes": len(lat),
            "p50_ms": round(float(ms[0]), 3),
            "p90_ms": round(float(ms[1]), 3),
            "p99_ms": round(float(ms[2]), 3),
            "rows_per_s": round((left.num_rows + right.num_rows) / total),
            "pairs": pairs,
        }
        log(
            f"  windgate streaming ({n} threads, {batch}-row pushes): p50 {row['p50_ms']} ms, "
            f"p99 {row['p99_ms']} ms per push, {row['rows_per_s']:,} rows/s, {pairs:,} pairs"
        )
        out.append(row)
    return out


def skipped(engine: str, why: str) -> dict:
    log(f"{engine}: skipped: {why}")
    return {"engine": engine, "threads": None, "seconds": None, "check": "skipped", "notes": why}


# --------------------------------------------------------------------------------------------- main


COLUMNS = (
    ("engine", "engine"),
    ("threads", "cores"),
    ("rows_per_side", "rows a side", lambda v: f"{v:,}"),
    ("seconds", "seconds (best)"),
    ("candidate_pairs", "time-band pairs", fmt_rate),
    ("pairs_per_s", "time-band pairs/s", fmt_rate),
    ("rows_per_s", "rows/s"),
    ("speedup", "vs 1 core"),
    ("out_rows", "output pairs"),
    ("check", "check"),
    ("notes", "notes"),
)


def plot(results, path, title):
    return plots.rows_per_s(
        results,
        path,
        title,
        key="pairs_per_s",
        scale=1e9,
        xlabel="G time-band pairs/s (log scale; higher is better)",
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runner.parser(
        __doc__,
        rows=100_000,
        rows_help="rows per side (default 100,000)",
        quick="5,000 rows a side (smoke test); overrides --rows",
        repeat=3,
        repeat_help="timed runs per fast engine, best kept (default 3)",
        threads="1,2",
        threads_help="thread counts for windgate, DuckDB, Polars (default 1,2)",
    )
    p.add_argument("--rate", type=float, default=100.0, help="rows per time unit per side (default 100)")
    p.add_argument("--window", type=int, default=100, help="time band: |l.ts - r.ts| <= window (default 100)")
    p.add_argument("--slow-repeat", type=int, default=1, help="timed runs for Spark (default 1)")
    p.add_argument(
        "--engines",
        default=",".join(DEFAULT_ENGINES),
        help=f"comma list of: {', '.join(ENGINES)} (default: all but duckdb_between)",
    )
    p.add_argument("--spark-master", default="local[2]")
    p.add_argument("--spark-driver-memory", default="4g")
    p.add_argument(
        "--spark-rows",
        type=int,
        default=None,
        help="rows a side given to Spark (default: as many as it joins in about --spark-budget seconds)",
    )
    p.add_argument("--spark-budget", type=float, default=60.0, help="seconds for Spark's run (default 60)")
    runner.add_worker_options(p, "--ipc")
    args = p.parse_args(argv)
    args.engines = runner.engine_list(p, args.engines, ENGINES)
    if args.quick:
        args.rows = 5_000
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker == "polars":
        polars_worker(args.ipc, args.window, args.repeat)
        return 0

    engines = args.engines
    threads = runner.thread_counts(args.threads)
    run = runner.Run(NAME, args.out)
    rows, window = args.rows, args.window

    log(
        f"generating {rows:,} band-join rows a side ({args.rate:g} per time unit, in order, seed {args.seed})"
    )
    t0 = time.perf_counter()
    left, right = report.load_generator("bandjoin")(rows, rate=args.rate, seed=args.seed)
    left, right = left.combine_chunks(), right.combine_chunks()
    gen_s = time.perf_counter() - t0
    log(f"generated in {gen_s:.2f} s; counting the time band and computing the oracle")
    t0 = time.perf_counter()
    band = {rows: time_band_pairs(left, right, window)}
    expected = {rows: oracle(left, right, window)}
    log(
        f"{band[rows]:,} time-band pairs, {expected[rows].num_rows:,} matching pairs "
        f"(oracle in {time.perf_counter() - t0:.2f} s)"
    )

    duckdb_pairs: dict[int, pa.Table] = {}  # DuckDB's (1st variant's) pairs, per rows a side
    tmp = Path(tempfile.mkdtemp(prefix="windgate-bench-"))
    # DuckDB first: windgate's pairs are checked against its.
    order = sorted(engines, key=lambda e: e != "duckdb")
    try:
        for engine in order:
            log(f"running {engine}")
            try:
                if engine in WINDGATE:
                    res = run_windgate(left, right, engine, window, threads, args.repeat)
                elif engine in ("duckdb", "duckdb_between"):
                    res = run_duckdb(left, right, window, threads, args.repeat, engine == "duckdb_between")
                elif engine == "polars":
                    for name, table in (("left", left), ("right", right)):
                        with (
                            pa.OSFile(str(tmp / f"{name}.arrow"), "wb") as f,
                            pa.ipc.new_file(f, table.schema) as w,
                        ):
                            w.write_table(table)
                    res = run_polars(tmp, window, threads, args.repeat)
                elif engine == "spark":
                    res = run_spark(
                        left,
                        right,
                        window,
                        tmp,
                        args.slow_repeat,
                        args.spark_master,
                        args.spark_driver_memory,
                        args.spark_rows,
                        args.spark_budget,
                    )
            except Exception as exc:  # one engine failing must not stop the run
                res = [failure(engine, None, exc)]
            for r in res:
                n = r.setdefault("rows_per_side", rows)
                r["rows"] = 2 * n
                pairs = r.pop("pairs", None)
                if r.get("seconds") is None:
                    run.add(r)
                    continue
                if n not in band:
                    band[n] = time_band_pairs(left.slice(0, n), right.slice(0, n), window)
                    expected[n] = oracle(left.slice(0, n), right.slice(0, n), window)
                r["candidate_pairs"] = band[n]
                r["pairs_per_s"] = band[n] / r["seconds"]
                if r["engine"] == "duckdb" and n not in duckdb_pairs:
                    duckdb_pairs[n] = pairs
                ref = duckdb_pairs.get(n) if r["engine"].startswith("windgate") else None
                r["check"] = check(pairs, expected[n], ref)
                run.add(
                    r,
                    f"  {r['engine']} ({r['threads']} threads, {n:,} rows a side): {r['seconds']:.3f} s, "
                    f"{r['pairs_per_s'] / 1e9:.2f} G time-band pairs/s, {r['out_rows']:,} pairs out, "
                    f"{r['check']}",
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    results = run.results
    speedups = report.add_speedups(results)
    import windgate

    streaming = []
    if hasattr(windgate, "BandJoiner") and any(e in WINDGATE for e in engines):
        log("running windgate streaming (latency per push)")
        streaming = streaming_latency(left, right, window, threads)
    params = {
        "streaming": streaming,
        "rows_per_side": rows,
        "rate": args.rate,
        "window": window,
        "predicate": f"|l.ts - r.ts| <= {window} AND |x - a| <= {EPS_X} AND |y - b| <= {EPS_Y}",
        "time_band_pairs": band[rows],
        "expected_output_pairs": expected[rows].num_rows,
        "selectivity": f"1 in {band[rows] / max(expected[rows].num_rows, 1):,.0f} time-band pairs",
        "repeat": args.repeat,
        "slow_repeat": args.slow_repeat,
        "generate_seconds": round(gen_s, 3),
        **run.load(),
    }
    notes = [
        "Seconds are the best of the timed runs; input already in each engine's memory (not timed).",
        "time-band pairs: the (l, r) pairs with |l.ts - r.ts| <= window on the rows the engine got, counted "
        "exactly; time-band pairs/s = those over the seconds (ScaleJoin's comparisons/s, c/s, whatever the "
        "engine actually compares); rows/s = both sides' rows over the seconds.",
        "Check: the sorted (left ts, x, y, right ts, a, b) of every output pair must equal a numpy oracle's "
        "on the same rows (|y - b| in float64), and windgate's must equal DuckDB's.",
        "DuckDB: the six comparisons spelled out let its IE join use x >= a - 10 and x <= a + 10 (a narrow "
        "band); written with BETWEEN (engine duckdb_between) it joins on x >= a - 10 and y >= b - 10 and "
        "takes ~45 s at 100 k rows a side.",
        "Polars: join_where with x and y first runs out of memory; with the time band first it is fast.",
        "Spark compares every pair (nested loop), so its time grows with rows squared: it may run on fewer "
        "rows (see its notes); compare it by time-band pairs/s, not seconds.",
        "vs 1 core: rows/s over the same engine's 1-thread rows/s on the same rows in this run.",
        *(f"Speed-up in this run, {line}" for line in speedups),
    ]
    paths = run.write(
        title=f"Band join, {rows:,} rows a side, window {window}, |x-a|<=10, |y-b|<=10",
        params=params,
        notes=notes,
        columns=COLUMNS,
        plot=plot,
    )
    print(report.markdown_table(results, COLUMNS))
    print("".join(f"\nspeed-up in this run, {line}" for line in speedups))
    for r in streaming:
        print(
            f"\nwindgate streaming, {r['threads']} threads, {r['batch_rows']}-row pushes: "
            f"p50 {r['p50_ms']} ms, p90 {r['p90_ms']} ms, p99 {r['p99_ms']} ms per push; "
            f"{r['rows_per_s']:,} rows/s"
        )
    print()
    return run.done(paths, run.failed())
