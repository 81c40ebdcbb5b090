"""windgate.spark.band_join (key-hash x time-bucket groups, :mod:`windgate.spark_join`) against the local
call: asymmetric bounds, left outer, null keys, NaN, empty sides, a key with many rows, timestamps and
integer times, forced and derived bucket widths and key partitions."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pytest

import windgate
from windgate.spark_join import plan

pytestmark = pytest.mark.spark


def _norm(rows):
    return [{k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]


def _sorted_rows(t: pa.Table) -> list:
    return sorted(_norm(t.to_pylist()), key=lambda r: [(v is None, str(v)) for v in r.values()])


def _data(n=1200, seed=5, stamps=False, hot=False):
    rng = np.random.default_rng(seed)
    t_type = pa.timestamp("us", tz="UTC") if stamps else pa.int64()
    scale = 1_000_000 if stamps else 1
    lk = rng.integers(0, 40, n)
    rk = rng.integers(0, 40, 2 * n)
    if hot:  # one key with most of the rows
        lk[rng.random(n) < 0.6] = 7
        rk[rng.random(2 * n) < 0.6] = 7
    x = rng.integers(0, 30, n).astype(float)
    x[rng.random(n) < 0.03] = np.nan
    left = pa.table(
        {
            "ts": pa.array(np.sort(rng.integers(-400, 400, n)) * scale, t_type),
            "user": pa.array(lk, pa.int32(), mask=rng.random(n) < 0.05),
            "x": pa.array(x, pa.float64(), mask=rng.random(n) < 0.02),
            "name": pa.array([f"l{i}" for i in range(n)]),
        }
    )
    right = pa.table(
        {
            "ts": pa.array(np.sort(rng.integers(-400, 400, 2 * n)) * scale, t_type),
            "user": pa.array(rk, pa.int64(), mask=rng.random(2 * n) < 0.05),
            "a": pa.array(rng.integers(0, 30, 2 * n), pa.int64()),
        }
    )
    return left, right


def _check(spark, left, right, **kwargs):
    from windgate import spark as wspark

    spark_only = {k: kwargs.pop(k) for k in ("bucket", "partitions") if k in kwargs}
    want = windgate.band_join(left, right, **kwargs)
    ldf = spark.createDataFrame(left).repartition(3)
    rdf = spark.createDataFrame(right).repartition(2)
    got = wspark.band_join(ldf, rdf, **kwargs, **spark_only).toArrow()
    assert got.schema.names == want.schema.names
    assert _sorted_rows(got.cast(want.schema)) == _sorted_rows(want), (kwargs, spark_only)
    return want


def test_keyed_asymmetric_and_left_outer_equal_the_local_call(spark):
    left, right = _data()
    eq = windgate.eq("user", "user")
    cases = [
        {"lower": -30, "upper": 0, "on": [eq]},
        {"lower": -30, "upper": 0, "on": [eq], "how": "left"},
        {"lower": 5, "upper": 20, "on": [eq, windgate.band("x", "a", 2)], "how": "left"},
        {"lower": -20, "upper": -5, "on": [eq], "how": "left", "bucket": 3, "partitions": 5},
        {"window": 7, "on": [eq], "partitions": 1},
        {"window": 7, "on": [eq], "bucket": 1000, "partitions": 3},
        {"lower": -10, "upper": 10, "on": [windgate.band("x", "a", 1)], "how": "left"},
        {"lower": 0, "upper": 0, "on": [eq], "how": "left"},
    ]
    for case in cases:
        want = _check(spark, left, right, time="ts", **case)
        assert want.num_rows > 50, case


def test_a_hot_key_and_empty_sides(spark):
    left, right = _data(n=800, seed=9, hot=True)
    eq = windgate.eq("user", "user")
    _check(spark, left, right, time="ts", lower=-15, upper=3, on=[eq], how="left", partitions=4)
    _check(spark, left, right.slice(0, 0), time="ts", lower=-15, upper=3, on=[eq], how="left")
    _check(spark, left, right.slice(0, 0), time="ts", lower=-15, upper=3, on=[eq])
    _check(spark, left.slice(0, 0), right, time="ts", lower=-15, upper=3, on=[eq], how="left")


def test_float_and_string_keys_hash_alike_on_both_sides(spark):
    left = pa.table(
        {
            "ts": [0, 1, 2, 3, 4],
            "f": [0.0, -0.0, math.nan, 1.5, None],
            "s": ["a", "b", None, "a", "b"],
        }
    )
    right = pa.table(
        {"ts": [0, 1, 2, 3, 4], "f": [-0.0, 0.0, math.nan, 1.5, 2.0], "s": ["a", "b", "a", "a", None]}
    )
    for how in ("inner", "left"):
        _check(spark, left, right, time="ts", window=4, on=[windgate.eq("f", "f")], how=how, partitions=7)
        _check(spark, left, right, time="ts", window=4, on=[windgate.eq("s", "s")], how=how, partitions=7)


def test_timestamps_with_negative_durations(spark):
    left, right = _data(n=600, seed=2, stamps=True)
    on = [windgate.eq("user", "user")]
    for lower, upper in [("-30s", "0s"), (dt.timedelta(seconds=-20), dt.timedelta(seconds=-5))]:
        want = _check(spark, left, right, time="ts", lower=lower, upper=upper, on=on, how="left")
        assert want.column("right_ts").null_count > 0
    _check(spark, left, right, time="ts", lower="-30s", upper="0s", on=on, bucket="7s", partitions=2)


def test_int64_ends_with_asymmetric_bounds(spark):
    lo, hi = -(2**63), 2**63 - 1
    left = pa.table({"ts": [lo, lo + 1, -7, 0, 5, hi - 1, hi], "v": list(range(7))})
    right = pa.table({"ts": [lo, lo + 3, -2, 2, hi - 2, hi], "w": list(range(6))})
    for lower, upper, bucket in [
        (-3, 0, None),
        (0, 3, 2),
        (-(2**62), 2**61, None),
        (lo, hi, None),
        (-5, -1, 2**60),
    ]:
        _check(spark, left, right, time="ts", lower=lower, upper=upper, how="left", bucket=bucket)


def test_errors(spark):
    from windgate import spark as wspark

    left, right = _data(n=20)
    ldf, rdf = spark.createDataFrame(left), spark.createDataFrame(right)
    with pytest.raises(windgate.InvalidParameterError, match="^lower"):
        wspark.band_join(ldf, rdf, time="ts", lower=3, upper=2)
    with pytest.raises(windgate.InvalidParameterError, match="^window"):
        wspark.band_join(ldf, rdf, time="ts", window=3, lower=-1, upper=1)
    with pytest.raises(windgate.InvalidParameterError, match="^how"):
        wspark.band_join(ldf, rdf, time="ts", window=3, how="right")
    with pytest.raises(windgate.InvalidParameterError, match="^partitions"):
        wspark.band_join(ldf, rdf, time="ts", window=3, partitions=0)


def test_plan_bounds_the_groups():
    # No keys: the span cut into about `target` buckets, each at least twice the band.
    assert plan(3600, 320_000, -30, 0, 8) == 450
    assert plan(100, 320_000, -30, 0, 8) == 60
    # Large inputs: more buckets, each holding about ROWS_PER_GROUP rows.
    assert plan(10_000, 40_000_000, -5, 5, 8) == 500
    assert plan(None, 0, -5, 5, 8) == 20
