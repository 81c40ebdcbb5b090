"""Session windows: windgate's ``window_aggregate(gap=...)`` against Spark's ``session_window``, DuckDB's
gaps-and-islands SQL and Polars on the same data, every answer checked against windgate's.

The data is generated in memory with numpy (``--seed``): ``--rows`` rows (default 2 M), ``ts`` int64
milliseconds drawn uniformly over ``rows * 10`` ms and sorted (so a key sees a row every ``10 * keys`` ms on
average), ``key`` int64 uniform over ``--keys`` values (default 1000), ``value`` random float64 in [0, 1).
Sessions of ``--gap`` ms (default 30 000) per key, count + sum + max, ordered by (window_end, window_start,
key). A row exactly one gap after the previous one joins its session (Spark's rule).

Engines, each timed best of ``--repeat`` from data already in its own memory format (not timed) to a
materialised result in that order:

* ``windgate``: ``windgate.window_aggregate(table, time="ts", gap=..., by="key", aggs=...)`` (one thread).
* ``duckdb``: gaps and islands (every core): ``lag(ts)`` per key flags the rows more than ``gap`` after
  the previous one, a running ``sum`` of the flags numbers the sessions, then ``GROUP BY key, session``.
* ``polars``: the same formulation with ``diff().over("key")`` and ``cum_sum().over("key")`` on a frame
  sorted by (key, ts), then ``group_by``.
* ``spark`` (``local[2]``; the JVM's start-up and the cached input are not timed, each run is):
  ``groupBy(session_window(timestamp_millis(ts), "<gap> milliseconds"), key)`` on a cached DataFrame.

Every peer's result is checked against windgate's: output rows, the sums of keys, window starts and ends and
counts (exact), and the sums of the float columns (1e-9 relative); a difference shows as ``FAIL`` and makes
the script exit 1.

    .venv/bin/python -m benches.peers sessions            # 2 M rows, best of 3
    .venv/bin/python -m benches.peers sessions --quick    # 200 k rows, 1 run
    .venv/bin/python -m benches.peers sessions --engines windgate,duckdb,polars   # no Spark

Results: ``<out>/sessions.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pyarrow as pa

from . import report, runner
from .report import log

ENGINES = ("windgate", "windgate-2t", "duckdb", "polars", "spark")


def data(rows: int, keys: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "ts": pa.array(np.sort(rng.integers(0, max(1, rows * 10), rows)), pa.int64()),
            "key": pa.array(rng.integers(0, keys, rows), pa.int64()),
            "value": pa.array(rng.random(rows), pa.float64()),
        }
    )


def run_windgate(t: pa.Table, gap: int, threads: int = 1) -> pa.Table:
    import windgate

    aggs = {"*": "count", "value": ["sum", "max"]}
    out = windgate.window_aggregate(t, time="ts", gap=gap, by="key", aggs=aggs, threads=threads)
    return out.rename_columns(["key", "window_start", "window_end", "count", "sum_value", "max_value"])


def duckdb_query(gap: int) -> str:
    return f"""
        WITH flagged AS (
            SELECT key, ts, value,
                   CASE WHEN ts - lag(ts) OVER (PARTITION BY key ORDER BY ts) <= {gap}
                        THEN 0 ELSE 1 END AS new
            FROM t),
        numbered AS (
            SELECT *, sum(new) OVER (PARTITION BY key ORDER BY ts ROWS UNBOUNDED PRECEDING) AS session
            FROM flagged)
        SELECT key, min(ts) AS window_start, max(ts) + {gap} AS window_end, count(*) AS count,
               sum(value) AS sum_value, max(value) AS max_value
        FROM numbered GROUP BY key, session
        ORDER BY window_end, window_start, key"""


def run_polars(df, gap: int) -> pa.Table:
    import polars as pl

    sid = (pl.col("ts").diff().over("key").fill_null(gap + 1) > gap).cum_sum().over("key")
    out = (
        df.sort(["key", "ts"])
        .with_columns(sid.alias("session"))
        .group_by(["key", "session"])
        .agg(
            pl.col("ts").min().alias("window_start"),
            (pl.col("ts").max() + gap).alias("window_end"),
            pl.len().alias("count"),
            pl.col("value").sum().alias("sum_value"),
            pl.col("value").max().alias("max_value"),
        )
        .sort(["window_end", "window_start", "key"])
    )
    return out.to_arrow()


def spark_frame(t: pa.Table):
    from pyspark.sql import functions as F

    from windgate.spark import local_session

    spark = local_session("windgate-bench-sessions", "local[2]")
    df = spark.createDataFrame(t.to_pandas()).withColumn("ts", F.timestamp_millis("ts")).cache()
    df.count()
    return df


def run_spark(df, gap: int) -> pa.Table:
    from pyspark.sql import functions as F

    out = df.groupBy(F.session_window("ts", f"{gap} milliseconds").alias("w"), "key").agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("value").alias("sum_value"),
        F.max("value").alias("max_value"),
    )
    out = out.select(
        "key",
        F.unix_millis(F.col("w.start")).alias("window_start"),
        F.unix_millis(F.col("w.end")).alias("window_end"),
        "count",
        "sum_value",
        "max_value",
    ).orderBy("window_end", "window_start", "key")
    return out.toArrow()


def check(out: pa.Table, ref: pa.Table) -> str:
    """``ok`` or ``FAIL: ...``: the same number of sessions, exact integer sums, float sums within 1e-9."""
    if out.num_rows != ref.num_rows:
        return f"FAIL: {out.num_rows:,} sessions != {ref.num_rows:,} (windgate)"
    for name in ("key", "window_start", "window_end", "count"):
        a = int(np.asarray(out.column(name).to_numpy(zero_copy_only=False), np.int64).sum())
        b = int(np.asarray(ref.column(name).to_numpy(zero_copy_only=False), np.int64).sum())
        if a != b:
            return f"FAIL: sum of {name} {a} != {b}"
    for ours, theirs in (("sum_value", "sum_value"), ("max_value", "max_value")):
        a = float(np.asarray(out.column(theirs).to_numpy(zero_copy_only=False), np.float64).sum())
        b = float(np.asarray(ref.column(ours).to_numpy(zero_copy_only=False), np.float64).sum())
        if not math.isclose(a, b, rel_tol=1e-9):
            return f"FAIL: sum of {theirs} {a!r} != {b!r}"
    return "ok"


def timed(engine: str, t: pa.Table, gap: int):
    """The timed call of ``engine`` on ``t``, its input already in the engine's own format."""
    if engine == "windgate":
        return lambda: run_windgate(t, gap)
    if engine == "windgate-2t":
        return lambda: run_windgate(t, gap, threads=2)
    if engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.register("t", t)
        query = duckdb_query(gap)
        return lambda: con.sql(query).to_arrow_table()
    if engine == "polars":
        import polars as pl

        df = pl.from_arrow(t)
        return lambda: run_polars(df, gap)
    started = time.perf_counter()
    sdf = spark_frame(t)
    log(f"  spark: session and cached data in {time.perf_counter() - started:.1f} s (not timed)")
    return lambda: run_spark(sdf, gap)


