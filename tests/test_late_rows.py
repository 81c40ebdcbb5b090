"""``on_late="keep"``: late rows as a side output, from the batch function and the streaming class.

Every late row appears exactly once, in arrival order, with its input columns and the watermark it met; the
windows are exactly those of ``on_late="drop"``; every strategy, batch split and checkpoint gives the same.
"""

from __future__ import annotations

import datetime as dt
import pickle

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import aggregate
from windgate.errors import InvalidParameterError

STRATEGIES = ["pane", "shard", "farm", "reference"]


def late_by_brute_force(ts: list[int], lateness: int) -> list[tuple[int, int]]:
    """(row index, watermark met) of each late row of one source under a fixed bound: a row is late when its
    time is below the largest time seen before it minus ``lateness``."""
    late, top = [], None
    for i, t in enumerate(ts):
        if top is not None and t < top - lateness:
            late.append((i, top - lateness))
        elif top is None or t > top:
            top = t
    return late


def table(ts: list[int], keys: list[int], vals: list[float | None]) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array(keys, pa.int64()),
            "v": pa.array(vals, pa.float64()),
            "tag": pa.array([f"r{i}" for i in range(len(ts))]),
        }
    )


QUERY = dict(time="ts", size=10, slide=5, by="k", aggs={"*": "count", "v": ["sum", "max"]})

rows = st.integers(0, 80).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 200), min_size=n, max_size=n),
        st.lists(st.integers(0, 3), min_size=n, max_size=n),
        st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6)), min_size=n, max_size=n),
    )
)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rows, lateness=st.integers(0, 30), strategy=st.sampled_from(STRATEGIES))
def test_batch_keeps_every_late_row_once_in_arrival_order(data, lateness, strategy):
    ts, keys, vals = data
    t = table(ts, keys, vals)
    windows, late = windgate.window_aggregate(
        t, **QUERY, lateness=lateness, on_late="keep", strategy=strategy, threads=2
    )
    expected = late_by_brute_force(ts, lateness)
    assert late.column("tag").to_pylist() == [f"r{i}" for i, _ in expected]
    assert late.column("watermark").to_pylist() == [wm for _, wm in expected]
    assert late.column("v").to_pylist() == [vals[i] for i, _ in expected]
    assert late.schema.names == ["ts", "k", "v", "tag", "watermark"]
    dropped = windgate.window_aggregate(t, **QUERY, lateness=lateness, on_late="drop", strategy=strategy)
    assert windows.equals(dropped)
    kept = [i for i in range(len(ts)) if i not in {j for j, _ in expected}]
    oracle = aggregate(
        [{"ts": ts[i], "k": keys[i], "v": vals[i]} for i in kept],
        size=10,
        slide=5,
        offset=0,
        by="k",
        funcs=["count*", "sum", "max"],
    )
    assert len(windows) == len(oracle)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=rows,
    lateness=st.integers(0, 30),
    cuts=st.lists(st.integers(0, 80), max_size=6),
    take_after=st.lists(st.booleans(), min_size=7, max_size=7),
    snapshot_at=st.integers(0, 6),
    strategy=st.sampled_from(["pane", "shard", "farm"]),
)
def test_streaming_late_rows_equal_the_batch_call(data, lateness, cuts, take_after, snapshot_at, strategy):
    """Any batch split, any moments of taking, a checkpoint (pickle) in between: the same late rows."""
    ts, keys, vals = data
    t = table(ts, keys, vals)
    _, expected = windgate.window_aggregate(t, **QUERY, lateness=lateness, on_late="keep")
    agg = windgate.WindowAggregator(**QUERY, lateness=lateness, on_late="keep", strategy=strategy, threads=2)
    bounds = sorted({0, len(ts), *[c for c in cuts if c <= len(ts)]})
    got, windows = [], []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        windows.append(agg.push(t.slice(a, b - a)))
        if i == snapshot_at:
            agg = pickle.loads(pickle.dumps(agg))
        if take_after[i]:
            got.append(agg.late_rows())
    windows.append(agg.flush())
    got.append(agg.late_rows())
    got = pa.Table.from_batches([b for b in got if b is not None and b.num_rows], schema=expected.schema)
    assert got.equals(expected)
    assert agg.stats["late_rows"] == expected.num_rows
    assert agg.stats["late_rows_pending"] == 0


