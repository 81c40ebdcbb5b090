"""The partial-state API from Python: ``output="partials"`` where the rows are, ``input="partials"`` to merge,
in any order and split, gives the local call's windows bit for bit (hypothesis)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from windgate.errors import ColumnNotFoundError, InvalidParameterError

AGGS = {
    "*": "count",
    "v": ["count", "sum", "min", "max", "mean", "var", "std", "first", "last"],
    "i": ["sum", "mean", "max", "first"],
    "t2": ["min", "last"],
}


def _table(n, seed, keys):
    rng = np.random.default_rng(seed)
    v = rng.normal(0, 1, n) * rng.choice([1e-300, 1.0, 1e300, 3e150], n)
    nulls = rng.random(n) < 0.1
    return pa.table(
        {
            "ts": pa.array(rng.integers(0, 40, n) * 1_000_000, pa.timestamp("us")),
            "k": pa.array(rng.integers(0, keys, n).astype(str)),
            "v": pa.array(np.where(nulls, 0.0, v), mask=nulls),
            "i": pa.array(rng.integers(-(2**62), 2**62, n) // max(n, 1)),
            "t2": pa.array(rng.integers(0, 10**6, n), pa.timestamp("ms")),
        }
    )


@settings(max_examples=examples(60), deadline=None)
@given(
    n=st.integers(0, 400),
    seed=st.integers(0, 10**6),
    keys=st.integers(1, 6),
    cuts=st.lists(st.integers(0, 400), max_size=5),
    size=st.sampled_from(["3s", "10s", "7s"]),
    slide=st.sampled_from([None, "1s", "2s"]),
    by=st.sampled_from([["k"], []]),
    shuffle=st.randoms(use_true_random=False),
)
def test_partials_merged_in_any_order_equal_the_local_call(n, seed, keys, cuts, size, slide, by, shuffle):
    t = _table(n, seed, keys)
    q = dict(time="ts", size=size, slide=slide, by=by, aggs=AGGS)
    want = windgate.window_aggregate(t, **q)
    bounds = sorted({0, n, *(min(c, n) for c in cuts)})
    parts = [
        windgate.window_aggregate(t.slice(a, b - a), output="partials", row_offset=a, **q)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    shuffle.shuffle(parts)
    got = windgate.window_aggregate(parts or [t.slice(0, 0)], input="partials", **q) if parts else want
    if parts:
        # Several sources of partials, merged: the same windows.
        assert got.equals(want)
        one = windgate.window_aggregate([pa.concat_tables(parts)], input="partials", **q)
        assert one.equals(want)


@settings(max_examples=examples(40), deadline=None)
@given(
    n=st.integers(0, 600),
    seed=st.integers(0, 10**6),
    chunks=st.lists(st.integers(1, 300), min_size=1, max_size=3),
)
def test_partial_state_bytes_do_not_depend_on_the_batch_split(n, seed, chunks):
    # Exact float sums record how they were built (a batch's lane, spills to the slow tier); the partial-state
    # bytes must not: Spark's Arrow batch size, or any other split of the same rows, gives the same rows.
    t = _table(n, seed, 3)
    q = dict(time="ts", size="10s", slide="2s", by=["k"], aggs=AGGS, output="partials")
    want = windgate.window_aggregate(t, **q)
    for chunk in chunks:
        split = pa.Table.from_batches(t.to_batches(max_chunksize=chunk), t.schema)
        got = windgate.window_aggregate(split, **q)
        assert got.equals(want), chunk


def test_streaming_partials_close_with_the_watermark():
    t = _table(300, 1, 3).sort_by("ts")
    q = dict(time="ts", size="10s", slide="5s", by="k", aggs={"*": "count", "v": ["sum", "max"]})
    agg = windgate.WindowAggregator(lateness=0, output="partials", **q)
    outs = [agg.push(b) for b in t.to_batches(max_chunksize=50)]
    assert sum(o.num_rows for o in outs) > 0  # panes came out before the end
    outs.append(agg.flush())
    partials = pa.Table.from_batches(outs)
    merged = windgate.window_aggregate(partials, input="partials", **q)
    assert merged.equals(windgate.window_aggregate(t, **q))
    assert partials.schema.metadata[b"windgate.partials"] == b"1"


def test_bad_partial_keywords_and_columns_name_the_parameter():
    t = _table(50, 2, 2)
    q = dict(time="ts", size="10s", by="k", aggs={"v": "sum"})
    with pytest.raises(InvalidParameterError, match="output"):
        windgate.window_aggregate(t, output="panes", **q)
    with pytest.raises(InvalidParameterError, match="input"):
        windgate.window_aggregate(t, input="states", **q)
    with pytest.raises(InvalidParameterError, match="row_offset"):
        windgate.window_aggregate(t, row_offset=-1, **q)
    with pytest.raises(InvalidParameterError, match="strategy"):
        windgate.window_aggregate(t, output="partials", strategy="farm", **q)
    # Raw rows given as partials: the missing state column is named.
    with pytest.raises(ColumnNotFoundError, match="sum_v__n"):
        windgate.window_aggregate(t, input="partials", **q)
    partials = windgate.window_aggregate(t, output="partials", **q)
    broken = partials.set_column(
        partials.schema.get_field_index("sum_v__sum"), "sum_v__sum", pa.array([b"\x07"] * partials.num_rows)
    )
    with pytest.raises(windgate.errors.WindgateError, match="sum_v__sum"):
        windgate.window_aggregate(broken, input="partials", **q)
