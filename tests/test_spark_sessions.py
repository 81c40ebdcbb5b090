"""Session windows on local[2]: windgate.spark.window_aggregate(gap=...) gives the rows of Spark's own
``groupBy(session_window(ts, "30 seconds"), key)`` and of the local call."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import windgate

pytestmark = pytest.mark.spark


def _data(n, seed, keys=5, span=900, step=1):
    rng = np.random.default_rng(seed)
    # Whole seconds: equal times and rows exactly one gap apart (the boundary rule) are common.
    ts = rng.integers(0, span, n) * step * 1_000_000
    k = rng.integers(0, keys, n)
    k_null = rng.random(n) < 0.1
    v = rng.integers(-400, 400, n) / 4  # quarters: Spark's float sums are exact too
    v_null = rng.random(n) < 0.1
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "key": pa.array(k, pa.int64(), mask=k_null),
            "v": pa.array(v, pa.float64(), mask=v_null),
            "i": pa.array(rng.integers(-50, 50, n), pa.int64()),
        }
    )


def _spark_sessions(df, by):
    from pyspark.sql import functions as F

    cols = [F.session_window("ts", "30 seconds").alias("w"), *by]
    out = df.groupBy(*cols).agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("v").alias("sum_v"),
        F.min("v").alias("min_v"),
        F.max("v").alias("max_v"),
        F.sum("i").alias("sum_i"),
    )
    return out.select(
        *by,
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        "count",
        "sum_v",
        "min_v",
        "max_v",
        "sum_i",
    )


def _rows(table: pa.Table, names):
    rows = [tuple(r[n] for n in names) for r in table.to_pylist()]
    return sorted(rows, key=lambda r: tuple((x is not None, x) for x in r))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("keyed", [True, False])
def test_sessions_match_spark_session_window(spark, seed, keyed):
    from windgate import spark as wspark

    # Times in steps of 10 s, about one row per key and gap: many sessions, many rows exactly at a
    # session's end, equal times.
    t = _data(n=2000 if keyed else 300, seed=seed, span=1000 if keyed else 700, step=10)
    by = ["key"] if keyed else []
    df = spark.createDataFrame(t.to_pandas()).repartition(3)
    aggs = {"*": "count", "v": ["sum", "min", "max"], "i": "sum"}
    got = wspark.window_aggregate(df, time="ts", gap="30s", by=by or None, aggs=aggs).toArrow()
    want = _spark_sessions(df, by).toArrow()
    local = windgate.window_aggregate(t, time="ts", gap="30s", by=by or None, aggs=aggs)
    names = [*by, "window_start", "window_end", "count", "sum_v", "min_v", "max_v", "sum_i"]
    assert _rows(got, names) == _rows(want, names)
    assert _rows(local, names) == _rows(want, names)


def test_ordered_equals_local_call_with_first_last(spark):
    from windgate import spark as wspark

    t = _data(n=2000, seed=9)
    kw = dict(time="ts", gap="45s", by="key", aggs={"*": "count", "v": ["first", "last", "mean"]})
    df = spark.createDataFrame(t.to_pandas())
    got = wspark.window_aggregate(df, ordered=True, **kw).toArrow()
    want = windgate.window_aggregate(t, **kw)
    assert got.cast(want.schema).equals(want)


def test_boundary_rule_is_sparks(spark):
    """A row exactly at a session's end (one gap after the previous row) joins it, in Spark and windgate."""
    from windgate import spark as wspark

    t = pa.table({"ts": pa.array([0, 30, 59, 200], pa.timestamp("s", tz="UTC")), "key": [1, 1, 1, 1]})
    df = spark.createDataFrame(t.to_pandas())
    want = _rows(
        _spark_sessions(df.withColumn("v", df.key * 1.0).withColumn("i", df.key), ["key"]).toArrow(),
        ["window_start", "window_end", "count"],
    )
    got = _rows(
        wspark.window_aggregate(df, time="ts", gap="30s", by="key", aggs={"*": "count"}).toArrow(),
        ["window_start", "window_end", "count"],
    )
    assert got == want
    assert [r[2] for r in got] == [3, 1]
