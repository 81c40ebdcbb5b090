"""Count windows (``rows=``) of windgate.spark.window_aggregate on a streaming DataFrame: a Parquet file
stream in micro-batches, run with ``availableNow``, stopped, and restarted from its checkpoint after one more
file arrives. The windows are the local batch call's over every row the watermark released: the rows of each
key counted in time order across micro-batches and the restart, the shard the last file does not reach closed
by its timer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_spark_streaming import _canonical, _rows, _write_in_order

import spark_procs
import spark_stream_job as job
import windgate

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(spark_procs.java_missing() is not None, reason=str(spark_procs.java_missing())),
]

QUERY = dict(time="ts", rows=5, rows_slide=2, by="k", aggs={"*": "count", "v": "sum", "i": ["first", "last"]})


@pytest.fixture
def spark(spark):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", before)


def _start(spark, src: Path, out: Path, ckpt: Path, schema) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from windgate import spark as wspark

    stream = spark.readStream.schema(from_arrow_schema(schema)).option("maxFilesPerTrigger", 1)
    df = wspark.window_aggregate(stream.parquet(str(src)), **QUERY, lateness=job.LATENESS, shards=2)
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert q.exception() is None


def test_count_windows_of_a_stream_survive_a_restart(spark, tmp_path):
    src, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    src.mkdir()
    first, second = _rows(200, 1000, seed=1), _rows(200, 1400, seed=2)
    far = _rows(1, 100_000, seed=9).set_column(1, "k", pa.array([0], pa.int64()))
    _write_in_order(src, [first, second])
    _start(spark, src, out, ckpt, first.schema)
    _write_in_order(src, [first, second, far])  # the same two files again (already read), then the far row
    _start(spark, src, out, ckpt, first.schema)
    got = spark.read.parquet(str(out)).toArrow()
    # Every row but the far one is behind the last watermark (far - 15 s): released and counted.
    want = windgate.window_aggregate(pa.concat_tables([first, second]), **QUERY)
    assert want.num_rows > 100
    keys = ["k", "window_last"]
    got = _canonical(got.select(want.column_names).cast(want.schema), keys)
    assert got.equals(_canonical(want, keys))
    assert pc.min(want.column("window_rows")).as_py() == 2  # the first window of a key: its first 2 rows
