"""Session windows (``gap=``) of windgate.spark.window_aggregate on a streaming DataFrame: a Parquet file
stream in four micro-batches (sessions spanning micro-batches, rows out of order within the lateness, one
that bridges two sessions of earlier micro-batches, late rows far behind the watermark), run once straight
through and once stopped after two files, killed in the middle of the third and restarted from its
checkpoint. Both give the local batch call's sessions over the rows that are not late, and Spark's own
``groupBy(session_window(...))`` in append mode; the last micro-batch feeds one shard only, so the other
shard's sessions close through its timer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from test_spark_streaming import _kill_mid_batch

import spark_procs
import spark_stream_job as job
import windgate
from windgate.errors import InvalidParameterError
from windgate.spark_streaming import state_sizes

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(spark_procs.java_missing() is not None, reason=str(spark_procs.java_missing())),
]

SECOND = 1_000_000
GAP, LATENESS, LATENESS_S = job.QUERIES["sessions"]["window"]["gap"], job.LATENESS, job.LATENESS_S
AGGS = job.QUERIES["sessions"]["kw"]["aggs"]
#: The key of the hand-made sessions: [1395, 1405) and [1411, 1423) in the first file, bridged by 1402 in
#: the second (1402 is above Spark's watermark after the first file, 1413 - 15).
BRIDGED = 7
FAR_S = 100_000


@pytest.fixture
def spark(spark):
    """2 shuffle partitions while a streaming query starts (the state-store tasks of each micro-batch)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", before)


def _table(ts_us, k, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ts_us)
    return pa.table(
        {
            "ts": pa.array(np.asarray(ts_us, np.int64), pa.timestamp("us", tz="UTC")),
            "k": pa.array(np.asarray(k, np.int64), pa.int64()),
            "v": pa.array(np.round(rng.normal(50, 20, n), 2), pa.float64()),
            "i": pa.array(rng.integers(-100, 100, n), pa.int64()),
        }
    )


def _rows(n: int, start: int, seed: int) -> pa.Table:
    """Row ``j`` at ``start + 2j`` seconds plus up to 14.999 s of jitter over keys 0-3 (about one row per key
    and gap): every row is less than the lateness behind any row before it, and times are unique."""
    rng = np.random.default_rng(seed)
    jitter = rng.permutation(n) * (14_999_000 // n)
    ts = (start + 2 * np.arange(n)) * SECOND + jitter + np.arange(n)
    return _table(ts, rng.integers(0, 4, n), seed)


def _files(far_key: int) -> tuple[list[pa.Table], pa.Table]:
    """The four files, and the late rows among them (the second part of the third file)."""
    bridged = _table(np.array([1395, 1411, 1413]) * SECOND, [BRIDGED] * 3, seed=70)
    first = pa.concat_tables([_rows(200, 1000, seed=1), bridged])  # largest time 1413 s
    bridge = _table([1402 * SECOND], [BRIDGED], seed=71)
    second = pa.concat_tables([_rows(200, 1400, seed=2), bridge])
    late = _rows(30, 900, seed=3)  # at most 973 s: sessions ending before 983 s, far below 1783 s
    third = pa.concat_tables([_rows(200, 1800, seed=4), late])
    far = _table([FAR_S * SECOND], [far_key], seed=9)
    return [first, second, third, far], late


def _write_files(src: Path, tables: list[pa.Table], first: int = 0) -> None:
    """Writes ``part-<first + i>.parquet`` (renamed into place when complete), modification times one
    second apart in that order: the file source (one file per micro-batch) takes them oldest first."""
    now = time.time()
    for i, t in enumerate(tables, start=first):
        tmp = src.parent / f".part-{i}.parquet"
        pq.write_table(t, tmp)
        tmp.rename(src / f"part-{i}.parquet")
        os.utime(src / f"part-{i}.parquet", (now - 100 + i, now - 100 + i))


def _stream(spark, src: Path):
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(pq.read_schema(next(src.glob("*.parquet"))))
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))


def _run(df, out: Path, ckpt: Path) -> None:
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert q.exception() is None


def _sessions(spark, src: Path, out: Path, ckpt: Path) -> None:
    """The query of ``spark_stream_job`` (the child the kill test runs is the same query)."""
    q = job.stream_query(spark, "sessions", str(src), str(out), str(ckpt))
    q.awaitTermination()
    assert q.exception() is None