def test_several_sources_name_the_source():
    a = pa.table({"ts": [1, 30, 2], "v": [1.0, 2.0, 3.0]})
    b = pa.table({"ts": [5, 50, 6, 49], "v": [4.0, 5.0, 6.0, 7.0]})
    q = dict(time="ts", size=10, aggs={"v": "sum"}, lateness=3, on_late="keep")
    _, late = windgate.window_aggregate([a, b], **q)
    assert late.to_pydict() == {"ts": [2, 6], "v": [3.0, 6.0], "source": [0, 1], "watermark": [27, 47]}


def test_timestamp_watermark_has_the_time_columns_type():
    t0 = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    ts = [t0, t0 + dt.timedelta(minutes=5), t0 + dt.timedelta(seconds=10)]
    t = pa.table({"ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "v": [1, 2, 3]})
    _, late = windgate.window_aggregate(
        t, time="ts", size="1m", aggs={"v": "sum"}, lateness="1m", on_late="keep"
    )
    assert late.schema.field("watermark").type == pa.timestamp("us", tz="UTC")
    assert late.column("watermark").to_pylist() == [t0 + dt.timedelta(minutes=4)]


def test_no_late_rows_gives_an_empty_table_with_the_schema():
    t = pa.table({"ts": [1, 2, 3], "v": [1, 2, 3]})
    windows, late = windgate.window_aggregate(t, time="ts", size=10, aggs={"v": "sum"}, on_late="keep")
    assert late.num_rows == 0 and late.schema.names == ["ts", "v", "watermark"]
    assert windows.num_rows == 1


def test_a_watermark_column_in_the_input_is_refused():
    t = pa.table({"ts": [1, 2], "watermark": [0, 0]})
    with pytest.raises(InvalidParameterError, match="on_late.*'watermark'"):
        windgate.window_aggregate(t, time="ts", size=10, aggs={"*": "count"}, on_late="keep")


def test_late_rows_need_keep():
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=0)
    with pytest.raises(InvalidParameterError, match="on_late"):
        agg.late_rows()


def test_a_refused_batch_keeps_no_late_row():
    """A batch refused for a bad value leaves the side output (and everything else) as it was."""
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=0, on_late="keep")
    agg.push(pa.record_batch({"ts": [50]}))
    with pytest.raises(windgate.WindgateError):
        agg.push(pa.record_batch({"ts": pa.array([1, None], pa.int64())}))
    assert agg.late_rows().num_rows == 0
    assert agg.stats["late_rows"] == 0
    agg.push(pa.record_batch({"ts": [1]}))
    assert agg.late_rows().to_pydict() == {"ts": [1], "watermark": [50]}


@pytest.mark.parametrize(
    "call",
    [
        lambda: windgate.skyline(
            pa.table({"ts": [1], "a": [1.0]}), time="ts", size=10, dims={"a": "min"}, on_late="keep"
        ),
        lambda: windgate.band_join(
            pa.table({"ts": [1]}), pa.table({"ts": [1]}), time="ts", window=1, on_late="keep"
        ),
    ],
    ids=["skyline", "band_join"],
)
def test_operators_without_a_side_output_refuse_keep(call):
    with pytest.raises(InvalidParameterError, match='on_late="keep"'):
        call()


def test_the_cli_writes_late_rows_and_revisions(tmp_path):
    """``windgate aggregate --late-out``: the late rows in their own Parquet file, equal to the library's;
    ``--allowed-lateness`` adds the revisions."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    src = tmp_path / "in.parquet"
    t = pa.table({"ts": [1, 20, 3, 19, 40, 5], "v": [1, 2, 3, 4, 5, 6]})
    pq.write_table(t, src)
    base = [sys.executable, "-m", "windgate", "aggregate", "--input", str(src), "--size", "10"]
    base += ["--agg", "v=sum", "--lateness", "2", "--batch-rows", "2"]
    r = subprocess.run(
        [*base, "--out", str(tmp_path / "w.parquet"), "--late-out", str(tmp_path / "late.parquet")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    windows, late = windgate.window_aggregate(
        t, time="ts", size=10, aggs={"v": "sum"}, lateness=2, on_late="keep"
    )
    assert pq.read_table(tmp_path / "late.parquet").equals(late)
    assert pq.read_table(tmp_path / "w.parquet").equals(windows)
    r = subprocess.run(
        [*base, "--out", str(tmp_path / "u.parquet"), "--allowed-lateness", "30"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "revision" in pq.read_table(tmp_path / "u.parquet").column_names
    r = subprocess.run(
        [*base, "--out", str(tmp_path / "x.parquet"), "--on-late", "keep"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "--late-out" in r.stderr
