"""Every bad input of the error contract (docs/architecture.md#errors) gets a windgate exception naming the
parameter or column."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import windgate
from windgate import errors

T = pa.table(
    {"ts": pa.array([1, 2, 3], pa.int64()), "k": ["a", "b", "a"], "v": [1.0, 2.0, 3.0], "s": ["x", "y", "z"]}
)


def agg(**kw):
    base = dict(time="ts", size=10, aggs={"v": "sum"})
    base.update(kw)
    return windgate.window_aggregate(T, **base)


@pytest.mark.parametrize(
    ("kw", "cls", "pattern"),
    [
        (
            dict(time="nope"),
            errors.ColumnNotFoundError,
            r"time: column 'nope' is not in the input \(columns: ts, k",
        ),
        (dict(by="nope"), errors.ColumnNotFoundError, r"by: column 'nope'"),
        (dict(aggs={"nope": "sum"}), errors.ColumnNotFoundError, r"aggs: column 'nope'"),
        (
            dict(time="s"),
            errors.ColumnTypeError,
            r"column 's': the time column must be an integer, timestamp",
        ),
        (dict(aggs={"s": "sum"}), errors.ColumnTypeError, r"column 's': sum needs an integer, float"),
        (dict(size=0), errors.InvalidParameterError, r"size: expected a positive window size, got 0"),
        (dict(size=-5), errors.InvalidParameterError, r"size: expected a positive window size"),
        (dict(slide=0), errors.InvalidParameterError, r"slide: expected a positive slide"),
        (dict(slide=20), errors.InvalidParameterError, r"slide: slide \(20\) must not exceed size \(10\)"),
        (dict(lateness=-1), errors.InvalidParameterError, r"lateness: expected a non-negative bound, got -1"),
        (dict(size="10s"), errors.InvalidParameterError, r"size: a duration string .* plain integers"),
        (dict(size="10 parsecs"), errors.InvalidParameterError, r"size: cannot read duration .*parsecs"),
        (dict(size=1.5), errors.ColumnTypeError, r"size: expected an int, a duration string"),
        (dict(strategy="farm2"), errors.InvalidParameterError, r'strategy: unknown strategy "farm2"'),
        (
            dict(on_late="ignore"),
            errors.InvalidParameterError,
            r"on_late: expected \"drop\", \"keep\" or \"error\"",
        ),
        (dict(null_time="keep"), errors.InvalidParameterError, r"null_time: expected"),
        (dict(threads=0), errors.InvalidParameterError, r"threads: expected a positive"),
        (dict(aggs={"v": "median"}), errors.InvalidParameterError, r"aggs: unknown function \"median\""),
        (dict(aggs={"*": "sum"}), errors.InvalidParameterError, r"aggs: \"\*\" takes only \"count\""),
        (dict(aggs={}), errors.InvalidParameterError, r"aggs: expected at least one aggregate"),
        (dict(aggs=["v"]), errors.ColumnTypeError, r"aggs: expected a dict"),
        (dict(by=["k", "k"]), errors.InvalidParameterError, r"by: column 'k' is listed twice"),
    ],
)
def test_bad_parameters(kw, cls, pattern):
    with pytest.raises(cls, match=pattern):
        agg(**kw)


def test_error_classes_are_standard_exceptions_too():
    assert issubclass(errors.InvalidParameterError, ValueError)
    assert issubclass(errors.ColumnTypeError, TypeError)
    with pytest.raises(ValueError):
        agg(size=0)


def test_timestamp_overflow():
    t = pa.table({"ts": pa.array([2**63 - 5], pa.int64())})
    with pytest.raises(errors.WindgateOverflowError, match=r"column 'ts': timestamp .* would overflow"):
        windgate.window_aggregate(t, time="ts", size=10, aggs={"*": "count"})


@pytest.mark.parametrize("strategy", ["pane", "farm", "rrcpa", "hsa"])
def test_int_sum_overflow(strategy):
    # The farm finishes windows on its WLQ workers: the error must still reach the caller as itself.
    t = pa.table({"ts": [0, 1], "v": pa.array([2**62, 2**62], pa.int64())})
    with pytest.raises(errors.WindgateOverflowError, match=r"sum of column 'v' overflows int64"):
        windgate.window_aggregate(t, time="ts", size=10, aggs={"v": "sum"}, strategy=strategy, threads=2)


def test_null_time():
    t = pa.table({"ts": pa.array([1, None, 3], pa.int64())})
    with pytest.raises(errors.NullTimeError, match=r"column 'ts': null time at row 1"):
        windgate.window_aggregate(t, time="ts", size=10, aggs={"*": "count"})
    out = windgate.window_aggregate(t, time="ts", size=10, aggs={"*": "count"}, null_time="drop")
    assert out.column("count").to_pylist() == [2]


def test_schema_mismatch_between_batches_and_sources():
    a = windgate.WindowAggregator(time="ts", size=10, aggs={"v": "sum"})
    a.push(pa.table({"ts": [1], "v": [1.0]}))
    with pytest.raises(
        errors.SchemaMismatchError, match=r"(?i)column 'v': this batch has type int64, but the first"
    ):
        a.push(pa.table({"ts": [2], "v": [1]}))
    with pytest.raises(errors.SchemaMismatchError, match=r"(?i)column 'v': source 1 has type int64"):
        windgate.window_aggregate(
            [pa.table({"ts": [1], "v": [1.0]}), pa.table({"ts": [1], "v": [1]})],
            time="ts",
            size=10,
            aggs={"v": "sum"},
        )


def test_columns_the_query_does_not_read_may_differ():
    a = pa.table({"ts": [1], "v": [1.0], "note": ["x"]})
    b = pa.table({"ts": [2], "v": [2.0], "note": [7]})
    out = windgate.window_aggregate([a, b], time="ts", size=10, aggs={"v": "sum"})
    assert out.column("sum_v").to_pylist() == [3.0]


def test_bad_data_and_sources():
    with pytest.raises(errors.ColumnTypeError, match=r"data: expected a pyarrow Table"):
        windgate.window_aggregate({"ts": [1]}, time="ts", size=10, aggs={"*": "count"})
    with pytest.raises(errors.InvalidParameterError, match=r"data: expected at least one source"):
        windgate.window_aggregate([], time="ts", size=10, aggs={"*": "count"})
    a = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, sources=2)
    with pytest.raises(errors.InvalidParameterError, match=r"source: source 2 does not exist"):
        a.push(pa.table({"ts": [1]}), source=2)
    with pytest.raises(errors.InvalidParameterError, match=r"sources: expected at least 1 source"):
        windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, sources=0)


def test_flushed_operator_refuses_more_and_timedelta_is_accepted():
    a = windgate.WindowAggregator(time="ts", size=dt.timedelta(seconds=10), aggs={"*": "count"})
    a.push(pa.table({"ts": pa.array([1], pa.timestamp("s"))}))
    a.flush()
    with pytest.raises(errors.InvalidParameterError, match=r"push: the operator was flushed"):
        a.push(pa.table({"ts": pa.array([1], pa.timestamp("s"))}))


def test_duplicate_input_column_names_are_named():
    # Operators that carry every input column into their output refuse a name that appears twice.
    t = pa.Table.from_arrays(
        [pa.array([1, 2, 3]), pa.array([1.0, 2.0, 3.0]), pa.array([3.0, 2.0, 1.0])], names=["ts", "v", "v"]
    )
    calls = [
        lambda: windgate.window_aggregate(t, time="ts", size=10, aggs={"v": "sum"}),
        lambda: windgate.skyline(t, time="ts", size=10, dims=["v"]),
        lambda: windgate.topk(t, time="ts", size=10, score="v", k=1),
        lambda: windgate.band_join(t, t, time="ts", window=1),
    ]
    for call in calls:
        with pytest.raises(errors.InvalidParameterError, match=r"column 'v' appears 2 times"):
            call()


def test_uint64_beyond_int64_is_refused_naming_the_column():
    # Integers are read within int64 (README, "Limits and guarantees"); count reads only validity.
    t = pa.table(
        {
            "ts": pa.array([0, 1], pa.int64()),
            "v": pa.array([None, 2**64 - 1], pa.uint64()),
        }
    )
    for func in ("min", "max", "first", "last", "sum"):
        with pytest.raises(windgate.ColumnTypeError, match="'v'.*exceeds int64"):
            windgate.window_aggregate(t, time="ts", size=10, aggs={"v": func})
    out = windgate.window_aggregate(t, time="ts", size=10, aggs={"v": "count"})
    assert out.column("count_v").to_pylist() == [1]


@pytest.mark.parametrize("strategy", ["rrcpa", "hsa", "hoa"])
def test_baselines_refuse_more_windows_per_row_than_they_can_hold(strategy):
    """The papers' baselines keep a state per open window: past 4096 windows per row they name `size`; the
    production engines take the same call."""
    t = pa.table({"ts": pa.array([0, 1, 2], pa.int64())})
    kw = dict(time="ts", size=5000, slide=1, aggs={"*": "count"})
    with pytest.raises(windgate.InvalidParameterError, match="size.*4096 windows per row"):
        windgate.window_aggregate(t, strategy=strategy, **kw)
    assert windgate.window_aggregate(t, strategy="pane", **kw).num_rows == 5002
