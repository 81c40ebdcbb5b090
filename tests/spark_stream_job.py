"""The streaming queries of tests/test_spark_streaming.py, importable by the test and runnable as a child
process (``python tests/spark_stream_job.py QUERY SRC OUT CKPT``) that the test kills with SIGKILL while a
micro-batch runs.

Every query reads Parquet files from SRC as a stream, runs a windgate helper, writes Parquet to OUT in
append mode with its checkpoint in CKPT, and runs with ``trigger(availableNow=True)``.
"""

from __future__ import annotations

import sys

#: The window and lateness of every query: times in seconds, disorder below LATENESS.
SIZE, SLIDE, LATENESS = "20s", "10s", "15s"
LATENESS_S = 15

QUERIES = {
    "aggregate": dict(
        helper="window_aggregate",
        kw=dict(by="k", aggs={"*": "count", "v": ["sum", "max", "mean"], "i": ["sum", "min"]}, shards=2),
    ),
    "topk": dict(helper="topk", kw=dict(by="k", score="v", k=2, shards=2)),
    "skyline": dict(helper="skyline", kw=dict(dims=["v", "i"], prefer=["max", "min"])),
    # Session windows (tests/test_spark_streaming_sessions.py): gap instead of size and slide.
    "sessions": dict(
        helper="window_aggregate",
        window=dict(gap="10s"),
        kw=dict(by="k", aggs={"*": "count", "v": ["sum", "max", "mean"], "i": ["sum", "min"]}, shards=2),
    ),
}


def stream_query(spark, name: str, src: str, out: str, ckpt: str):
    """Starts query ``name`` (``availableNow``) and returns it."""
    import glob

    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    from windgate import spark as wspark

    first = sorted(glob.glob(f"{src}/*.parquet"))[0]
    schema = from_arrow_schema(pq.read_schema(first))
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
    q = QUERIES[name]
    window = q.get("window", dict(size=SIZE, slide=SLIDE))
    result = getattr(wspark, q["helper"])(stream, time="ts", **window, lateness=LATENESS, **q["kw"])
    return (
        result.writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )


#: The band join of two streams: |l.ts - r.ts| <= JOIN_WINDOW with equal keys, 2 shards.
JOIN_WINDOW = "5s"
JOIN = dict(window=JOIN_WINDOW, lateness=LATENESS, shards=2)


def join_query(spark, left: str, right: str, out: str, ckpt: str, how: str = "inner"):
    """Starts the band join of the Parquet streams in ``left`` and ``right`` (``availableNow``)."""
    import glob

    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    import windgate
    from windgate import spark as wspark

    streams = []
    for src in (left, right):
        schema = from_arrow_schema(pq.read_schema(sorted(glob.glob(f"{src}/*.parquet"))[0]))
        streams.append(spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src))
    result = wspark.band_join(*streams, time="ts", how=how, on=windgate.eq("k", "k"), **JOIN)
    return (
        result.writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )


def main(argv: list[str]) -> int:
    name, src, out, ckpt = argv
    from spark_procs import QUICK_JVM
    from windgate.spark import local_session

    conf = {"spark.sql.shuffle.partitions": "2", "spark.driver.extraJavaOptions": QUICK_JVM}
    spark = local_session("windgate-stream-child", "local[2]", **conf)
    print("session up", flush=True)
    stream_query(spark, name, src, out, ckpt).awaitTermination()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
