"""The ``band_join`` suite's query and its peers: the predicate's constants, the pair identity every check
compares, and the join written for DuckDB (SQL), Polars (``join_where``, timed in a subprocess per thread
count so that ``POLARS_MAX_THREADS`` takes effect) and Spark (a DataFrame join on as many rows as it
finishes within a time budget).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from pathlib import Path

import pyarrow as pa

from . import runner
from .report import best_of, failure, log

#: The suite whose ``--worker polars`` runs :func:`polars_worker`.
SUITE = "band_join"
TIME = "ts"
EPS_X, EPS_Y = 10, 10
#: The pair identity the checks compare: (left ts, x, y, right ts, a, b).
PAIR_SCHEMA = pa.schema(
    [
        ("left_ts", pa.int64()),
        ("left_x", pa.int32()),
        ("left_y", pa.float32()),
        ("right_ts", pa.int64()),
        ("right_a", pa.int32()),
        ("right_b", pa.float32()),
    ]
)
#: Rows a side of Spark's two calibration runs (seconds = fixed + c * rows², fitted through both).
SPARK_CALIBRATION_ROWS = (15_000, 30_000)


def pairs_of(out) -> pa.Table:
    """The sorted pair identities of an engine's output (a pyarrow Table with left_/right_ columns)."""
    t = pa.Table.from_arrays([out.column(f.name).cast(f.type) for f in PAIR_SCHEMA], schema=PAIR_SCHEMA)
    return t.sort_by([(name, "ascending") for name in PAIR_SCHEMA.names])


def duckdb_query(window: int, between: bool = False) -> str:
    cols = "l.ts AS left_ts, l.x AS left_x, l.y AS left_y, l.z AS left_z, r.ts AS right_ts, r.a AS right_a, "
    cols += "r.b AS right_b, r.c AS right_c, r.d AS right_d, greatest(l.ts, r.ts) AS ts"
    if between:
        on = (
            f"l.ts BETWEEN r.ts - {window} AND r.ts + {window} "
            f"AND l.x BETWEEN r.a - {EPS_X} AND r.a + {EPS_X} AND l.y BETWEEN r.b - {EPS_Y} AND r.b + {EPS_Y}"
        )
    else:
        on = (
            f"l.ts >= r.ts - {window} AND l.ts <= r.ts + {window} AND l.x >= r.a - {EPS_X} "
            f"AND l.x <= r.a + {EPS_X} AND l.y >= r.b - {EPS_Y} AND l.y <= r.b + {EPS_Y}"
        )
    return f"SELECT {cols} FROM l JOIN r ON {on}"


def run_duckdb(left, right, window: int, threads: list[int], repeat: int, between: bool) -> list[dict]:
    import duckdb

    engine = "duckdb between" if between else "duckdb"
    con = duckdb.connect()
    try:
        con.register("l_src", left)
        con.register("r_src", right)
        con.execute("CREATE TABLE l AS SELECT * FROM l_src")  # native storage, not timed
        con.execute("CREATE TABLE r AS SELECT * FROM r_src")
        con.unregister("l_src")
        con.unregister("r_src")
        q = duckdb_query(window, between)
        plan = con.sql("EXPLAIN " + q).fetchall()[0][1]
        join = next(
            (op for op in ("IE_JOIN", "IE Join", "PIECEWISE", "NESTED_LOOP", "Nested") if op in plan), "?"
        )
        spelled = "BETWEEN" if between else "six explicit >= / <= comparisons"
        out = []
        for n in threads:
            try:
                con.execute(f"SET threads={n}")
                best, runs, res = best_of(lambda q=q: con.sql(q).to_arrow_table(), repeat)
                out.append(
                    {
                        "engine": engine,
                        "threads": n,
                        "seconds": best,
                        "runs": runs,
                        "out_rows": res.num_rows,
                        "pairs": pairs_of(res),
                        "notes": f"SQL inner join, {spelled} (plan: {join}), to Arrow; threads={n}",
                    }
                )
            except Exception as exc:
                out.append(failure(engine, n, exc))
        return out
    finally:
        con.close()


