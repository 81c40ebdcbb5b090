"""Streams that survive failure: checkpoint costs of the streaming operators, and windgate's Structured
Streaming window aggregation against Spark's own streaming ``window()`` aggregation.

(a) Checkpoints: a ``WindowAggregator`` (``by`` key, ``count``/``sum``/``max``/``mean``) holding open state
for ``--keys`` keys (1k and 100k by default: two rows per key in open windows), and the band join and
preference queries where they can snapshot: ``snapshot()`` and ``restore()`` seconds (best of
``--repeat``) and the snapshot's size.

(b) Structured Streaming on local[2]: ``--rows`` rows over ``--stream-keys`` keys, times out of order
within the lateness, in ``--files`` Parquet files read as a file stream (one file per micro-batch,
``trigger(availableNow=True)``), a sliding window (60 s, slide 20 s, lateness 30 s) per key:

* windgate: ``windgate.spark.window_aggregate(stream, ..., lateness="30s")`` (the operators' snapshots
  in the RocksDB state store, ``transformWithStateInPandas``);
* Spark: ``stream.withWatermark("ts", "30 seconds").groupBy(window("ts", "60 seconds", "20 seconds"),
  "k").agg(...)`` in append mode, the same RocksDB state store.

Both write Parquet; the run's wall-clock seconds (start to end of the ``availableNow`` run, JVM warm) give
rows/s, each micro-batch's ``triggerExecution`` time its latency. Both outputs must be the same rows.

    python -m benches.peers streaming            # 1k and 100k keys; 400k rows in 8 files
    python -m benches.peers streaming --quick
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import plot as plots
from . import report, runner
from .report import log

AGGS = {"*": "count", "v": ["sum", "max"]}
SIZE_S, SLIDE_S, LATENESS_S = 60, 20, 30
SECOND = 1_000_000


# ------------------------------------------------------------------------------------ (a) checkpoints


def _open_state(keys: int, seed: int) -> pa.Table:
    """Two rows per key, all inside the first open windows."""
    rng = np.random.default_rng(seed)
    n = 2 * keys
    return pa.table(
        {
            "ts": pa.array(rng.integers(0, 10 * SECOND, n), pa.timestamp("us", tz="UTC")),
            "k": pa.array(np.tile(np.arange(keys), 2), pa.int64()),
            "v": pa.array(rng.normal(50, 20, n), pa.float64()),
        }
    )


def _checkpoint_case(name: str, make, rows: pa.Table, push, repeat: int, keys: int) -> dict:
    op = make()
    push(op, rows)
    snap_s, _, data = report.best_of(op.snapshot, repeat)
    restore_s, _, again = report.best_of(lambda: type(op).restore(data), repeat)
    same = again.snapshot() == data
    return {
        "engine": f"windgate {name}",
        "keys": keys,
        "snapshot_s": snap_s,
        "restore_s": restore_s,
        "snapshot_ms": round(snap_s * 1000, 2),
        "restore_ms": round(restore_s * 1000, 2),
        "total_ms": round((snap_s + restore_s) * 1000, 2),
        "snapshot_bytes": len(data),
        "check": "ok" if same else "FAIL: restore(snapshot()).snapshot() differs",
    }


def checkpoints(run: runner.Run, key_counts: list[int], repeat: int, seed: int) -> list[dict]:
    import windgate

    out = []
    for keys in key_counts:
        rows = _open_state(keys, seed)
        cases = [
            (
                "WindowAggregator",
                lambda: windgate.WindowAggregator(
                    time="ts",
                    size="60s",
                    slide="20s",
                    by="k",
                    aggs={**AGGS, "v": ["sum", "max", "mean"]},
                    lateness="30s",
                    threads=1,
                ),
                lambda op, t: op.push(t),
            ),
            (
                "TopKQuery",
                lambda: windgate.TopKQuery(
                    time="ts", size="60s", slide="20s", by="k", score="v", k=3, lateness="30s", threads=1
                ),
                lambda op, t: op.push(t),
            ),
        ]
        for name, make, push in cases:
            if not hasattr(getattr(windgate, name), "restore"):
                log(f"  {name}: no snapshot support in this build; skipped")
                continue
            r = _checkpoint_case(name, make, rows, push, repeat, keys)
            out.append(run.add(r, ""))
            log(
                f"  {name}, {keys:,} keys: snapshot {r['snapshot_s'] * 1e3:.1f} ms, restore "
                f"{r['restore_s'] * 1e3:.1f} ms, {r['snapshot_bytes'] / 1e6:.2f} MB, {r['check']}"
            )
    return out


# ------------------------------------------------------------------------------ (b) Structured Streaming


def stream_rows(rows: int, keys: int, seed: int) -> pa.Table:
    """Row ``j`` at ``j * 10 ms`` plus up to 29 s of jitter (less than the lateness), unique times."""
    rng = np.random.default_rng(seed)
    jitter = rng.integers(0, 29 * SECOND, rows)
    ts = np.arange(rows) * 10_000 + jitter + 1_700_000_000 * SECOND
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "k": pa.array(rng.integers(0, keys, rows), pa.int64()),
            "v": pa.array(np.round(rng.normal(50, 20, rows), 2), pa.float64()),
        }
    )


def _windgate_query(stream):
    from windgate.spark import window_aggregate

    return window_aggregate(
        stream,
        time="ts",
        size=f"{SIZE_S}s",
        slide=f"{SLIDE_S}s",
        by="k",
        aggs=AGGS,
        lateness=f"{LATENESS_S}s",
    )


def _spark_query(stream):
    from pyspark.sql import functions as F

    w = F.window("ts", f"{SIZE_S} seconds", f"{SLIDE_S} seconds")
    agg = (
        stream.withWatermark("ts", f"{LATENESS_S} seconds")
        .groupBy(w, "k")
        .agg(F.count(F.lit(1)).alias("count"), F.sum("v").alias("sum_v"), F.max("v").alias("max_v"))
    )
    return agg.select(
        "k",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "count",
        "sum_v",
        "max_v",
    )


def _timed_stream(spark, build, src: Path, out: Path, ckpt: Path, schema) -> tuple[float, list[dict]]:
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
    t = time.perf_counter()
    q = (
        build(stream)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    seconds = time.perf_counter() - t
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return seconds, list(q.recentProgress)


def _canonical(t: pa.Table) -> pa.Table:
    t = t.select(["k", "window_start", "window_end", "count", "sum_v", "max_v"])
    t = t.cast(pa.schema([(f.name, pa.int64() if f.name == "count" else f.type) for f in t.schema]))
    return t.sort_by([("k", "ascending"), ("window_start", "ascending")])


def _same(ours: pa.Table, spark: pa.Table) -> str:
    """ "ok" when both have the same windows and values; Spark's float sums may differ in the last bits (its
    sum depends on the order rows meet, windgate's is exact), so ``sum_v`` is compared to 1e-9 relative."""
    exact = [c for c in ours.column_names if c != "sum_v"]
    if not ours.select(exact).equals(spark.select(exact)):
        return "FAIL: " + report.describe_difference(ours.select(exact), spark.select(exact), "Spark")
    a, b = (np.asarray(t.column("sum_v").to_numpy(zero_copy_only=False), float) for t in (ours, spark))
    if not np.allclose(a, b, rtol=1e-9, atol=0):
        return "FAIL: sum_v differs from Spark's beyond 1e-9 relative"
    return "ok (sum_v to 1e-9 relative)"


