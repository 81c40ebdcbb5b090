"""windgate.spark on streaming DataFrames: a Parquet file stream, filled in steps with rows out of order
(within the lateness), run with ``availableNow`` and restarted from its checkpoint between steps, once
after a SIGKILL in the middle of a micro-batch; the output equals the batch call over all the rows, for
every window the stream has closed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import spark_procs
import spark_stream_job as job
import windgate
from windgate.spark_streaming import state_sizes

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(spark_procs.java_missing() is not None, reason=str(spark_procs.java_missing())),
]

JOB = Path(__file__).with_name("spark_stream_job.py")
SECOND = 1_000_000


@pytest.fixture
def spark(spark):
    """The shared session with 2 shuffle partitions while a streaming query starts (a stateful query keeps
    its first run's count in the checkpoint): half the state-store tasks per micro-batch."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", before)


def _rows(n: int, start: int, seed: int, keys: int = 4) -> pa.Table:
    """Row ``j`` at ``start + 2j`` seconds plus up to 14.999 s of jitter: every row is less than the lateness
    (15 s) behind any row before it, and times are unique."""
    rng = np.random.default_rng(seed)
    jitter = rng.permutation(n) * (14_999_000 // n)
    ts = (start + 2 * np.arange(n)) * SECOND + jitter + np.arange(n)
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "k": pa.array(rng.integers(0, keys, n), pa.int64()),
            "v": pa.array(np.round(rng.normal(50, 20, n), 2), pa.float64()),
            "i": pa.array(rng.integers(-100, 100, n), pa.int64()),
        }
    )


def _write(src: Path, name: str, table: pa.Table) -> None:
    """Writes a file the stream source picks up only when complete (renamed into place)."""
    tmp = src.parent / f".{name}"
    pq.write_table(table, tmp)
    tmp.rename(src / name)


def _write_in_order(src: Path, tables: list[pa.Table]) -> None:
    """Writes one file per table, modification times one second apart: the file source (one file per
    micro-batch) takes them oldest first."""
    now = time.time()
    for i, t in enumerate(tables):
        _write(src, f"part-{i}.parquet", t)
        os.utime(src / f"part-{i}.parquet", (now - 100 + i, now - 100 + i))


def _run(spark, name: str, src: Path, out: Path, ckpt: Path) -> None:
    q = job.stream_query(spark, name, str(src), str(out), str(ckpt))
    q.awaitTermination()
    assert q.exception() is None


def _kill_mid_batch(name: str, src: Path, out: Path, ckpt: Path, tmp: Path) -> int:
    """Runs the query in a child process and SIGKILLs it once a micro-batch has started (its offsets
    written) and before it commits; returns the batch id killed."""
    done = {int(p.name) for p in (ckpt / "commits").glob("[0-9]*")}
    log = tmp / f"child-{name}.log"
    proc = spark_procs.start([sys.executable, str(JOB), name, str(src), str(out), str(ckpt)], log)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            started = {int(p.name) for p in (ckpt / "offsets").glob("[0-9]*")} - done
            if started:
                batch = min(started)
                time.sleep(0.5)  # into the batch's tasks
                proc.kill()
                proc.wait(timeout=30)
                return batch
            if proc.poll() is not None:
                pytest.fail(f"the child exited with {proc.returncode}:\n{spark_procs.tail(log)}")
            time.sleep(0.02)
        pytest.fail(f"no micro-batch started in the child:\n{spark_procs.tail(log)}")
    finally:
        spark_procs.stop(proc, grace=5.0)


def _closed(want: pa.Table, watermark_us: int) -> pa.Table:
    end = pc.cast(want.column("window_end"), pa.int64())
    return want.filter(pc.less_equal(end, watermark_us))


def _canonical(t: pa.Table, keys: list[str]) -> pa.Table:
    return t.sort_by([(k, "ascending") for k in keys])


def _steps(spark, tmp_path: Path, name: str, *, kill: bool) -> tuple[pa.Table, pa.Table]:
    """Fills the source in three steps, running the query after each (the second one killed mid-batch and
    rerun when ``kill``); returns the stream's output and all the rows written."""
    src, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    src.mkdir()
    chunks = [_rows(300, 1000 + 600 * s, seed=s) for s in range(2)]
    # The last step: more rows, then one far in the future that moves the watermark past them all.
    far = _rows(1, 100_000, seed=9)
    for step, chunk in enumerate(chunks):
        _write(src, f"part-{step}.parquet", chunk)
        if kill and step == 1:
            killed = _kill_mid_batch(name, src, out, ckpt, tmp_path)
            assert not (ckpt / "commits" / str(killed)).exists()
        _run(spark, name, src, out, ckpt)
    _write(src, "part-9.parquet", far)
    _run(spark, name, src, out, ckpt)
    got = spark.read.parquet(str(out)).toArrow()
    return got, pa.concat_tables([*chunks, far])


