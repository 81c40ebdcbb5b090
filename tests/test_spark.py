"""windgate.spark on local[2]: the same rows as the local call and as Spark's own window() group-by."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

import windgate

pytestmark = pytest.mark.spark


def _data(n=6000, keys=7, seed=3):
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 1800, n)) * 1_000_000 + rng.integers(0, 1_000_000, n)
    v = np.round(rng.normal(100, 30, n), 3)
    v_null = rng.random(n) < 0.05
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "k": pa.array(rng.integers(0, keys, n), pa.int64()),
            "v": pa.array(np.where(v_null, np.nan, v), pa.float64(), mask=v_null),
            "i": pa.array(rng.integers(-50, 50, n), pa.int64()),
        }
    )


def _local_and_spark(spark, table, **kw):
    from windgate import spark as wspark

    df = spark.createDataFrame(table.to_pandas()).repartition(3)
    got = wspark.window_aggregate(df, ordered=True, **kw).toArrow()
    want = windgate.window_aggregate(table, **kw)
    return got.cast(want.schema), want


def test_keyed_matches_local_call(spark):
    t = _data()
    kw = dict(
        time="ts",
        size="60s",
        slide="20s",
        by="k",
        aggs={"*": "count", "v": ["sum", "min", "max", "mean", "std"], "i": ["sum", "first", "last"]},
    )
    # Spark's repartition shuffles rows, but ties are broken by the original row order, so first/last agree.
    got, want = _local_and_spark(spark, t, **kw)
    assert got.equals(want)


def test_farm_with_long_windows_matches_the_reference(spark):
    # 60 panes a window: the farm's window stage builds windows in blocks from shared suffixes and prefixes.
    from windgate import spark as wspark

    t = _data(n=5000)
    kw = dict(time="ts", size="600s", slide="10s", by="k", aggs={"*": "count", "v": ["sum", "max", "std"]})
    df = spark.createDataFrame(t.to_pandas()).repartition(3)
    want = windgate.window_aggregate(t, strategy="reference", **kw)
    got = wspark.window_aggregate(df, ordered=True, strategy="farm", **kw).toArrow()
    assert got.cast(want.schema).equals(want)


def test_unkeyed_time_ranges_match_local_call(spark):
    t = _data(n=4000)
    kw = dict(time="ts", size="90s", slide="30s", offset="5s", aggs={"*": "count", "v": ["sum", "max"]})
    got, want = _local_and_spark(spark, t, **kw)
    assert got.equals(want)
    from windgate import spark as wspark

    df = spark.createDataFrame(t.to_pandas())
    small = wspark.window_aggregate(df, range_size="30s", ordered=True, **kw).toArrow().cast(want.schema)
    assert small.equals(want)  # ranges shorter than a window: rows are copied into several ranges


def test_matches_spark_native_window_groupby(spark):
    from pyspark.sql import functions as F

    from windgate import spark as wspark

    t = _data(n=5000, keys=5, seed=11)
    df = spark.createDataFrame(t.to_pandas())
    ours = wspark.window_aggregate(
        df,
        ordered=True,
        time="ts",
        size="60s",
        slide="10s",
        by="k",
        aggs={"*": "count", "v": ["count", "sum", "min", "max", "mean", "var"], "i": ["sum"]},
    ).toPandas()
    native = (
        df.groupBy(F.window("ts", "60 seconds", "10 seconds"), "k")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.count("v").alias("count_v"),
            F.sum("v").alias("sum_v"),
            F.min("v").alias("min_v"),
            F.max("v").alias("max_v"),
            F.avg("v").alias("mean_v"),
            F.var_samp("v").alias("var_v"),
            F.sum("i").alias("sum_i"),
        )
        .select(
            "k",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "count",
            "count_v",
            "sum_v",
            "min_v",
            "max_v",
            "mean_v",
            "var_v",
            "sum_i",
        )
        .orderBy("window_start", "k")
        .toPandas()
    )
    assert len(ours) == len(native)
    assert (ours["k"].to_numpy() == native["k"].to_numpy()).all()
    assert (ours["window_start"].to_numpy() == native["window_start"].to_numpy()).all()
    for col in ["count", "count_v", "sum_i", "min_v", "max_v"]:
        assert (ours[col].to_numpy() == native[col].to_numpy()).all(), col
    # Spark sums floats in partition order; windgate's sums are exact. They agree to rounding.
    for col in ["sum_v", "mean_v", "var_v"]:
        for a, b in zip(ours[col], native[col], strict=True):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9), col


def test_spark_errors_name_the_column(spark):
    from windgate import spark as wspark

    df = spark.createDataFrame(_data(n=10).to_pandas())
    with pytest.raises(windgate.ColumnNotFoundError, match="column 'nope'"):
        wspark.window_aggregate(df, time="nope", size="10s", aggs={"*": "count"})
    with pytest.raises(windgate.InvalidParameterError, match="slide"):
        wspark.window_aggregate(df, time="ts", size="10s", slide="20s", aggs={"*": "count"})