def streaming(run: runner.Run, rows: int, keys: int, files: int, seed: int, master: str) -> list[dict]:
    from pyspark.sql.pandas.types import from_arrow_schema

    from windgate.spark import local_session

    spark = local_session("windgate-streaming-bench", master, **{"spark.sql.shuffle.partitions": "2"})
    data = stream_rows(rows, keys, seed)
    work = Path(tempfile.mkdtemp(prefix="wg-stream-bench-"))
    try:
        src = work / "in"
        src.mkdir()
        cut = np.linspace(0, rows, files + 1).astype(int)
        for i, (a, b) in enumerate(zip(cut[:-1], cut[1:], strict=True)):
            pq.write_table(data.slice(a, b - a), src / f"part-{i:04d}.parquet")
        schema = from_arrow_schema(data.schema)
        # Warm-up: JVM, Python workers, both plans, on the first file only.
        warm = work / "warm"
        warm.mkdir()
        shutil.copy(src / "part-0000.parquet", warm)
        for name, build in (("w", _windgate_query), ("s", _spark_query)):
            _timed_stream(spark, build, warm, work / f"warm-out-{name}", work / f"warm-ckpt-{name}", schema)
        outs, results = {}, []
        for engine, build in (
            ("windgate (transformWithState)", _windgate_query),
            ("Spark window()", _spark_query),
        ):
            tag = "windgate" if engine.startswith("windgate") else "spark"
            seconds, progress = _timed_stream(
                spark, build, src, work / f"out-{tag}", work / f"ckpt-{tag}", schema
            )
            batches = [p for p in progress if p["numInputRows"]]
            lat = [p["durationMs"]["triggerExecution"] for p in batches]
            ops = progress[-1]["stateOperators"] if progress else []
            outs[tag] = _canonical(spark.read.parquet(str(work / f"out-{tag}")).toArrow())
            results.append(
                {
                    "engine": engine,
                    "threads": 2,
                    "rows": rows,
                    "seconds": round(seconds, 2),
                    "batches": len(progress),
                    "data_batches": len(batches),
                    "batch_ms_median": statistics.median(lat) if lat else None,
                    "batch_ms_max": max(lat) if lat else None,
                    "state_bytes": ops[0].get("memoryUsedBytes") if ops else None,
                    "out_rows": outs[tag].num_rows,
                }
            )
        detail = _same(outs["windgate"], outs["spark"])
        for r in results:
            r["check"] = detail
            run.add(r)
            log(
                f"    median batch {r['batch_ms_median']} ms, max {r['batch_ms_max']} ms, "
                f"{r['batches']} batches"
            )
        return results
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def _plot(results, path, title):
    return plots.rows_per_s(
        [r for r in results if r.get("rows_per_s")],
        path,
        title,
        scale=1e3,
        xlabel="k rows/s (higher is better)",
    )