def test_window_aggregate_stream_survives_restarts_and_a_kill(spark, tmp_path):
    got, rows = _steps(spark, tmp_path, "aggregate", kill=True)
    q = job.QUERIES["aggregate"]["kw"]
    want = windgate.window_aggregate(
        rows, time="ts", size=job.SIZE, slide=job.SLIDE, by=q["by"], aggs=q["aggs"]
    )
    far = pc.max(pc.cast(rows.column("ts"), pa.int64())).as_py()
    want = _closed(want, far - job.LATENESS_S * SECOND)
    keys = ["k", "window_start"]
    assert got.num_rows == want.num_rows
    sizes = state_sizes(spark, str(tmp_path / "ckpt"))
    assert sizes["shard"].tolist() == [0, 1]
    assert (sizes["snapshot_bytes"] > 0).all() and sizes["late_rows"].tolist() == [0, 0]
    assert _canonical(got.select(want.column_names).cast(want.schema), keys).equals(_canonical(want, keys))


@pytest.mark.skipif(not hasattr(windgate.TopKQuery, "restore"), reason="TopKQuery has no snapshot yet")
def test_topk_stream_survives_restarts(spark, tmp_path):
    got, rows = _steps(spark, tmp_path, "topk", kill=False)
    q = job.QUERIES["topk"]["kw"]
    want = windgate.topk(rows, time="ts", size=job.SIZE, slide=job.SLIDE, by=q["by"], score="v", k=q["k"])
    far = pc.max(pc.cast(rows.column("ts"), pa.int64())).as_py()
    want = _closed(want, far - job.LATENESS_S * SECOND)
    keys = ["k", "window_start", "ts"]
    assert _canonical(got.select(want.column_names).cast(want.schema), keys).equals(_canonical(want, keys))


@pytest.mark.parametrize("how", ["inner", "left"])
def test_band_join_of_two_streams_survives_restarts(spark, tmp_path, how):
    """Left and right streams filled in two steps (rows out of order within the lateness), the query
    restarted from its checkpoint after each; then a far left row moves the watermark past every row."""
    srcs = [tmp_path / "left", tmp_path / "right"]
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    for src in srcs:
        src.mkdir()
    sides: list[list[pa.Table]] = [[], []]
    for step in range(2):
        for s, src in enumerate(srcs):
            chunk = _rows(150, 1000 + 300 * step, seed=10 * step + s)
            sides[s].append(chunk)
            _write(src, f"part-{step}.parquet", chunk)
        q = job.join_query(spark, str(srcs[0]), str(srcs[1]), str(out), str(ckpt), how)
        q.awaitTermination()
        assert q.exception() is None
    far = _rows(1, 100_000, seed=99)
    _write(srcs[0], "part-9.parquet", far)
    q = job.join_query(spark, str(srcs[0]), str(srcs[1]), str(out), str(ckpt), how)
    q.awaitTermination()
    assert q.exception() is None
    left, right = pa.concat_tables(sides[0]), pa.concat_tables(sides[1])
    want = windgate.band_join(left, right, time="ts", how=how, on=windgate.eq("k", "k"), window="5s")
    # The far row is not final (how="left": no right row past it closes it); nothing else is near it.
    want = want.filter(pc.less(pc.cast(want.column("left_ts"), pa.int64()), 100_000 * SECOND))
    got = spark.read.parquet(str(out)).toArrow()
    keys = ["left_ts", "right_ts"]
    assert want.num_rows > 100
    sizes = state_sizes(spark, str(ckpt))
    assert sizes["shard"].tolist() == [0, 1] and sizes["late_rows"].tolist() == [0, 0]
    got = got.select(want.column_names).cast(want.schema)
    assert _canonical(got, keys).equals(_canonical(want, keys))