POLARS_NOTE = "join_where, time band first, then x, y; POLARS_MAX_THREADS={n} in a subprocess"


def polars_query(lf, rf, window: int):
    """``join_where`` with the time band's two comparisons first: with x and y first Polars' IE join runs
    out of memory on 100 k rows a side (Polars 1.x picks the join from the first comparisons)."""
    import polars as pl

    l_ = lf.rename({c: f"left_{c}" for c in lf.columns})
    r_ = rf.rename({c: f"right_{c}" for c in rf.columns})
    return l_.join_where(
        r_,
        pl.col("left_ts") >= pl.col("right_ts") - window,
        pl.col("left_ts") <= pl.col("right_ts") + window,
        pl.col("left_x") >= pl.col("right_a") - EPS_X,
        pl.col("left_x") <= pl.col("right_a") + EPS_X,
        pl.col("left_y") >= pl.col("right_b") - EPS_Y,
        pl.col("left_y") <= pl.col("right_b") + EPS_Y,
    ).with_columns(pl.max_horizontal("left_ts", "right_ts").alias(TIME))


def polars_worker(ipc_dir: str, window: int, repeat: int) -> None:
    """Runs in a subprocess with POLARS_MAX_THREADS set: time the query, write its pairs next to the inputs,
    print one JSON line."""
    import polars as pl

    d = Path(ipc_dir)
    lf, rf = pl.read_ipc(d / "left.arrow").rechunk(), pl.read_ipc(d / "right.arrow").rechunk()
    best, runs, res = best_of(lambda: polars_query(lf, rf, window), repeat)
    n = pl.thread_pool_size()
    pairs = pairs_of(res.to_arrow())
    path = d / f"polars_pairs_{n}.arrow"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, pairs.schema) as w:
        w.write_table(pairs)
    print(json.dumps({"seconds": best, "runs": runs, "pool": n, "out_rows": res.height, "pairs": str(path)}))


