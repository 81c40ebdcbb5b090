"""TPCx-BB-like queries Q1, Q2, Q3, Q4 and Q15 (``docs/tpcxbb.md``) on windgate's ordered pipelines, next to
the same queries in DuckDB SQL and Spark DataFrame code, on the same generated data, in one run. The
parallel executor's experiments follow Prasaad, Ramalingam and Rajan, *Scaling Ordered Stream Processing on
Shared-Memory Multicores* (the figures named below are theirs).

The data is generated once (``windgate.tpcxbb.generate``, ``--rows`` rows in each of the clickstream and the
store-sales table). For each query:

* **windgate sequential**: the sequential executor; its result is the reference every other run is checked
  against, row for row.
* **B1 heuristics** (paper Fig. 8): the parallel executor at 1 and 2 threads under each
  scheduling heuristic CT, LP, QST and ET (HYBRID partitioning, NON-BLOCKING reordering); throughput in input
  rows/s and processing latency (markers, 20th-80th percentile mean, from the run's stats); the latency
  ranking of the heuristics.
* **B4 partitioning** (Fig. 11): HYBRID against PARTITIONED under CT.
* **B7 reordering** (Fig. 14): NON-BLOCKING against LOCK-BASED under CT.
* the parallel executor on 1 thread against the sequential one (overhead), and rows/s per core.
* **peers**: the query as DuckDB SQL (threads 1 and 2) and as Spark DataFrame code on ``local[1]`` and
  ``local[2]`` (``tpcxbb_peers.py``; input cached first, one untimed warm-up run, only the query timed).

Every engine's output must equal windgate's sequential result row for row (the doc's orders are total;
floats bit for bit: Q4's mean and Q15's slope and intercept are exact integer sums rounded once). A
difference prints FAIL and the script exits 1.

    .venv/bin/python -m benches.peers tpcxbb --out bench-results            # 300k rows, about 2 minutes
    .venv/bin/python -m benches.peers tpcxbb --out /tmp/x --quick           # 20k rows, about 40 seconds

Results: ``<out>/tpcxbb.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from . import plot as plots
from . import report, runner
from . import tpcxbb_peers as peers
from .report import best_of, failure, fmt_rate, log

NAME = "tpcxbb"
HEURISTICS = ("ct", "lp", "qst", "et")
ENGINES = ("windgate", "duckdb", "spark")
SEQUENTIAL = "windgate sequential"


def windgate_label(scheduler: str, partitioning: str = "hybrid", reorder: str = "nonblocking") -> str:
    """``"windgate ct"``, ``"windgate ct partitioned"``, ``"windgate ct locked"``."""
    extra = [x for x, default in ((partitioning, "hybrid"), (reorder, "nonblocking")) if x != default]
    return " ".join(["windgate", scheduler, *extra])


def windgate_configs(threads: list[int]) -> list[dict]:
    """The parallel runs per query: B1 (every heuristic), B4 (PARTITIONED under CT), B7 (LOCKED under CT).
    HYBRID + NON-BLOCKING under CT is the B4 and B7 baseline, run once."""
    out = []
    for n in threads:
        for h in HEURISTICS:
            out.append({"threads": n, "scheduler": h, "partitioning": "hybrid", "reorder": "nonblocking"})
        out.append({"threads": n, "scheduler": "ct", "partitioning": "partitioned", "reorder": "nonblocking"})
        out.append({"threads": n, "scheduler": "ct", "partitioning": "hybrid", "reorder": "locked"})
    return out


# --------------------------------------------------------------------------------------------- windgate


def windgate_tpcxbb():
    """``windgate.tpcxbb``; raises ImportError when this windgate build has none."""
    from windgate import tpcxbb

    return tpcxbb


def run_windgate(name: str, table: pa.Table, config: dict | None, chunk_rows: int, marker_every: int):
    """One run of query ``name``: the sequential executor when ``config`` is None, else the parallel one with
    ``config``'s threads, scheduler, partitioning and reorder scheme. Returns (result table, run stats)."""
    pipeline = windgate_tpcxbb().query(name)
    if config is None:
        out = pipeline.run(table, sequential=True, chunk_rows=chunk_rows)
    else:
        out = pipeline.run(table, chunk_rows=chunk_rows, marker_every=marker_every, **config)
    return out, pipeline.stats


