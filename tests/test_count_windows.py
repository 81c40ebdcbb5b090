"""Count windows (``rows=``, ``rows_slide=``): window_aggregate and WindowAggregator against a brute force of
Flink's ``countWindow(rows, rows_slide)`` across inputs, batch splits, disorder within the lateness bound and
late rows; checkpoints and pickling; edge cases and parameter errors."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import kslack_admitted
from windgate.errors import ColumnTypeError, InvalidParameterError, LateRowError, SnapshotMismatchError

AGGS = {"*": "count", "v": ["count", "sum", "min", "max", "mean", "first", "last"]}


def table(rows):
    return pa.table(
        {
            "ts": pa.array([r[0] for r in rows], pa.int64()),
            "k": pa.array([r[1] for r in rows], pa.int32()),
            "v": pa.array([r[2] for r in rows], pa.float64()),
        }
    )


def brute(rows, size, slide, lateness=None, keyed=True):
    """Flink's GlobalWindows + CountEvictor.of(size) + CountTrigger.of(slide): per key, the rows in order of
    (time, arrival); at every slide-th row, a window of the key's last min(size, n) rows; windows in the
    order (time, arrival) of the row that completed them."""
    keep, late = kslack_admitted(rows, lateness)
    key = (lambda r: r[1]) if keyed else (lambda r: None)
    fired = []
    for k in {key(r) for _, r in keep}:
        mine = sorted(((r[0], i, r) for i, r in keep if key(r) == k), key=lambda x: (x[0], x[1]))
        for n in range(slide, len(mine) + 1, slide):
            w = mine[max(0, n - size) : n]
            vals = [x[2][2] for x in w if x[2][2] is not None]
            out = {"k": k} if keyed else {}
            out.update(
                window_first=w[0][0],
                window_last=w[-1][0],
                window_rows=len(w),
                count=len(w),
                count_v=len(vals),
                sum_v=sum(vals) if vals else None,
                min_v=min(vals) if vals else None,
                max_v=max(vals) if vals else None,
                mean_v=sum(vals) / len(vals) if vals else None,
                first_v=vals[0] if vals else None,
                last_v=vals[-1] if vals else None,
            )
            fired.append(((w[-1][0], w[-1][1]), out))
    return [w for _, w in sorted(fired, key=lambda x: x[0])], late


row = st.tuples(
    st.integers(-50, 50),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.integers(-400, 400).map(lambda i: i / 4)),
)


@st.composite
def case(draw):
    size = draw(st.one_of(st.integers(1, 4), st.integers(1, 12), st.just(10**12)))
    slide = draw(st.one_of(st.integers(1, 4), st.integers(1, 12)))
    lateness = draw(st.one_of(st.none(), st.integers(0, 10)))
    rows = draw(st.lists(row, max_size=80))
    if lateness is not None and not draw(st.booleans()):
        # Disorder within the bound: event order perturbed by a delay <= lateness (no row is late).
        delays = draw(st.lists(st.integers(0, lateness), min_size=len(rows), max_size=len(rows)))
        rows = [
            r
            for _, r in sorted(
                zip(delays, sorted(rows, key=lambda r: r[0]), strict=True), key=lambda x: x[1][0] + x[0]
            )
        ]
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=5)))
    return size, slide, lateness, rows, cuts, draw(st.booleans())


def _same(got, want):
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for name, wv in w.items():
            if name == "mean_v" and wv is not None:
                assert g[name] == pytest.approx(wv, rel=1e-12), (name, g, w)
            else:
                assert g[name] == wv, (name, g, w)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_streaming_and_batch_match_brute_force(c):
    size, slide, lateness, rows, cuts, keyed = c
    by = "k" if keyed else None
    want, late = brute(rows, size, slide, lateness, keyed)
    q = dict(time="ts", rows=size, rows_slide=slide, by=by, aggs=AGGS, lateness=lateness)
    agg = windgate.WindowAggregator(**q)
    parts, start = [], 0
    for end in [*cuts, len(rows)]:
        parts.append(agg.push(table(rows[start:end])))
        start = end
    parts.append(agg.flush())
    got = pa.Table.from_batches(parts)
    assert agg.stats["late_rows"] == late
    _same(got.to_pylist(), want)
    if lateness is None:
        assert windgate.window_aggregate(table(rows), **q).equals(got)
    assert windgate.window_aggregate(table(rows), **q, strategy="reference").equals(got)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_snapshot_restore_and_pickle_continue_exactly(c):
    size, slide, lateness, rows, cuts, _ = c
    kw = dict(time="ts", rows=size, rows_slide=slide, by="k", aggs=AGGS, lateness=lateness)
    whole = windgate.WindowAggregator(**kw)
    again = windgate.WindowAggregator(**kw)
    a, b, start = [], [], 0
    for i, end in enumerate([*cuts, len(rows)]):
        a.append(whole.push(table(rows[start:end])))
        b.append(again.push(table(rows[start:end])))
        start = end
        if i % 2:
            again = pickle.loads(pickle.dumps(again))
        else:
            again = windgate.WindowAggregator.restore(again.snapshot(), threads=1)
    a.append(whole.flush())
    b.append(again.flush())
    assert pa.Table.from_batches(b).equals(pa.Table.from_batches(a))
    assert again.stats["late_rows"] == whole.stats["late_rows"]
    snap = windgate.WindowAggregator(**kw)
    snap.push(table([(1, 1, 1.0)]))
    with pytest.raises(SnapshotMismatchError, match="rows"):
        windgate.WindowAggregator.restore(snap.snapshot(), rows=size + 1)


def windows(out):
    return [(r["window_first"], r["window_last"], r["window_rows"], r["sum_v"]) for r in out.to_pylist()]


def test_edges():
    ts = [(t, 1, float(t)) for t in range(1, 8)]
    q = dict(time="ts", aggs={"v": "sum"})
    assert windgate.window_aggregate(table([]), rows=3, **q).num_rows == 0
    empty = windgate.WindowAggregator(rows=3, **q)
    assert empty.flush().num_rows == 0
    # Flink's example: countWindow(5, 2) holds rows 1-2, 1-4, 2-6; row 7 never fires.
    assert windows(windgate.window_aggregate(table(ts), rows=5, rows_slide=2, **q)) == [
        (1, 2, 2, 3.0),
        (1, 4, 4, 10.0),
        (2, 6, 5, 20.0),
    ]
    # rows=1: every row is a window of its own, in time order.
    one = windgate.window_aggregate(table(ts[::-1]), rows=1, **q)
    assert windows(one) == [(t, t, 1, float(t)) for t in range(1, 8)]
    # A huge size: a running total every 3 rows.
    huge = windgate.window_aggregate(table(ts), rows=10**12, rows_slide=3, **q)
    assert windows(huge) == [(1, 3, 3, 6.0), (1, 6, 6, 21.0)]
    # A slide above the size: the rows between windows are in none.
    gaps = windgate.window_aggregate(table(ts), rows=2, rows_slide=3, **q)
    assert windows(gaps) == [(2, 3, 2, 5.0), (5, 6, 2, 11.0)]
    # Equal times: arrival order decides.
    same = table([(5, 1, 1.0), (5, 1, 2.0), (5, 1, 4.0)])
    ties = windgate.window_aggregate(same, rows=2, rows_slide=1, **q)
    assert windows(ties) == [(5, 5, 1, 1.0), (5, 5, 2, 3.0), (5, 5, 2, 6.0)]


def test_timestamps_keep_their_type():
    t = pa.table({"ts": pa.array([0, 20, 50, 70], pa.timestamp("ms", "UTC")), "v": [1.0, 2.0, 3.0, 4.0]})
    out = windgate.window_aggregate(t, time="ts", rows=2, aggs={"v": "sum"})
    assert out.schema.field("window_first").type == pa.timestamp("ms", "UTC")
    assert out.schema.field("window_rows").type == pa.int64()
    assert out.column("sum_v").to_pylist() == [3.0, 7.0]


def test_parameter_errors_name_them():
    t = table([(1, 1, 1.0)])
    q = dict(time="ts", aggs=AGGS)
    for bad in ({"size": 10}, {"slide": 2}, {"gap": 5}):
        with pytest.raises(InvalidParameterError, match="^rows"):
            windgate.window_aggregate(t, rows=3, **bad, **q)
    for name, bad in (("rows", 0), ("rows", -1), ("rows_slide", 0), ("rows", 1 << 49)):
        with pytest.raises(InvalidParameterError, match=f"^{name}"):
            windgate.window_aggregate(t, **{"rows": 3, name: bad}, **q)
    for name, bad in (("rows", True), ("rows", 2.0), ("rows_slide", "2")):
        with pytest.raises((InvalidParameterError, ColumnTypeError), match=f"^{name}"):
            windgate.WindowAggregator(**{"rows": 3, name: bad}, **q)
    with pytest.raises(InvalidParameterError, match="^rows_slide"):
        windgate.window_aggregate(t, size=3, rows_slide=2, **q)
    for name, value in (
        ("offset", 2),
        ("output", "partials"),
        ("input", "partials"),
        ("emit", "early"),
        ("allowed_lateness", 5),
        ("strategy", "pane"),
        ("tz", "Europe/Berlin"),
    ):
        extra = {"interval": 5} if name == "emit" else {}
        with pytest.raises(InvalidParameterError, match=f"^{name}"):
            windgate.WindowAggregator(rows=3, **{name: value}, lateness=2, **extra, **q)
    agg = windgate.WindowAggregator(rows=3, strategy="reference", **q)
    with pytest.raises(InvalidParameterError, match="^strategy"):
        agg.snapshot()


def test_late_rows_follow_on_late():
    agg = windgate.WindowAggregator(time="ts", rows=2, aggs={"*": "count"}, lateness=2)
    out = agg.push(table([(10, 1, 1.0), (20, 1, 1.0), (17, 1, 1.0), (18, 1, 1.0), (30, 1, 1.0)]))
    assert out.to_pydict() == {"window_first": [10], "window_last": [18], "window_rows": [2], "count": [2]}
    assert agg.stats["late_rows"] == 1
    strict = windgate.WindowAggregator(time="ts", rows=2, aggs={"*": "count"}, lateness=2, on_late="error")
    with pytest.raises(LateRowError):
        strict.push(table([(10, 1, 1.0), (20, 1, 1.0), (17, 1, 1.0)]))


def test_late_rows_kept_as_a_side_output():
    rows = [(10, 1, 1.0), (20, 1, 2.0), (17, 1, 4.0), (18, 1, 8.0), (30, 1, 16.0)]
    q = dict(time="ts", rows=2, by="k", aggs={"v": "sum"}, lateness=2)
    kept = windgate.WindowAggregator(**q, on_late="keep")
    dropped = windgate.WindowAggregator(**q)
    assert kept.push(table(rows[:3])).equals(dropped.push(table(rows[:3])))
    kept = pickle.loads(pickle.dumps(kept))  # the late row not yet taken travels with the state
    assert kept.stats["late_rows_pending"] == 1
    assert kept.late_rows().to_pydict() == {"ts": [17], "k": [1], "v": [4.0], "watermark": [18]}
    assert kept.late_rows().num_rows == 0
    assert kept.push(table(rows[3:])).equals(dropped.push(table(rows[3:])))
    windows, late = windgate.window_aggregate(table(rows), **q, on_late="keep")
    assert windows.equals(windgate.window_aggregate(table(rows), **q))
    assert late.column("ts").to_pylist() == [17]
    sessions = windgate.WindowAggregator(time="ts", gap=3, aggs={"*": "count"}, lateness=2)
    with pytest.raises(InvalidParameterError, match="^on_late"):
        sessions.late_rows()


def test_memory_follows_the_last_rows():
    """Sliding windows of 4 rows every 2: the operator holds each key's last rows and the unreleased ones,
    not the stream."""
    agg = windgate.WindowAggregator(time="ts", rows=4, rows_slide=2, by="k", aggs={"v": "sum"}, lateness=0)
    for start in range(0, 20_000, 1000):
        agg.push(table([(t, t % 3, 1.0) for t in range(start, start + 1000)]))
    assert agg.stats["open_slots"] < 20, agg.stats


def test_next_close_is_just_past_the_earliest_waiting_row():
    """``stats["next_close"]``: the least watermark that releases a waiting row (what the Spark streaming
    shard sets its timer to); ``None`` once nothing waits."""
    agg = windgate.WindowAggregator(time="ts", rows=2, by="k", aggs={"*": "count"}, lateness=10)
    assert agg.stats["next_close"] is None
    agg.push(pa.table({"ts": pa.array([5, 3, 12], pa.int64()), "k": pa.array([1, 1, 2], pa.int64())}))
    assert agg.stats["next_close"] == 4  # watermark 2: 3, 5 and 12 wait
    agg.push(pa.table({"ts": pa.array([20], pa.int64()), "k": pa.array([1], pa.int64())}))
    assert agg.stats["next_close"] == 13  # watermark 10 released 3 and 5
    agg.flush()
    assert agg.stats["next_close"] is None