def main(argv: list[str] | None = None) -> int:
    p = runner.parser(__doc__, rows=2_000_000, quick="200 k rows, 1 run (< 1 min)", repeat=3)
    p.add_argument("--keys", type=int, default=1000, help="distinct keys (default 1000)")
    p.add_argument("--gap", type=int, default=30_000, help="session gap in ms (default 30000)")
    p.add_argument(
        "--engines", default=",".join(ENGINES), help=f"comma list of engines (default {','.join(ENGINES)})"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.repeat = 200_000, 1
    run = runner.Run("sessions", args.out)
    t = data(args.rows, args.keys, args.seed)
    log(f"sessions: {args.rows:,} rows, {args.keys:,} keys, gap {args.gap} ms")
    ref = None
    engines = runner.engine_list(p, args.engines, ENGINES)
    for engine in engines:
        try:
            best, runs, out = report.best_of(timed(engine, t, args.gap), args.repeat)
        except Exception as exc:  # a peer that fails is reported, not fatal
            run.add(report.failure(engine, 1, exc), "")
            continue
        if ref is None:
            ref = out
        run.add(
            {
                "engine": engine,
                "threads": {"windgate": 1, "windgate-2t": 2, "spark": 2}.get(engine, os.cpu_count()),
                "rows": args.rows,
                "seconds": best,
                "runs": runs,
                "out_rows": out.num_rows,
                "check": "reference" if out is ref else check(out, ref),
                "notes": "",
            }
        )
    paths = run.write(
        title="Session windows: windgate against Spark, DuckDB and Polars",
        params={
            "rows": args.rows,
            "keys": args.keys,
            "gap_ms": args.gap,
            "repeat": args.repeat,
            **run.load(),
        },
        notes=[
            "windgate runs on one thread, and on two as windgate-2t (keys partitioned among two session "
            "engines); DuckDB and Polars use every core; Spark runs local[2].",
            "Every peer's sessions are checked against windgate's (count, exact integer sums, float sums).",
        ],
    )
    return run.done(paths, run.failed(errors=True))


if __name__ == "__main__":
    raise SystemExit(main())