def _spark_sessions(spark, src: Path, out: Path, ckpt: Path) -> None:
    """Spark's own session windows over the same stream (append mode, the same watermark)."""
    from pyspark.sql import functions as F

    df = _stream(spark, src).withWatermark("ts", f"{LATENESS_S} seconds")
    agg = df.groupBy(F.session_window("ts", f"{GAP[:-1]} seconds").alias("w"), "k").agg(
        F.count(F.lit(1)).alias("count"), F.max("v").alias("max_v"), F.sum("i").alias("sum_i")
    )
    cols = [F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end")]
    _run(agg.select("k", *cols, "count", "max_v", "sum_i"), out, ckpt)


def _shards(spark, keys: list[int]) -> dict[int, int]:
    """Each key's shard, as the streaming plan hashes it (``pmod(xxhash64(k), 2)``)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(k,) for k in keys], "k long")
    rows = df.select("k", F.pmod(F.xxhash64("k"), F.lit(2)).alias("s")).collect()
    return {r["k"]: r["s"] for r in rows}


def _canonical(t: pa.Table, names: list[str]) -> pa.Table:
    return t.select(names).sort_by([("k", "ascending"), ("window_start", "ascending")])


def test_session_stream_equals_batch_call_and_spark_after_a_restart(spark, tmp_path):
    shards = _shards(spark, [0, 1, 2, 3, BRIDGED])
    assert set(shards.values()) == {0, 1}
    far_key = next(k for k in range(4) if shards[k] != shards[BRIDGED])
    files, late = _files(far_key)
    src = tmp_path / "in"
    src.mkdir()
    # Stopped after two files; two more written, a run killed in the middle of the third micro-batch (its
    # offsets written, not its commit), restarted from the checkpoint.
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _write_files(src, files[:2])
    _sessions(spark, src, out, ckpt)
    _write_files(src, files[2:], first=2)
    killed = _kill_mid_batch("sessions", src, out, ckpt, tmp_path)
    assert not (ckpt / "commits" / str(killed)).exists()
    _sessions(spark, src, out, ckpt)
    restarted = spark.read.parquet(str(tmp_path / "out")).toArrow()
    # Straight through, and Spark's own session windows, over the same four files.
    _sessions(spark, src, tmp_path / "out-once", tmp_path / "ckpt-once")
    once = spark.read.parquet(str(tmp_path / "out-once")).toArrow()
    _spark_sessions(spark, src, tmp_path / "out-spark", tmp_path / "ckpt-spark")
    theirs = spark.read.parquet(str(tmp_path / "out-spark")).toArrow()

    kept = pa.concat_tables(
        [files[0], files[1], files[2].slice(0, files[2].num_rows - late.num_rows), files[3]]
    )
    want = windgate.window_aggregate(kept, time="ts", gap=GAP, by="k", aggs=AGGS)
    # Every session but the far row's is final.
    want = want.filter(pc.less(pc.cast(want.column("window_start"), pa.int64()), FAR_S * SECOND))
    names = want.column_names
    want = _canonical(want, names)
    for got in (restarted, once):
        assert _canonical(got.select(names).cast(want.schema), names).equals(want)
    mine = want.select(theirs.column_names)
    assert _canonical(theirs.cast(mine.schema), theirs.column_names).equals(mine)

    # The bridged sessions (of the first file, bridged by a row of the second) came out as one.
    bridged = want.filter(pc.equal(want.column("k"), BRIDGED)).to_pylist()
    assert [(r["window_start"].timestamp(), r["window_end"].timestamp(), r["count"]) for r in bridged] == [
        (1395, 1423, 4)
    ]
    # The far row fed one shard; the other shard's last sessions, open after the third file, closed
    # through its timer.
    open_after_third = (pc.max(pc.cast(files[2].column("ts"), pa.int64())).as_py()) - LATENESS_S * SECOND
    ends = pc.cast(want.column("window_end"), pa.int64()).to_pylist()
    timed = [k for k, end in zip(want.column("k").to_pylist(), ends, strict=True) if end >= open_after_third]
    assert {shards[k] for k in timed} == {0, 1}
    # Late rows: dropped and counted, the same in both runs.
    for ckpt in ("ckpt", "ckpt-once"):
        sizes = state_sizes(spark, str(tmp_path / ckpt))
        assert sizes["shard"].tolist() == [0, 1]
        assert sum(sizes["late_rows"]) == late.num_rows


def test_session_stream_refuses_what_sessions_do_not_take(spark, tmp_path):
    from windgate import spark as wspark

    src = tmp_path / "in"
    src.mkdir()
    _write_files(src, _files(0)[0][:1])
    stream = _stream(spark, src)
    kw = dict(time="ts", gap=GAP, by="k", aggs={"*": "count"}, lateness=LATENESS)
    with pytest.raises(InvalidParameterError, match=r"^on_late:.*session windows"):
        wspark.window_aggregate(stream, **kw, on_late="keep")
    with pytest.raises(InvalidParameterError, match=r"^allowed_lateness:"):
        wspark.window_aggregate(stream, **kw, allowed_lateness="60s")
    with pytest.raises(InvalidParameterError, match=r"^gap:.*size"):
        wspark.window_aggregate(stream, **kw, size="10s")
    with pytest.raises(InvalidParameterError, match=r"^lateness:"):
        wspark.window_aggregate(stream, **{**kw, "lateness": None})


def test_late_row_fails_an_unkeyed_session_stream_with_on_late_error(spark, tmp_path):
    """No ``by`` (one shard): the second file's rows far behind Spark's watermark fail the query with the
    operator's LateRowError; the sessions the first file closed came out before."""
    from pyspark.errors import StreamingQueryException

    from windgate import spark as wspark

    src = tmp_path / "in"
    src.mkdir()
    j = np.arange(60)
    first = _table((1000 + 7 * j + 20 * (j // 4)) * SECOND, np.zeros(60), seed=5)  # 4 rows a session
    _write_files(src, [first, _rows(5, 900, seed=6)])
    df = wspark.window_aggregate(
        _stream(spark, src), time="ts", gap=GAP, aggs={"*": "count"}, lateness=LATENESS, on_late="error"
    )
    with pytest.raises(StreamingQueryException, match="late row"):
        _run(df, tmp_path / "out", tmp_path / "ckpt")
    got = spark.read.parquet(str(tmp_path / "out")).toArrow()
    wm = pc.max(pc.cast(first.column("ts"), pa.int64())).as_py() - LATENESS_S * SECOND
    want = windgate.window_aggregate(first, time="ts", gap=GAP, aggs={"*": "count"})
    # The first micro-batch closed the sessions ending below its own watermark (Spark's was still unset).
    want = want.filter(pc.less(pc.cast(want.column("window_end"), pa.int64()), wm))
    assert want.num_rows > 5
    assert got.select(want.column_names).cast(want.schema).sort_by("window_start").equals(want)