def measure_windgate(name, table, config, repeat, chunk_rows, marker_every) -> dict:
    """Best-of-``repeat`` wall time of one configuration; latency = mean over the runs of each run's marker
    latency (the paper's protocol: mean of runs, 20th-80th percentile markers)."""
    stats: list[dict] = []

    def once():
        out, st = run_windgate(name, table, config, chunk_rows, marker_every)
        stats.append(st)
        return out

    label = (
        SEQUENTIAL
        if config is None
        else windgate_label(config["scheduler"], config["partitioning"], config["reorder"])
    )
    threads = 1 if config is None else config["threads"]
    try:
        # One untimed run first: the first run in a process pays for page faults and allocator arenas (the
        # first query measured was up to 1.7x slower than its repeats).
        run_windgate(name, table, config, chunk_rows, marker_every)
        best, runs, out = best_of(once, repeat)
    except Exception as exc:  # report this configuration, go on with the next
        return failure(label, threads, exc)
    lat = [s["latency_s"] * 1e3 for s in stats if s.get("latency_s") is not None]
    r = {
        "engine": label,
        "threads": threads,
        "executor": "sequential" if config is None else "parallel",
        **({} if config is None else config),
        "seconds": best,
        "runs": runs,
        "latency_ms": statistics.fmean(lat) if lat else None,
        "stats_rows_per_s": stats[runs.index(best)].get("rows_per_s"),
        "markers": stats[-1].get("markers"),
        "table": out,
        "out_rows": out.num_rows,
    }
    return r


# --------------------------------------------------------------------------------------------- peers


def run_duckdb(
    tables: dict[str, pa.Table], queries: list[str], threads: list[int], repeat: int
) -> list[dict]:
    out = []
    for n in threads:
        con = peers.duckdb_connect(tables["clickstream"], tables["store_sales"], n)  # load: not timed
        try:
            for q in queries:
                try:
                    best, runs, res = best_of(lambda q=q, con=con: peers.duckdb_query(con, q), repeat)
                except Exception as exc:
                    out.append({"query": q, **failure("duckdb", n, exc)})
                    continue
                out.append(
                    {
                        "query": q,
                        "engine": "duckdb",
                        "threads": n,
                        "seconds": best,
                        "runs": runs,
                        "table": res,
                        "out_rows": res.num_rows,
                        "notes": "SQL of tpcxbb_peers.DUCKDB_SQL on DuckDB tables (loaded, not timed)",
                    }
                )
        finally:
            con.close()
    return out


def run_spark(
    tables: dict[str, pa.Table], queries: list[str], masters: list[str], repeat: int, tmp: Path
) -> list[dict]:
    import pyarrow.parquet as pq

    from windgate.spark import local_session

    paths = {}
    for name, t in tables.items():
        paths[name] = tmp / f"{name}.parquet"
        pq.write_table(t, paths[name])
    out = []
    for master in masters:
        cores = int(master[len("local[") : -1])
        t0 = time.perf_counter()
        spark = local_session(
            f"windgate-bench-tpcxbb-{cores}",
            master,
            **{"spark.sql.shuffle.partitions": str(cores), "spark.default.parallelism": str(cores)},
        )
        up = time.perf_counter() - t0
        try:
            frames = {name: spark.read.parquet(str(p)).cache() for name, p in paths.items()}
            for df in frames.values():
                df.count()  # reading and caching the input is not timed
            for q in queries:
                try:
                    peers.spark_query(q, frames)  # warm-up (query compilation, JIT), not timed
                    best, runs, res = best_of(lambda q=q, f=frames: peers.spark_query(q, f), repeat)
                except Exception as exc:
                    out.append({"query": q, **failure("spark", cores, exc)})
                    continue
                out.append(
                    {
                        "query": q,
                        "engine": "spark",
                        "threads": cores,
                        "seconds": best,
                        "runs": runs,
                        "table": res,
                        "out_rows": res.num_rows,
                        "notes": f"tpcxbb_peers.spark_{q}, {master}, input cached, ordered, toArrow(); "
                        f"one warm-up run; session up in {up:.1f} s (not timed)",
                    }
                )
        finally:
            spark.stop()
    return out


