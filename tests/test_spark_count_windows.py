"""Count windows on local[2]: windgate.spark.window_aggregate(rows=..., rows_slide=...) gives the local
call's rows for several partitionings of the DataFrame, keyed and unkeyed, with rows of equal time (in the
DataFrame's order, as the local call reads them); a streaming DataFrame is refused naming ``rows``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import windgate
from windgate.errors import InvalidParameterError

pytestmark = pytest.mark.spark

AGGS = {"*": "count", "v": ["sum", "min", "max", "first", "last"], "i": "sum"}


def _data(n, seed, keys=5, span=300):
    rng = np.random.default_rng(seed)
    # Whole seconds over a short span: many rows of equal time.
    ts = rng.integers(0, span, n) * 1_000_000
    k = rng.integers(0, keys, n)
    v = rng.integers(-400, 400, n) / 4
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "key": pa.array(k, pa.int64(), mask=rng.random(n) < 0.1),
            "v": pa.array(v, pa.float64(), mask=rng.random(n) < 0.1),
            "i": pa.array(rng.integers(-50, 50, n), pa.int64()),
        }
    )


def _rows(table: pa.Table):
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return sorted(rows, key=lambda r: tuple((x is not None, x) for x in r))


@pytest.mark.parametrize("partitions", [1, 3, 7])
@pytest.mark.parametrize(("rows", "slide"), [(4, 4), (5, 2), (2, 3)])
@pytest.mark.parametrize("keyed", [True, False])
def test_count_windows_equal_the_local_call(spark, partitions, rows, slide, keyed):
    from windgate import spark as wspark

    t = _data(n=1500 if keyed else 400, seed=partitions * 10 + rows)
    df = spark.createDataFrame(t.to_pandas()).repartition(partitions).cache()
    kw = dict(time="ts", rows=rows, rows_slide=slide, by="key" if keyed else None, aggs=AGGS)
    got = wspark.window_aggregate(df, **kw).toArrow()
    # The local call over the DataFrame's rows in the DataFrame's order (which orders equal times).
    want = windgate.window_aggregate(df.toArrow(), **kw)
    assert got.num_rows == want.num_rows > 0
    assert _rows(got.cast(want.schema)) == _rows(want)
    df.unpersist()


def test_ordered_is_in_completing_order(spark):
    from windgate import spark as wspark

    t = _data(n=800, seed=4, span=10**6)  # distinct times: the completing rows' order is by time
    df = spark.createDataFrame(t.to_pandas())
    kw = dict(time="ts", rows=3, rows_slide=1, by="key", aggs=AGGS)
    got = wspark.window_aggregate(df, ordered=True, **kw).toArrow()
    want = windgate.window_aggregate(df.toArrow(), **kw)
    assert got.cast(want.schema).column("window_last").equals(want.column("window_last"))
    assert _rows(got.cast(want.schema)) == _rows(want)


def test_streaming_dataframe_gives_a_stream_and_checks_parameters_first(spark):
    """A streaming DataFrame runs count windows in Structured Streaming (the windows themselves:
    tests/test_spark_streaming_count_windows.py); bad parameters raise before Spark runs."""
    from windgate import spark as wspark

    stream = spark.readStream.format("rate").load()
    kw = dict(time="timestamp", rows=3, aggs={"*": "count"}, lateness="10s")
    assert wspark.window_aggregate(stream, **kw).isStreaming
    with pytest.raises(InvalidParameterError, match="^rows_slide"):
        wspark.window_aggregate(stream, **kw, rows_slide=0)


def test_bad_parameters_before_spark_runs(spark):
    from windgate import spark as wspark

    df = spark.createDataFrame(_data(n=10, seed=1).to_pandas())
    with pytest.raises(InvalidParameterError, match="^rows"):
        wspark.window_aggregate(df, time="ts", rows=0, aggs=AGGS)
    with pytest.raises(InvalidParameterError, match="^rows"):
        wspark.window_aggregate(df, time="ts", rows=3, size="10s", aggs=AGGS)
    with pytest.raises(InvalidParameterError, match="^rows"):
        wspark.window_aggregate(df, time="ts", rows=3, plan="two_phase", aggs=AGGS)
