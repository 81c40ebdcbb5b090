"""``tz=`` on local[2]: windgate.spark.window_aggregate gives the local call's local days, whichever plan."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import windgate
from windgate.errors import InvalidParameterError

pytestmark = pytest.mark.spark

#: 2024-10-20 .. 2024-11-09 UTC: the autumn changes of Europe/Berlin (10-27) and America/New_York (11-03).
START_S = 1_729_382_400


def _data(n, seed, zone):
    rng = np.random.default_rng(seed)
    ts = (START_S + rng.integers(0, 20 * 86_400, n)) * 1_000_000
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz=zone)),
            "key": pa.array(rng.integers(0, 4, n), pa.int64()),
            "v": pa.array(rng.integers(-400, 400, n) / 4, pa.float64()),
        }
    )


def _instants(t: pa.Table, names):
    cols = {n: t[n].cast(pa.int64()) if n.startswith("window_") else t[n] for n in names}
    rows = list(zip(*(cols[n].to_pylist() for n in names), strict=True))
    return sorted(rows, key=lambda r: tuple((x is not None, x) for x in r))


@pytest.mark.parametrize(
    ("zone", "size", "slide", "by", "plan"),
    [
        ("Europe/Berlin", "1d", None, ["key"], "two_phase"),
        ("America/New_York", "2d", "1d", None, "two_phase"),
        ("Europe/Berlin", "1w", None, ["key"], "one_phase"),
        ("Europe/Berlin", "1mo", None, ["key"], "two_phase"),
        ("America/New_York", "1mo", None, None, "two_phase"),
    ],
)
def test_local_days_match_the_local_call(spark, zone, size, slide, by, plan):
    from windgate import spark as wspark

    t = _data(3000, seed=len(zone) + len(size), zone=zone)
    kw = dict(time="ts", size=size, slide=slide, tz=zone, by=by, aggs={"*": "count", "v": ["sum", "max"]})
    df = spark.createDataFrame(t.to_pandas()).repartition(3)
    got = wspark.window_aggregate(df, plan=plan, **kw).toArrow()
    want = windgate.window_aggregate(t, **kw)
    names = [*(by or []), "window_start", "window_end", "count", "sum_v", "max_v"]
    assert _instants(got, names) == _instants(want, names)
    starts, ends = (want[c].cast(pa.int64()).to_pylist() for c in ("window_start", "window_end"))
    assert len({e - s for s, e in zip(starts, ends, strict=True)}) > 1  # days of 23, 24 and 25 hours


def test_one_phase_unkeyed_is_refused(spark):
    from windgate import spark as wspark

    df = spark.createDataFrame(_data(10, seed=1, zone="UTC").to_pandas())
    with pytest.raises(InvalidParameterError, match="^tz: the one-phase plan"):
        wspark.window_aggregate(
            df, time="ts", size="1d", tz="Europe/Berlin", aggs={"*": "count"}, plan="one_phase"
        )


def test_a_stream_closes_local_days(spark, tmp_path):
    """A Parquet file stream over Berlin's autumn change, one file per micro-batch in time order: every
    local day the stream closed is the local call's."""
    import os
    import time

    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    from windgate import spark as wspark

    src = tmp_path / "in"
    src.mkdir()
    rows = _data(1500, seed=7, zone="UTC").sort_by("ts")
    far = pa.table(
        {
            "ts": pa.array([(START_S + 40 * 86_400) * 1_000_000], pa.timestamp("us", tz="UTC")),
            "key": pa.array([0], pa.int64()),
            "v": pa.array([0.0], pa.float64()),
        }
    )
    parts = [rows.slice(0, 500), rows.slice(500, 500), rows.slice(1000), far]
    now = time.time()
    for i, part in enumerate(parts):
        pq.write_table(part, src / f".part-{i}")
        (src / f".part-{i}").rename(src / f"part-{i}.parquet")
        os.utime(src / f"part-{i}.parquet", (now - 100 + i, now - 100 + i))
    kw = dict(time="ts", size="1d", tz="Europe/Berlin", by="key", aggs={"*": "count", "v": "sum"})
    stream = spark.readStream.schema(from_arrow_schema(rows.schema)).option("maxFilesPerTrigger", 1)
    df = wspark.window_aggregate(stream.parquet(str(src)), lateness="1h", shards=2, **kw)
    q = (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert q.exception() is None
    got = spark.read.parquet(str(tmp_path / "out")).toArrow()
    want = windgate.window_aggregate(pa.concat_tables(parts), **kw)
    names = ["key", "window_start", "window_end", "count", "sum_v"]
    last = max(want["window_start"].cast(pa.int64()).to_pylist())
    closed = [r for r in _instants(want, names) if r[1] != last]  # the far row's day stays open
    assert _instants(got, names) == closed
    assert len(closed) > 40


def test_a_stream_refuses_months(spark, tmp_path):
    from pyspark.sql.pandas.types import from_arrow_schema

    from windgate import spark as wspark

    stream = spark.readStream.schema(from_arrow_schema(_data(1, seed=1, zone="UTC").schema)).parquet(
        str(tmp_path)
    )
    with pytest.raises(InvalidParameterError, match='^size: month windows \\("1mo"\\) run on batch'):
        wspark.window_aggregate(stream, time="ts", size="1mo", tz="UTC", aggs={"*": "count"}, lateness="1h")
