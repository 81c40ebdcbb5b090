"""windgate.spark's two-phase plan: partial states per (key, pane) where the rows are, merged after the
shuffle; Parquet read by the tasks themselves. Every result equals the local call on the same rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import windgate
from windgate import spark as wspark
from windgate.errors import ColumnNotFoundError, InvalidParameterError

pytestmark = pytest.mark.spark

ALL = {
    "*": "count",
    "v": ["count", "sum", "min", "max", "mean", "var", "std", "first", "last"],
    "i": ["sum", "mean", "min", "first", "last"],
}


def _data(n=5000, keys=9, seed=5, ties=True):
    rng = np.random.default_rng(seed)
    # Whole seconds: many rows share a time, so first/last depend on the arrival order.
    ts = rng.integers(0, 1200, n) * 1_000_000 if ties else rng.integers(0, 1_200_000_000, n)
    v = rng.normal(0, 1e6, n) * rng.choice([1e-9, 1.0, 1e9], n)
    v_null = rng.random(n) < 0.05
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "k": pa.array(rng.integers(0, keys, n), pa.int64()),
            "v": pa.array(np.where(v_null, 0.0, v), pa.float64(), mask=v_null),
            "i": pa.array(rng.integers(-(2**40), 2**40, n), pa.int64()),
            "other": pa.array(rng.random(n)),
        }
    )


def _write(table, path, files=3, row_group_size=700):
    path.mkdir()
    step = -(-table.num_rows // files)
    for f in range(files):
        pq.write_table(
            table.slice(f * step, step), path / f"part-{f:03d}.parquet", row_group_size=row_group_size
        )
    return path


def _sorted(t, by):
    return t.sort_by([("window_start", "ascending"), *((b, "ascending") for b in by)])


@pytest.mark.parametrize("by", [["k"], []], ids=["keyed", "unkeyed"])
def test_parquet_path_read_by_tasks_equals_local_call_bit_for_bit(spark, tmp_path, by):
    t = _data()
    path = _write(t, tmp_path / "in")
    kw = dict(time="ts", size="60s", slide="20s", by=by, aggs=ALL)
    out = wspark.window_aggregate(str(path), spark=spark, **kw)
    assert "Parquet split" in out.windgate_plan
    want = windgate.window_aggregate(pq.read_table(path), **kw)
    got = _sorted(out.toArrow(), by).cast(want.schema)
    # Splits keep their place in the whole input, so even first/last ties agree.
    assert got.equals(want)


def test_spark_read_parquet_with_selected_columns_takes_the_file_path(spark, tmp_path):
    t = _data(seed=8)
    path = _write(t, tmp_path / "in")
    df = spark.read.parquet(str(path)).select("ts", "k", "v")
    kw = dict(time="ts", size="30s", by="k", aggs={"*": "count", "v": ["sum", "max", "std"]})
    out = wspark.window_aggregate(df, **kw)
    assert "Parquet split" in out.windgate_plan, out.windgate_plan
    want = windgate.window_aggregate(pq.read_table(path), **kw)
    assert _sorted(out.toArrow(), ["k"]).cast(want.schema).equals(want)


def test_filtered_dataframe_goes_through_map_in_arrow(spark, tmp_path):
    t = _data(seed=9, ties=False)
    path = _write(t, tmp_path / "in")
    df = spark.read.parquet(str(path)).filter("v > 0")
    kw = dict(time="ts", size="60s", slide="10s", by="k", aggs={"*": "count", "v": ["sum", "mean", "last"]})
    out = wspark.window_aggregate(df, **kw)
    assert "mapInArrow" in out.windgate_plan
    local = pq.read_table(path)
    local = local.filter(pa.compute.greater(local.column("v"), 0))
    want = windgate.window_aggregate(local, **kw)
    assert _sorted(out.toArrow(), ["k"]).cast(want.schema).equals(want)


@pytest.mark.parametrize("by", [["k"], []], ids=["keyed", "unkeyed"])
def test_any_dataframe_two_phase_equals_one_phase_and_local(spark, by):
    t = _data(seed=12, ties=False)
    df = spark.createDataFrame(t.to_pandas()).repartition(4)
    kw = dict(
        time="ts",
        size="90s",
        slide="30s",
        offset="5s",
        by=by,
        aggs={"*": "count", "v": ["sum", "var"], "i": ["sum", "min"]},
    )
    two = wspark.window_aggregate(df, ordered=True, **kw)
    one = wspark.window_aggregate(df, ordered=True, plan="one_phase", **kw)
    assert two.windgate_plan.startswith("two-phase") and one.windgate_plan.startswith("one-phase")
    want = windgate.window_aggregate(t, **kw)
    assert two.toArrow().cast(want.schema).equals(want)
    assert one.toArrow().cast(want.schema).equals(want)
    streamed = wspark.window_aggregate(df, ordered=True, sorted_merge=True, **kw)
    assert streamed.toArrow().cast(want.schema).equals(want)


def test_empty_input_and_integer_time(spark, tmp_path):
    t = pa.table(
        {"t": pa.array([], pa.int64()), "k": pa.array([], pa.string()), "v": pa.array([], pa.float64())}
    )
    path = _write(t, tmp_path / "empty", files=1)
    out = wspark.window_aggregate(str(path), spark=spark, time="t", size=10, by="k", aggs={"v": "sum"})
    assert out.count() == 0
    rng = np.random.default_rng(1)
    t = pa.table(
        {"t": rng.integers(-500, 500, 3000), "k": rng.choice(["a", "b", None], 3000), "v": rng.random(3000)}
    )
    df = spark.createDataFrame(t.to_pandas()).repartition(3)
    kw = dict(time="t", size=50, slide=10, by="k", aggs={"*": "count", "v": ["sum", "max"]})
    got = wspark.window_aggregate(df, ordered=True, **kw).toArrow()
    want = windgate.window_aggregate(t, **kw)
    assert got.cast(want.schema).equals(want)


def test_bad_parameters_fail_before_spark_runs(spark, tmp_path):
    path = _write(_data(n=100), tmp_path / "in", files=1)
    with pytest.raises(ColumnNotFoundError, match="nope"):
        wspark.window_aggregate(str(path), spark=spark, time="ts", size="1m", aggs={"nope": "sum"})
    with pytest.raises(InvalidParameterError, match="plan"):
        wspark.window_aggregate(str(path), spark=spark, time="ts", size="1m", aggs={"v": "sum"}, plan="fast")
    with pytest.raises(InvalidParameterError, match="Parquet"):
        wspark.window_aggregate(
            str(tmp_path / "missing"), spark=spark, time="ts", size="1m", aggs={"v": "sum"}
        )


def test_partition_columns_and_one_phase_paths(spark, tmp_path):
    t = _data(n=2000, seed=21, ties=False)
    root = tmp_path / "parted"
    for part in (0, 1):
        (root / f"part={part}").mkdir(parents=True)
        pq.write_table(t.slice(part * 1000, 1000).drop_columns(["k"]), root / f"part={part}" / "a.parquet")
    df = spark.read.parquet(str(root))
    kw = dict(time="ts", size="60s", by="part", aggs={"*": "count", "v": ["sum"]})
    out = wspark.window_aggregate(df, **kw)
    assert "mapInArrow" in out.windgate_plan  # "part" lives in directory names, not in the files
    local = t.drop_columns(["k"]).append_column("part", pa.array([0] * 1000 + [1] * 1000, pa.int32()))
    want = windgate.window_aggregate(local, **kw)
    assert _sorted(out.toArrow(), ["part"]).cast(want.schema).equals(want)
    flat = _write(t, tmp_path / "flat", files=2)
    kw = dict(time="ts", size="60s", by="k", aggs={"v": ["max"]})
    one = wspark.window_aggregate(str(flat), spark=spark, plan="one_phase", **kw)
    want = windgate.window_aggregate(pq.read_table(flat), **kw)
    assert _sorted(one.toArrow(), ["k"]).cast(want.schema).equals(want)
