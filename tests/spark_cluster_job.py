"""Every windgate.spark helper against the local windgate call, on a real cluster or through Spark Connect.

Run by tests/test_spark_cluster.py in a subprocess of its own (one SparkContext per process, and a Connect
client must not share a process with a classic session):

    python tests/spark_cluster_job.py --master 'local-cluster[2,1,1024]' --out results.json
    python tests/spark_cluster_job.py --remote sc://127.0.0.1:15002 --out results.json

Writes a JSON object ``{case: {"ok": bool, "detail": str, "seconds": float}}``; exits 0 whatever the cases
found (the tests read the file), non-zero only if the session could not start.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable

import numpy as np
import pyarrow as pa

import windgate
from spark_procs import QUICK_JVM
from windgate import spark as wspark

WINDOW = dict(time="ts", size="60s", slide="20s", offset="5s")


def _events(n: int = 1500, keys: int = 5, seed: int = 7) -> pa.Table:
    """Distinct microsecond times (no ties: any row order gives the same first/last), no NaNs."""
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.choice(600_000_000, n, replace=False)).astype(np.int64)
    v = np.round(rng.normal(100, 30, n), 3)
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "k": pa.array(rng.integers(0, keys, n), pa.int64()),
            "v": pa.array(v, pa.float64(), mask=rng.random(n) < 0.05),
            "x": pa.array(rng.integers(0, 50, n), pa.int64()),
            "y": pa.array(rng.integers(0, 50, n), pa.int64()),
        }
    )


def _sides(n: int = 800, seed: int = 4) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    left = pa.table(
        {
            "ts": pa.array(np.sort(rng.integers(-300, 300, n)), pa.int64()),
            "k": pa.array(rng.integers(0, 4, n), pa.int64()),
            "x": pa.array(rng.integers(0, 60, n).astype(float)),
        }
    )
    right = pa.table(
        {
            "ts": pa.array(np.sort(rng.integers(-300, 300, n)), pa.int64()),
            "k": pa.array(rng.integers(0, 4, n), pa.int64()),
            "a": pa.array(rng.integers(0, 60, n), pa.int64()),
        }
    )
    return left, right


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


def _compare(got: pa.Table, want: pa.Table, *, ordered: bool = False) -> str:
    """'' when ``got`` (from Spark) has the local call's rows (in its order when ``ordered``)."""
    if got.column_names != want.column_names:
        return f"columns {got.column_names} != {want.column_names}"
    got = got.cast(want.schema)
    if not ordered:
        got, want = _sorted(got), _sorted(want)
    if want.num_rows == 0:
        return "the local call returned no rows: the case proves nothing"
    if not got.equals(want):
        head = got.slice(0, 3).to_pylist()
        return f"{got.num_rows} rows from Spark, {want.num_rows} locally; first rows {head}"
    return ""


def cases(spark) -> dict[str, Callable[[], str]]:
    """Each case runs one helper on Spark and locally; returns '' or what differs."""
    events = _events()
    left, right = _sides()
    df = spark.createDataFrame(events)
    ldf, rdf = spark.createDataFrame(left).repartition(3), spark.createDataFrame(right).repartition(2)
    aggs = {"*": "count", "v": ["sum", "max", "mean"], "x": ["first", "last"]}
    on = [windgate.eq("k", "k"), windgate.band("x", "a", 3)]
    pipeline = (
        windgate.Pipeline().filter(windgate.col("v").is_not_null()).sessionize(key="k", time="ts", gap="30us")
    )

    def window_keyed() -> str:
        got = wspark.window_aggregate(df, by="k", aggs=aggs, ordered=True, **WINDOW).toArrow()
        return _compare(got, windgate.window_aggregate(events, by="k", aggs=aggs, **WINDOW), ordered=True)

    def window_unkeyed() -> str:
        got = wspark.window_aggregate(df, aggs=aggs, ordered=True, **WINDOW).toArrow()
        return _compare(got, windgate.window_aggregate(events, aggs=aggs, **WINDOW), ordered=True)

    def skyline() -> str:
        kw = dict(dims=["x", "y"], prefer=["min", "max"], by="k", **WINDOW)
        return _compare(wspark.skyline(df, **kw).toArrow(), windgate.skyline(events, **kw))

    def top_dominant() -> str:
        kw = dict(dims=["x", "y"], delta=2, **WINDOW)
        return _compare(wspark.top_dominant(df, **kw).toArrow(), windgate.top_dominant(events, **kw))

    def topk() -> str:
        kw = dict(score="x", k=3, by="k", **WINDOW)
        return _compare(wspark.topk(df, **kw).toArrow(), windgate.topk(events, **kw))

    def band_join() -> str:
        got = wspark.band_join(ldf, rdf, time="ts", window=5, on=on, bucket=7).toArrow()
        return _compare(got, windgate.band_join(left, right, time="ts", window=5, on=on))

    def run_pipeline() -> str:
        got = wspark.run_pipeline(df, pipeline, partition_by="k", order_by="ts").toArrow()
        return _compare(got, pipeline.run(events, sequential=True))

    return {
        "window_aggregate_keyed": window_keyed,
        "window_aggregate_unkeyed": window_unkeyed,
        "skyline": skyline,
        "top_dominant": top_dominant,
        "topk": topk,
        "band_join": band_join,
        "run_pipeline": run_pipeline,
    }


def _executor_jvms(batches):
    """The pid of the JVM running this Python worker (the worker's parent is the executor's daemon)."""
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/stat") as f:
            jvm = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        jvm = ppid
    for batch in batches:
        yield pa.record_batch({"jvm": pa.array([jvm] * batch.num_rows, pa.int64())})


def _wait_for_executors(spark, count: int, timeout: float = 240.0) -> None:
    tracker = spark.sparkContext._jsc.sc()
    deadline = time.monotonic() + timeout
    while tracker.getExecutorMemoryStatus().size() < count + 1:  # + the driver
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} executors registered within {timeout:.0f}s")
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--master")
    where.add_argument("--remote")
    parser.add_argument("--executors", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    results: dict[str, dict] = {}
    start = time.monotonic()
    if args.remote:
        spark = SparkSession.builder.remote(args.remote).getOrCreate()
    else:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        spark = (
            SparkSession.builder.master(args.master)
            .appName("windgate-cluster-tests")
            .config("spark.executor.memory", "512m")
            .config("spark.driver.memory", "1g")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.extraJavaOptions", QUICK_JVM)
            .config("spark.executor.extraJavaOptions", QUICK_JVM)
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        _wait_for_executors(spark, args.executors)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    results["session"] = {"ok": True, "detail": type(spark).__module__, "seconds": time.monotonic() - start}
    if args.master:
        results["session"]["app_id"] = spark.sparkContext.applicationId
    try:
        todo = cases(spark)
        if args.master:
            # Before the helpers: every helper call below must run on these separate executor processes.
            def executors() -> str:
                jvms = spark.range(0, 64, numPartitions=8).mapInArrow(_executor_jvms, "jvm long").toArrow()
                seen = set(jvms["jvm"].to_pylist())
                return "" if len(seen) >= args.executors else f"tasks ran in the JVMs {sorted(seen)} only"

            todo = {"executors": executors, **todo}
        for name, case in todo.items():
            t0 = time.monotonic()
            try:
                detail, ok = case(), None
                ok = detail == ""
            except Exception:
                detail, ok = traceback.format_exc(limit=4)[-3000:], False
            results[name] = {"ok": ok, "detail": detail, "seconds": round(time.monotonic() - t0, 2)}
            print(name, results[name]["ok"], results[name]["seconds"], flush=True)
    finally:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