def run_polars(ipc_dir: Path, window: int, threads: list[int], repeat: int) -> list[dict]:
    out = []
    for n in threads:
        cmd, env = runner.worker(
            SUITE,
            *("--worker", "polars", "--ipc", str(ipc_dir), "--window", str(window), "--repeat", str(repeat)),
            POLARS_MAX_THREADS=str(n),
        )
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise RuntimeError(f"polars worker exited with {proc.returncode}: {tail}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            pool = res.pop("pool")
            if pool != n:
                log(f"polars: asked for {n} threads, its pool has {pool}")
            with pa.memory_map(res.pop("pairs")) as f:
                pairs = pa.ipc.open_file(f).read_all()
            out.append(
                {"engine": "polars", "threads": n, **res, "pairs": pairs, "notes": POLARS_NOTE.format(n=n)}
            )
        except Exception as exc:  # report per variant
            out.append(failure("polars", n, exc))
    return out


def spark_rows_for(budget: float, total: int, small: int, large: int, sink) -> tuple[int, str]:
    """The rows a side Spark's nested-loop join handles in about ``budget`` seconds (at most ``total``):
    ``sink(n)`` runs it on ``n`` rows at ``small`` and ``large`` rows, and ``seconds = fixed + c * n²`` is
    fitted through the two times. Returns the rows and how they were found."""
    t = []
    for n in (small, large):
        t0 = time.perf_counter()
        sink(n)
        t.append(time.perf_counter() - t0)
    if large <= small or t[1] <= t[0]:  # too few rows to tell, or noise: plain n² from the larger run
        fixed, c = 0.0, t[1] / max(large, 1) ** 2
    else:
        c = (t[1] - t[0]) / (large**2 - small**2)
        fixed = max(0.0, t[0] - c * small**2)
    fit = math.sqrt(max(budget - fixed, 0.0) / max(c, 1e-18))
    rows = total if fit >= total else max(1000, int(fit) // 1000 * 1000)
    how = (
        f"{small:,} and {large:,} rows took {t[0]:.2f} and {t[1]:.2f} s, so ~{budget:g} s fit "
        f"{rows:,} rows a side"
    )
    return rows, how


def run_spark(
    left: pa.Table,
    right: pa.Table,
    window: int,
    tmp: Path,
    repeat: int,
    master: str,
    driver_memory: str,
    rows: int | None,
    budget: float,
) -> list[dict]:
    """Spark's own join on the first ``rows`` rows of each side; ``rows=None``: as many as fit ``budget``
    seconds, estimated from calibration runs on fewer rows (see :func:`spark_rows_for`)."""
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    cores = int(master[len("local[") : -1]) if master.startswith("local[") and master[-2].isdigit() else None
    spark = (
        SparkSession.builder.master(master)
        .appName("windgate-bench")
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores or 2))
        .config("spark.default.parallelism", str(cores or 2))
        .getOrCreate()
    )
    loaded: dict[int, tuple] = {}

    def load(n: int):
        """Both sides' first n rows, read from Parquet, the left side split over the cores (the nested loop
        runs per left partition), cached and materialised (not timed)."""
        if n not in loaded:
            d = tmp / f"spark_{n}"
            d.mkdir(exist_ok=True)
            pq.write_table(left.slice(0, n), d / "left.parquet")
            pq.write_table(right.slice(0, n), d / "right.parquet")
            lf = spark.read.parquet(str(d / "left.parquet")).repartition(cores or 2).cache()
            rf = spark.read.parquet(str(d / "right.parquet")).cache()
            lf.count()
            rf.count()
            loaded[n] = (lf, rf)
        return loaded[n]

    def query(n: int):
        lf, rf = load(n)
        l_ = lf.select(*[F.col(c).alias(f"left_{c}") for c in lf.columns])
        r_ = rf.select(*[F.col(c).alias(f"right_{c}") for c in rf.columns])
        cond = (
            (F.col("left_ts") >= F.col("right_ts") - window)
            & (F.col("left_ts") <= F.col("right_ts") + window)
            & (F.col("left_x") >= F.col("right_a") - EPS_X)
            & (F.col("left_x") <= F.col("right_a") + EPS_X)
            & (F.col("left_y") >= F.col("right_b") - EPS_Y)
            & (F.col("left_y") <= F.col("right_b") + EPS_Y)
        )
        return l_.join(r_, cond).withColumn(TIME, F.greatest("left_ts", "right_ts"))

    def sink(n: int) -> None:
        query(n).write.format("noop").mode("overwrite").save()

    try:
        spark.sparkContext.setLogLevel("ERROR")
        total = left.num_rows
        small, large = (min(total, n) for n in SPARK_CALIBRATION_ROWS)
        sink(small)  # JIT warm-up, not timed
        plan = query(small)._jdf.queryExecution().executedPlan().toString()
        join = next(
            (op for op in ("BroadcastNestedLoopJoin", "CartesianProduct", "SortMergeJoin") if op in plan), "?"
        )
        if rows is not None:
            how = f"--spark-rows {rows:,}"
        elif total <= large:  # no more rows than a calibration run: run them all
            rows, how = total, "all rows"
        else:
            rows, how = spark_rows_for(budget, total, small, large, sink)
            log(f"spark: {how}")
        rows = min(rows, total)
        best, runs, _ = best_of(lambda: sink(rows), repeat)
        pairs = pairs_of(query(rows).select(*PAIR_SCHEMA.names).toArrow())
        note = f"DataFrame join on the six comparisons ({join}), {master}, inputs cached, noop sink"
        if rows < total:
            note += f"; ONLY the first {rows:,} of the {total:,} rows a side ({how})"
        return [
            {
                "engine": "spark",
                "threads": cores or os.cpu_count(),
                "rows_per_side": rows,
                "seconds": best,
                "runs": runs,
                "out_rows": pairs.num_rows,
                "pairs": pairs,
                "notes": note,
            }
        ]
    finally:
        spark.stop()