def main(argv: list[str] | None = None) -> int:
    ap = runner.parser(__doc__, rows=400_000, quick="20k rows in 4 files; 1k keys of open state", repeat=5)
    ap.add_argument("--keys", default="1000,100000", help="open-state keys of the checkpoint cases")
    ap.add_argument("--stream-keys", type=int, default=1_000, help="keys of the streaming query")
    ap.add_argument("--files", type=int, default=8, help="Parquet files, one micro-batch each")
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args(argv)
    if a.quick:
        a.rows, a.files, a.keys, a.repeat = 20_000, 4, "1000", 2
    run = runner.Run("streaming", a.out)
    log("checkpoints: snapshot and restore of open state")
    ckpt = checkpoints(run, runner.thread_counts(a.keys), a.repeat, a.seed)
    log(f"Structured Streaming: {a.rows:,} rows, {a.stream_keys:,} keys, {a.files} micro-batches")
    stream = streaming(run, a.rows, a.stream_keys, a.files, a.seed, a.master)
    ckpt_cols = (
        ("engine", "operator"),
        ("keys", "open keys"),
        ("snapshot_ms", "snapshot ms"),
        ("restore_ms", "restore ms"),
        ("total_ms", "snapshot + restore ms"),
        ("snapshot_bytes", "snapshot bytes"),
        ("check", "check"),
    )
    stream_cols = (
        ("engine", "engine"),
        ("rows", "rows in"),
        ("seconds", "seconds"),
        ("rows_per_s", "rows/s"),
        ("data_batches", "data batches"),
        ("batch_ms_median", "median batch ms"),
        ("batch_ms_max", "max batch ms"),
        ("state_bytes", "state store bytes"),
        ("out_rows", "output rows"),
        ("check", "check"),
    )
    sections = [
        "## Checkpoints\n\n" + report.markdown_table(ckpt, ckpt_cols),
        "## Structured Streaming (local[2], one run each, JVM warm)\n\n"
        + report.markdown_table(stream, stream_cols),
    ]
    paths = run.write(
        title="Streams that survive failure: checkpoints and Structured Streaming",
        params={
            "rows": a.rows,
            "stream_keys": a.stream_keys,
            "files": a.files,
            "window": f"{SIZE_S}s/{SLIDE_S}s",
            "lateness": f"{LATENESS_S}s",
            "keys": a.keys,
            "repeat": a.repeat,
            **run.load(),
        },
        notes=[
            "Checkpoint times are best of --repeat; the streaming figures are one availableNow run each.",
            "Both streaming queries use the RocksDB state store provider and 2 shuffle partitions.",
        ],
        columns=(),
        sections=sections,
        plot=_plot,
        groups=[],
    )
    return run.done(paths, run.failed())


if __name__ == "__main__":
    raise SystemExit(main())