def test_late_rows_of_a_stream_come_out_as_a_second_dataframe(spark, tmp_path):
    """``on_late="keep"``: three micro-batches (one file each); the second holds rows behind Spark's watermark
    after the first. Those rows, and only those, come out of the late DataFrame, with the watermark they met;
    the windows DataFrame is the batch call over every other row."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from windgate import spark as wspark

    src = tmp_path / "in"
    src.mkdir()
    first = _rows(200, 1000, seed=1)
    behind = _rows(40, 900, seed=2)  # 900..993 s: below 1000 + 2 * 199 - 15 s whatever the jitter
    second = pa.concat_tables([behind, _rows(100, 1500, seed=3)])
    far = _rows(1, 100_000, seed=9)
    _write_in_order(src, [first, second, far])
    stream = spark.readStream.schema(from_arrow_schema(first.schema)).option("maxFilesPerTrigger", 1)
    pair = wspark.window_aggregate(
        stream.parquet(str(src)),
        time="ts",
        size=job.SIZE,
        slide=job.SLIDE,
        by="k",
        aggs={"*": "count", "v": "sum"},
        lateness=job.LATENESS,
        on_late="keep",
        shards=2,
    )
    assert isinstance(pair, windgate.WindowsAndLate)
    for name, df in zip(("windows", "late"), pair, strict=True):
        q = (
            df.writeStream.format("parquet")
            .option("path", str(tmp_path / name))
            .option("checkpointLocation", str(tmp_path / f"ckpt-{name}"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        assert q.exception() is None
    late = spark.read.parquet(str(tmp_path / "late")).toArrow()
    windows = spark.read.parquet(str(tmp_path / "windows")).toArrow()
    assert late.column_names == ["ts", "k", "v", "i", "watermark"]
    # Each shard's watermark: Spark's (milliseconds), or its own largest time minus the lateness if higher.
    top = pc.max(pc.cast(first.column("ts"), pa.int64())).as_py() - job.LATENESS_S * SECOND
    met = pc.cast(late.column("watermark"), pa.int64()).to_pylist()
    assert set(met) <= {top // 1000 * 1000, top}
    assert all(t < w for t, w in zip(pc.cast(late.column("ts"), pa.int64()).to_pylist(), met, strict=True))
    got_late = _canonical(late.select(behind.column_names).cast(behind.schema), ["ts"])
    assert got_late.equals(_canonical(behind, ["ts"]))
    kept = pa.concat_tables([first, second.slice(behind.num_rows), far])
    want = windgate.window_aggregate(
        kept, time="ts", size=job.SIZE, slide=job.SLIDE, by="k", aggs={"*": "count", "v": "sum"}
    )
    want = _closed(want, pc.max(pc.cast(far.column("ts"), pa.int64())).as_py() - job.LATENESS_S * SECOND)
    keys = ["k", "window_start"]
    assert _canonical(windows.select(want.column_names).cast(want.schema), keys).equals(
        _canonical(want, keys)
    )


def test_revisions_of_a_stream_are_appended_rows(spark, tmp_path):
    """``allowed_lateness``: the second micro-batch's rows at 1100-1193 s, behind Spark's watermark (about
    1395 s), revise windows that fired in the first; the highest revision of every window equals the batch
    call over all the rows."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from windgate import spark as wspark

    src = tmp_path / "in"
    src.mkdir()
    first = _rows(200, 1000, seed=1)
    second = pa.concat_tables([_rows(40, 1100, seed=2), _rows(100, 1500, seed=3)])
    far = _rows(1, 100_000, seed=9)
    _write_in_order(src, [first, second, far])
    stream = spark.readStream.schema(from_arrow_schema(first.schema)).option("maxFilesPerTrigger", 1)
    q = dict(time="ts", size=job.SIZE, slide=job.SLIDE, by="k", aggs={"*": "count", "v": "sum"})
    out = wspark.window_aggregate(
        stream.parquet(str(src)), **q, lateness=job.LATENESS, allowed_lateness="600s", shards=2
    )
    query = (
        out.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    got = spark.read.parquet(str(tmp_path / "out")).toArrow()
    assert pc.max(got.column("revision")).as_py() >= 1
    latest = {}
    for r in got.to_pylist():
        key = (r["k"], r["window_start"])
        if key not in latest or r["revision"] > latest[key]["revision"]:
            latest[key] = r
    want = windgate.window_aggregate(pa.concat_tables([first, second, far]), **q)
    want = _closed(want, pc.max(pc.cast(far.column("ts"), pa.int64())).as_py() - job.LATENESS_S * SECOND)
    rows = sorted(latest.values(), key=lambda r: (r["k"], r["window_start"]))
    assert [(r["k"], r["count"], r["sum_v"]) for r in rows] == [
        (r["k"], r["count"], r["sum_v"])
        for r in sorted(want.to_pylist(), key=lambda r: (r["k"], r["window_start"]))
    ]