# --------------------------------------------------------------------------------------------- report


def _ms(v) -> str:
    return f"{v:.2f}"


def _x(v) -> str:
    return f"{v:.2f}x"


LISTING = (
    ("query", "query"),
    ("engine", "engine"),
    ("threads", "cores"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("rows_per_s_per_core", "rows/s per core"),
    ("speedup", "vs 1 core"),
    ("latency_ms", "latency ms", _ms),
    ("overhead", "vs sequential", _x),
    ("out_rows", "output rows"),
    ("check", "check"),
)


def find(results, **kv):
    return next((r for r in results if all(r.get(k) == v for k, v in kv.items())), None)


def rate(r: dict | None, key: str = "rows_per_s") -> str:
    return "" if r is None or not r.get(key) else fmt_rate(r[key])


def summary_rows(results: list[dict], queries: list[str]) -> list[dict]:
    """The main table: per query, rows/s of the headline engines and whether every run matched."""
    rows = []
    for q in queries:
        mine = [r for r in results if r.get("query") == q]
        seq = find(mine, engine=SEQUENTIAL)
        row = {"query": q, "out_rows": seq.get("out_rows") if seq else None}
        for key, engine, n in (
            ("seq", SEQUENTIAL, 1),
            ("ct1", "windgate ct", 1),
            ("ct2", "windgate ct", 2),
            ("duck1", "duckdb", 1),
            ("duck2", "duckdb", 2),
            ("spark1", "spark", 1),
            ("spark2", "spark", 2),
        ):
            row[key] = rate(find(mine, engine=engine, threads=n))
        ranked = latency_ranking(mine, 2)
        row["latency"] = ranked or ""
        bad = [f"{r['engine']} ({r.get('threads')}c)" for r in mine if not _passed(r)]
        row["checks"] = "all ok" if not bad else "not ok: " + ", ".join(bad)
        rows.append(row)
    return rows


SUMMARY = (
    ("query", "query"),
    ("seq", "windgate sequential"),
    ("ct1", "windgate CT 1t"),
    ("ct2", "windgate CT 2t"),
    ("duck1", "DuckDB 1t"),
    ("duck2", "DuckDB 2t"),
    ("spark1", "Spark local[1]"),
    ("spark2", "Spark local[2]"),
    ("latency", "latency ranking, 2 threads (ms)"),
    ("out_rows", "output rows"),
    ("checks", "row-for-row checks"),
)


def _passed(r: dict) -> bool:
    return r.get("check") == "reference" or str(r.get("check", "")).startswith("ok")


def latency_ranking(results: list[dict], threads: int) -> str | None:
    """``"lp 1.2 < ct 3.4 < ..."``: the heuristics by mean marker latency at ``threads``."""
    lat = []
    for h in HEURISTICS:
        r = find(results, engine=windgate_label(h), threads=threads)
        if r and r.get("latency_ms") is not None:
            lat.append((r["latency_ms"], h))
    if not lat:
        return None
    return " < ".join(f"{h.upper()} {v:.2f}" for v, h in sorted(lat))


def pivot(
    results: list[dict],
    queries: list[str],
    engines: list[str],
    threads: list[int],
    title: str,
    key: str = "rows_per_s",
) -> str:
    """Per (query, engine): ``key`` (a rows/s) and the latency at each thread count, and the speed-up of the
    last thread count over the first in ``key``."""
    what = "rows/s (run stats)" if key == "stats_rows_per_s" else "rows/s"
    head = ["query", "engine"]
    for n in threads:
        head += [f"{what} {n}t", f"latency ms {n}t"]
    head += [f"{threads[0]} -> {threads[-1]}t"] if len(threads) > 1 else []
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for q in queries:
        for e in engines:
            cells = [q, e]
            rs = [find(results, query=q, engine=e, threads=n) for n in threads]
            if not any(rs):
                continue
            for r in rs:
                cells += [
                    rate(r, key),
                    "" if r is None or r.get("latency_ms") is None else _ms(r["latency_ms"]),
                ]
            if len(threads) > 1:
                first, last = rs[0], rs[-1]
                ok = first and last and first.get(key) and last.get(key)
                cells.append(_x(last[key] / first[key]) if ok else "")
            lines.append("| " + " | ".join(cells) + " |")
    return f"## {title}\n\n" + "\n".join(lines)


def ranking_section(results: list[dict], queries: list[str], threads: list[int]) -> str:
    lines = [
        "## B1: latency ranking of the heuristics (mean marker latency, ms)",
        "",
        "Paper: LP < CT << ET, QST; LP in the low milliseconds.",
        "",
        "| query | " + " | ".join(f"{n} thread{'s' if n > 1 else ''}" for n in threads) + " |",
        "|---|" + "---|" * len(threads),
    ]
    for q in queries:
        mine = [r for r in results if r.get("query") == q]
        lines.append(f"| {q} | " + " | ".join(latency_ranking(mine, n) or "" for n in threads) + " |")
    return "\n".join(lines)


def overhead_section(results: list[dict], queries: list[str]) -> str:
    lines = [
        "## Overhead of the parallel executor and per-core throughput",
        "",
        "| query | sequential s | parallel CT 1 thread s | overhead | rows/s per core, CT 1t | CT 2t |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for q in queries:
        seq = find(results, query=q, engine=SEQUENTIAL)
        one = find(results, query=q, engine="windgate ct", threads=1)
        two = find(results, query=q, engine="windgate ct", threads=2)
        if not (seq and seq.get("seconds") and one and one.get("seconds")):
            continue
        per_core = [
            "" if r is None or not r.get("rows_per_s_per_core") else fmt_rate(r["rows_per_s_per_core"])
            for r in (one, two)
        ]
        lines.append(
            f"| {q} | {seq['seconds']:.3f} | {one['seconds']:.3f} | {one['seconds'] / seq['seconds']:.2f}x | "
            + " | ".join(per_core)
            + " |"
        )
    return "\n".join(lines)


def plot(results, path, title, queries):
    """Per query: input rows/s of every engine (top) and the heuristics' marker latency (bottom)."""
    bars = [
        (SEQUENTIAL, 1),
        *((windgate_label(h), 2) for h in HEURISTICS),
        ("windgate ct partitioned", 2),
        ("windgate ct locked", 2),
        ("duckdb", 1),
        ("duckdb", 2),
        ("spark", 1),
        ("spark", 2),
    ]
    tops, bottoms = [], []
    for q in queries:
        hits = [(e, n, find(results, query=q, engine=e, threads=n)) for e, n in bars]
        hits = [(e, n, r) for e, n, r in hits if r and r.get("rows_per_s")]
        tops.append(
            plots.HBars(
                f"{q}: M input rows/s",
                labels=[f"{e.replace('windgate ', 'wg ')} {n}c" for e, n, _ in hits],
                values=[r["rows_per_s"] / 1e6 for _, _, r in hits],
                colors=[plots.engine_color(e) for e, _, _ in hits],
                label_size=7,
                plain_log_labels=True,
                headroom=None,
            )
        )

        def latency(h, n, q=q):
            r = find(results, query=q, engine=windgate_label(h), threads=n)
            return r["latency_ms"] if r and r.get("latency_ms") is not None else 0.0

        bottoms.append(
            plots.Bars(
                f"{q}: marker latency ms (B1)",
                [h.upper() for h in HEURISTICS],
                {f"{n} thread(s)": [latency(h, n) for h in HEURISTICS] for n in (1, 2)},
            )
        )
    return plots.figure(path, title, [*tops, *bottoms], ncols=len(queries), panel_size=(3.8, 4.25), dpi=100)


# --------------------------------------------------------------------------------------------- main


def parse_args(argv):
    p = runner.parser(
        __doc__,
        rows=300_000,
        rows_help="rows of each generated table (default 300,000)",
        quick="20,000 rows, 1 timed run each (smoke test)",
    )
    p.add_argument("--queries", default=",".join(peers.QUERIES), help="comma list (default all five)")
    p.add_argument("--engines", default=",".join(ENGINES), help=f"comma list of: {', '.join(ENGINES)}")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of windgate and DuckDB, best kept (3)")
    p.add_argument("--slow-repeat", type=int, default=2, help="timed runs of Spark after a warm-up (2)")
    p.add_argument(
        "--chunk-rows", type=int, default=8192, help="rows per pipeline item (default 8192, the library's)"
    )
    p.add_argument("--marker-every", type=int, default=1, help="a latency marker every N items (default 1)")
    args = p.parse_args(argv)
    args.queries = [q.strip().lower() for q in args.queries.split(",") if q.strip()]
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    args.threads = [int(x) for x in args.threads.split(",") if x.strip()]
    if bad := sorted(set(args.queries) - set(peers.QUERIES)):
        p.error(f"unknown queries {bad}; choose from {', '.join(peers.QUERIES)}")
    if bad := sorted(set(args.engines) - set(ENGINES)):
        p.error(f"unknown engines {bad}; choose from {', '.join(ENGINES)}")
    if args.quick:
        args.rows, args.repeat, args.slow_repeat = 20_000, 1, 1
    return args


def check_all(results: list[dict]) -> None:
    """Every result's ``check`` against the sequential result of its query (row for row, floats exact)."""
    refs = {
        r["query"]: r["table"]
        for r in results
        if r.get("engine") == SEQUENTIAL and r.get("table") is not None
    }
    for r in results:
        if r.get("seconds") is None:
            continue
        ref = refs.get(r["query"])
        if r["engine"] == SEQUENTIAL:
            r["check"] = "reference"
        elif ref is None:
            r["check"] = "not checked (no sequential result)"
        else:
            diff = peers.compare(r["table"], ref)
            r["check"] = "ok (= sequential, exact)" if diff is None else f"FAIL: {diff}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = runner.Run(NAME, args.out)
    try:
        tpcxbb = windgate_tpcxbb()
    except ImportError as exc:
        log(f"windgate.tpcxbb is not importable ({exc}); build it with `make setup`")
        return 2
    log(f"generating {args.rows:,} clickstream and {args.rows:,} store-sales rows (seed {args.seed})")
    t0 = time.perf_counter()
    clickstream, store_sales = tpcxbb.generate(args.rows, seed=args.seed)
    gen_s = time.perf_counter() - t0
    tables = {"clickstream": clickstream.combine_chunks(), "store_sales": store_sales.combine_chunks()}
    log(f"generated in {gen_s:.2f} s")

    results: list[dict] = []
    if "windgate" in args.engines:
        configs = [None, *windgate_configs(args.threads)]
        for q in args.queries:
            table = tables[peers.INPUT[q]]
            for config in configs:
                r = measure_windgate(q, table, config, args.repeat, args.chunk_rows, args.marker_every)
                r["query"] = q
                results.append(r)
                if r.get("seconds") is not None:
                    lat = "" if r.get("latency_ms") is None else f", latency {r['latency_ms']:.2f} ms"
                    took = f"{r['seconds']:.3f} s{lat}, {r['out_rows']:,} rows"
                    log(f"  {q} {r['engine']} ({r['threads']}t): {took}")
    if "duckdb" in args.engines:
        log("running DuckDB")
        results += run_duckdb(tables, args.queries, args.threads, args.repeat)
    if "spark" in args.engines:
        log("running Spark")
        tmp = Path(tempfile.mkdtemp(prefix="windgate-bench-tpcxbb-"))
        try:
            results += run_spark(
                tables, args.queries, [f"local[{n}]" for n in args.threads], args.slow_repeat, tmp
            )
        except Exception as exc:  # Spark missing or failing must not lose the rest
            results.append({"query": "all", **failure("spark", None, exc)})
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    for r in results:
        r.setdefault("rows", args.rows)
        r["scaling_group"] = f"{r.get('query')} {r['engine']}"
    check_all(results)
    report.add_speedups(results)
    for r in results:
        seq = find(results, query=r.get("query"), engine=SEQUENTIAL)
        if (
            r.get("executor") == "parallel"
            and r["threads"] == 1
            and seq
            and seq.get("seconds")
            and r.get("seconds")
        ):
            r["overhead"] = r["seconds"] / seq["seconds"]
        r.pop("table", None)
        r.pop("scaling_group", None)

    load = run.load()
    busy = load["cpu_busy_by_others"]
    wg_engines = [SEQUENTIAL, *(windgate_label(h) for h in HEURISTICS)]
    sections = [
        pivot(
            results,
            args.queries,
            wg_engines,
            args.threads,
            "B1: heuristics (HYBRID, NON-BLOCKING)",
            key="stats_rows_per_s",
        ),
        ranking_section(results, args.queries, args.threads),
        pivot(
            results,
            args.queries,
            ["windgate ct", "windgate ct partitioned"],
            args.threads,
            "B4: HYBRID vs PARTITIONED partitioning under CT",
            key="stats_rows_per_s",
        ),
        pivot(
            results,
            args.queries,
            ["windgate ct", "windgate ct locked"],
            args.threads,
            "B7: NON-BLOCKING vs LOCK-BASED reordering under CT",
            key="stats_rows_per_s",
        ),
        overhead_section(results, args.queries),
        pivot(results, args.queries, [SEQUENTIAL, "windgate ct", "duckdb", "spark"], args.threads, "Peers"),
        "## Every run\n\n" + report.markdown_table(results, LISTING),
    ]
    params = {
        "rows": args.rows,
        "seed": args.seed,
        "queries": args.queries,
        "threads": args.threads,
        "repeat": args.repeat,
        "slow_repeat": args.slow_repeat,
        "chunk_rows": args.chunk_rows,
        "marker_every": args.marker_every,
        "generate_seconds": round(gen_s, 3),
        **load,
    }
    notes = [
        "rows/s = input rows of the query's table (all of them, before any filter) over the best wall time "
        "of the query, from the input in the engine's memory to the ordered result as an Arrow table.",
        "windgate runs from the in-memory Arrow table, cut into pipeline items of --chunk-rows rows; "
        "latency = processing latency of markers sent every --marker-every items (first operator start "
        "to leaving the last operator), mean of the 20th-80th percentile markers, averaged over the timed "
        "runs.",
        "Defaults of the parallel executor unless the row says otherwise: HYBRID partitioning, NON-BLOCKING "
        "reordering, S = 1024 reorder slots, τ = 500 µs, W = 20 ms.",
        "Checks: every output equals windgate's sequential result row for row, column types included, floats "
        "bit for bit.",
        "B1, B4 and B7 give the throughput from the run's stats (input rows over the executor's elapsed "
        "time, of the run with the best wall time); the peers table and the summary give wall time around "
        "the call, the same measure as DuckDB's and Spark's.",
        "Spark: DataFrame code of tpcxbb_peers.py; the session start, reading and caching are not timed.",
        f"Other processes kept the machine {busy:.0%} busy during the run." if busy is not None else "",
    ]
    paths = run.write(
        title=f"TPCx-BB-like queries on ordered pipelines, {args.rows:,} rows a table",
        params=params,
        notes=[n for n in notes if n],
        columns=SUMMARY,
        sections=sections,
        plot=lambda _s, path, title: plot(results, path, title, args.queries),
        results=summary_rows(results, args.queries),
        extra={"rows": results},  # every run, not just the summary
    )
    print(paths["md"].read_text())
    return run.done(paths, run.failed(results))
