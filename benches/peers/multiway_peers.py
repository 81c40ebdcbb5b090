"""The ``multiway`` suite's peers: the k-OI query (count per key over sliding windows) on the union of the
sources, as DuckDB SQL, a Polars ``group_by_dynamic`` and Spark's ``window()`` group-by, each returning
the (window_start, key, count) rows the suite compares with windgate's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from .report import best_of, failure


def key_table(t: pa.Table, key: str) -> pa.Table:
    """(window_start as int64 ms, key, count), sorted: what the peers' results are compared on."""
    ws = t.column("window_start")
    if pa.types.is_timestamp(ws.type):
        ws = ws.cast(pa.timestamp("ms", tz=ws.type.tz)).cast(pa.int64())
    out = pa.table(
        {
            "window_start": ws.cast(pa.int64()),
            key: t.column(key).cast(pa.int32()),
            "count": t.column("count").cast(pa.int64()),
        }
    )
    return out.sort_by([("window_start", "ascending"), (key, "ascending")])


def duckdb_query(q, size_ms: int, slide_ms: int) -> str:
    n = -(-size_ms // slide_ms)
    t = "epoch_ms(ts)"
    k = f"({t} // {slide_ms} - CASE WHEN {t} % {slide_ms} < 0 THEN 1 ELSE 0 END)"
    return f"""
        WITH b AS (SELECT {q.by} AS key, {t} AS t, {k} AS k FROM u)
        SELECT j * {slide_ms} AS window_start, key AS {q.by}, count(*) AS count
        FROM b, range(k - {n - 1}, k + 1) AS r(j)
        WHERE j * {slide_ms} + {size_ms} > t
        GROUP BY ALL
        ORDER BY window_start, {q.by}
    """


def run_duckdb(union: pa.Table, q, size_ms, slide_ms, repeat, threads) -> dict:
    import duckdb

    con = duckdb.connect()
    try:
        con.register("src", union.select(["ts", q.by]))
        con.execute("CREATE TABLE u AS SELECT * FROM src")
        con.unregister("src")
        con.execute(f"SET threads={threads}")
        sql = duckdb_query(q, size_ms, slide_ms)
        best, runs, res = best_of(lambda: con.sql(sql).to_arrow_table(), repeat)
        return {
            "engine": "duckdb",
            "threads": threads,
            "seconds": best,
            "runs": runs,
            "table": res,
            "notes": f"lateral range() explode + GROUP BY, SET threads={threads}, on the union",
        }
    finally:
        con.close()


def run_polars(union: pa.Table, q, size_ms, slide_ms, repeat) -> dict:
    import polars as pl

    df = pl.from_arrow(union.select(["ts", q.by])).rechunk()
    back = -(-size_ms // slide_ms)

    def query():
        return (
            df.group_by_dynamic(
                "ts",
                every=f"{slide_ms}ms",
                period=f"{size_ms}ms",
                offset=f"{-back * slide_ms}ms",
                group_by=q.by,
                closed="left",
                label="left",
                start_by="window",
            )
            .agg(pl.len().alias("count"))
            .sort(["ts", q.by])
        )

    best, runs, res = best_of(query, repeat)
    table = res.rename({"ts": "window_start"}).to_arrow()
    return {
        "engine": "polars",
        "threads": pl.thread_pool_size(),
        "seconds": best,
        "runs": runs,
        "table": table,
        "notes": f"group_by_dynamic(every={slide_ms // 1000}s, period={size_ms // 1000}s, group_by={q.by}) "
        "+ sort, on the union (sorted by ts)",
    }


def run_spark(union: pa.Table, q, size_ms, slide_ms, repeat, master: str, tmp: Path, queries) -> list[dict]:
    """Spark's ``window()`` group-by and windgate through Spark (``queries.spark_query``, with
    ``queries`` the :mod:`windgate.queries` module in use) on the union, from a cached Parquet file."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from windgate.spark import local_session

    cores = int(master[len("local[") : -1]) if master.startswith("local[") and master[-2].isdigit() else None
    path = tmp / "union.parquet"
    pq.write_table(union.select(["ts", q.by]), path)
    t0 = time.perf_counter()
    spark = local_session("windgate-bench-multiway", master)
    start_s = time.perf_counter() - t0
    out = []
    try:
        df = spark.read.parquet(str(path)).cache()
        df.count()  # reading and decoding Parquet is not timed

        def native(d):
            return d.groupBy(
                F.window("ts", f"{size_ms // 1000} seconds", f"{slide_ms // 1000} seconds"), q.by
            ).agg(F.count(F.lit(1)).alias("count"))

        native(df.limit(10_000)).write.format("noop").mode("overwrite").save()  # JIT warm-up, not timed
        best, runs, _ = best_of(lambda: native(df).write.format("noop").mode("overwrite").save(), repeat)
        table = native(df).select(F.col("window.start").alias("window_start"), q.by, "count").toArrow()
        out.append(
            {
                "engine": "spark",
                "threads": cores,
                "seconds": best,
                "runs": runs,
                "table": table,
                "notes": f"native window() groupBy, {master}, input cached, noop sink (Spark up in "
                f"{start_s:.1f} s, not timed)",
            }
        )
        try:
            wg = lambda: queries.spark_query(q.name, df, threads=1, ordered=False)  # noqa: E731
            warm = queries.spark_query(q.name, df.limit(10_000), threads=1, ordered=False)
            warm.write.format("noop").mode("overwrite").save()  # Python workers up, not timed
            best, runs, _ = best_of(lambda: wg().write.format("noop").mode("overwrite").save(), repeat)
            out.append(
                {
                    "engine": "windgate on spark",
                    "threads": cores,
                    "seconds": best,
                    "runs": runs,
                    "table": wg().toArrow(),
                    "notes": f"windgate.queries.spark_query (repartition by key + mapInArrow), {master}, "
                    "noop sink",
                }
            )
        except Exception as exc:
            out.append(failure("windgate on spark", cores, exc))
    finally:
        spark.stop()
    return out
