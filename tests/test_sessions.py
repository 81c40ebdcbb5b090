"""Session windows (``gap=``): window_aggregate and WindowAggregator against a brute force, across inputs,
batch splits, disorder within the lateness bound and late rows; edge cases and parameter errors."""

from __future__ import annotations

import datetime as dt
import pickle

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import kslack_admitted
from windgate.errors import InvalidParameterError, LateRowError, SnapshotMismatchError

AGGS = {"*": "count", "v": ["count", "sum", "min", "max", "mean", "first", "last"]}


def table(rows):
    return pa.table(
        {
            "ts": pa.array([r[0] for r in rows], pa.int64()),
            "k": pa.array([r[1] for r in rows], pa.int32()),
            "v": pa.array([r[2] for r in rows], pa.float64()),
        }
    )


def brute(rows, gap, lateness=None):
    """Per key: sort by (time, arrival), cut where a row's time is above the previous row's time + gap (a
    row exactly at a session's end joins it, as in Spark)."""
    keep, late = kslack_admitted(rows, lateness)
    out = []
    for k in sorted({r[1] for _, r in keep}, key=lambda k: (k is not None, k)):
        mine = sorted(((r[0], i, r) for i, r in keep if r[1] == k), key=lambda x: (x[0], x[1]))
        groups = []
        for t, _, r in mine:
            if groups and t <= groups[-1][-1][0] + gap:
                groups[-1].append(r)
            else:
                groups.append([r])
        for g in groups:
            vals = [r[2] for r in g if r[2] is not None]
            out.append(
                {
                    "k": k,
                    "window_start": g[0][0],
                    "window_end": g[-1][0] + gap,
                    "count": len(g),
                    "count_v": len(vals),
                    "sum_v": sum(vals) if vals else None,
                    "min_v": min(vals) if vals else None,
                    "max_v": max(vals) if vals else None,
                    "mean_v": sum(vals) / len(vals) if vals else None,
                    "first_v": vals[0] if vals else None,
                    "last_v": vals[-1] if vals else None,
                }
            )
    nulls_first = [(s["window_end"], s["window_start"], s["k"] is not None, s["k"] or 0) for s in out]
    return [s for _, s in sorted(zip(nulls_first, out, strict=True), key=lambda x: x[0])], late


row = st.tuples(
    st.integers(-100, 100),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.integers(-400, 400).map(lambda i: i / 4)),
)


@st.composite
def case(draw):
    gap = draw(st.one_of(st.integers(1, 4), st.integers(1, 40), st.just(10**12)))
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
    threads = draw(st.integers(1, 4))
    return gap, lateness, rows, cuts, threads


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_streaming_and_batch_match_brute_force(c):
    gap, lateness, rows, cuts, threads = c
    want, late = brute(rows, gap, lateness)
    agg = windgate.WindowAggregator(time="ts", gap=gap, by="k", aggs=AGGS, lateness=lateness, threads=threads)
    parts, start = [], 0
    for end in [*cuts, len(rows)]:
        parts.append(agg.push(table(rows[start:end])))
        start = end
    parts.append(agg.flush())
    got = pa.Table.from_batches(parts)
    assert agg.stats["late_rows"] == late
    _same(got.to_pylist(), want)
    if lateness is None:
        batch = windgate.window_aggregate(table(rows), time="ts", gap=gap, by="k", aggs=AGGS)
        assert batch.equals(got)
    ref = windgate.window_aggregate(
        table(rows), time="ts", gap=gap, by="k", aggs=AGGS, lateness=lateness, strategy="reference"
    )
    assert ref.equals(got)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_next_close_is_the_least_open_end_plus_one(c):
    """``stats["next_close"]`` after every push: the least end plus one of the brute force's sessions of
    the rows so far that the watermark has not closed (a session is final once ``end < watermark``)."""
    gap, lateness, rows, cuts, threads = c
    agg = windgate.WindowAggregator(
        time="ts", gap=gap, by="k", aggs={"*": "count"}, lateness=lateness, threads=threads
    )
    assert agg.stats["next_close"] is None
    start = 0
    for end in [*cuts, len(rows)]:
        agg.push(table(rows[start:end]))
        start = end
        wm = agg.stats["watermark"]
        ends = [s["window_end"] for s in brute(rows[:end], gap, lateness)[0]]
        want = min((e + 1 for e in ends if wm is None or e >= wm), default=None)
        assert agg.stats["next_close"] == want
    agg.flush()
    assert agg.stats["next_close"] is None


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for name, wv in w.items():
            if name == "mean_v" and wv is not None:
                assert g[name] == pytest.approx(wv, rel=1e-12), (name, g, w)
            else:
                assert g[name] == wv, (name, g, w)


def test_edges():
    q = dict(time="ts", gap=5, by="k", aggs=AGGS)
    assert windgate.window_aggregate(table([]), **q).num_rows == 0
    assert windgate.window_aggregate(table([(7, 1, None)]), **q).to_pylist()[0]["window_end"] == 12
    one_unit = windgate.window_aggregate(table([(0, 1, 1.0), (1, 1, 2.0), (1, 1, 3.0)]), **{**q, "gap": 1})
    assert [(r["window_start"], r["window_end"], r["count"]) for r in one_unit.to_pylist()] == [(0, 2, 3)]
    apart = windgate.window_aggregate(table([(0, 1, 1.0), (2, 1, 2.0)]), **{**q, "gap": 1})
    assert [(r["window_start"], r["window_end"]) for r in apart.to_pylist()] == [(0, 1), (2, 3)]
    huge = windgate.window_aggregate(table([(0, None, 1.0), (90, None, None)]), **{**q, "gap": 10**15})
    assert huge.to_pylist()[0]["count"] == 2 and huge.to_pylist()[0]["k"] is None


def test_timestamps_and_timedelta():
    t = pa.table({"ts": pa.array([0, 20, 50, 70], pa.timestamp("s")), "v": [1.0, 2.0, 3.0, 4.0]})
    a = windgate.window_aggregate(t, time="ts", gap="30s", aggs={"v": "sum"})
    b = windgate.window_aggregate(t, time="ts", gap=dt.timedelta(seconds=30), aggs={"v": "sum"})
    assert a.equals(b)
    assert a.schema.field("window_start").type == pa.timestamp("s")
    assert a.column("sum_v").to_pylist() == [10.0]  # 50 is exactly at the session's end: it joins (Spark)
    c = windgate.window_aggregate(t, time="ts", gap="29s", aggs={"v": "sum"})
    assert c.column("sum_v").to_pylist() == [3.0, 7.0]


def test_parameter_errors_name_them():
    t = table([(1, 1, 1.0)])
    with pytest.raises(InvalidParameterError, match="gap.*size|size.*gap"):
        windgate.window_aggregate(t, time="ts", size=10, gap=5, aggs=AGGS)
    with pytest.raises(InvalidParameterError, match="gap.*slide|slide.*gap"):
        windgate.WindowAggregator(time="ts", slide=2, gap=5, aggs=AGGS)
    for bad in (0, -3):
        with pytest.raises(InvalidParameterError, match="^gap"):
            windgate.window_aggregate(t, time="ts", gap=bad, aggs=AGGS)
    with pytest.raises(InvalidParameterError, match="^size"):
        windgate.window_aggregate(t, time="ts", aggs=AGGS)
    agg = windgate.WindowAggregator(time="ts", gap=5, aggs=AGGS, strategy="reference")
    with pytest.raises(InvalidParameterError, match="^strategy"):
        agg.snapshot()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_snapshot_restore_and_pickle_continue_exactly(c):
    gap, lateness, rows, cuts, threads = c
    kw = dict(time="ts", gap=gap, by="k", aggs=AGGS, lateness=lateness)
    whole = windgate.WindowAggregator(threads=threads, **kw)
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
        assert again.stats["next_close"] == whole.stats["next_close"]
    a.append(whole.flush())
    b.append(again.flush())
    assert pa.Table.from_batches(b).equals(pa.Table.from_batches(a))
    assert again.stats["late_rows"] == whole.stats["late_rows"]
    with pytest.raises(SnapshotMismatchError, match="^gap"):
        windgate.WindowAggregator.restore(whole_snapshot(kw), gap=gap + 1)


def whole_snapshot(kw):
    agg = windgate.WindowAggregator(**kw)
    agg.push(table([(1, 1, 1.0)]))
    return agg.snapshot()


def test_late_rows_follow_on_late():
    agg = windgate.WindowAggregator(time="ts", gap=3, aggs={"*": "count"}, lateness=2)
    out = agg.push(table([(10, 1, 1.0), (20, 1, 1.0), (17, 1, 1.0), (18, 1, 1.0), (30, 1, 1.0)]))
    assert out.to_pydict() == {"window_start": [10, 18], "window_end": [13, 23], "count": [1, 2]}
    assert agg.stats["late_rows"] == 1
    strict = windgate.WindowAggregator(time="ts", gap=3, aggs={"*": "count"}, lateness=2, on_late="error")
    with pytest.raises(LateRowError):
        strict.push(table([(10, 1, 1.0), (20, 1, 1.0), (17, 1, 1.0)]))


@pytest.mark.parametrize("threads", [2, 3])
def test_threads_return_the_one_thread_rows(threads):
    """Batches large enough for the workers' own threads: random keys, values and disorder; every thread
    count returns the one-thread rows, whole or cut, and reports its workers in stats."""
    import numpy as np

    rng = np.random.default_rng(threads)
    n = 120_000
    t = pa.table(
        {
            "ts": pa.array(np.arange(n) // 4 + rng.integers(0, 50, n), pa.int64()),
            "k": pa.array(rng.integers(0, 3_000, n), pa.int32()),
            "v": pa.array(rng.normal(size=n), pa.float64()),
        }
    )
    kw = dict(time="ts", gap=20, by="k", aggs=AGGS, lateness=50)
    one = windgate.window_aggregate(t, threads=1, **kw)
    assert windgate.window_aggregate(t, threads=threads, **kw).equals(one)
    agg = windgate.WindowAggregator(threads=threads, **kw)
    parts = [agg.push(b) for b in t.to_batches(max_chunksize=40_000)]
    parts.append(agg.flush())
    assert pa.Table.from_batches(parts).equals(one)
    assert agg.stats["threads"] == threads


@pytest.mark.parametrize("key_type", ["int", "str"])
def test_many_keys_streamed_equal_the_batch_call(key_type):
    """Hundreds of thousands of keys, most with one session: pushes close few sessions against a large
    dictionary (ordered by comparing their keys), the batch call closes all at once (ordered by ranking every
    key); both give the same rows, sorted by (window_end, window_start, key) with null keys first."""
    import numpy as np

    rng = np.random.default_rng(7)
    n = 200_000
    ids = rng.integers(0, 150_000, n)
    if key_type == "int":
        keys = pa.array(ids, pa.int64(), mask=ids % 997 == 0)
    else:
        keys = pa.array([f"user-{i:06d}-{'x' * (i % 20)}" if i % 997 else None for i in ids], pa.string())
    t = pa.table(
        {
            "ts": pa.array(np.sort(rng.integers(0, n * 10, n)), pa.int64()),
            "k": keys,
            "v": pa.array(rng.normal(size=n), pa.float64()),
        }
    )
    kw = dict(time="ts", gap=500, by="k", aggs=AGGS)
    whole = windgate.window_aggregate(t, **kw)
    agg = windgate.WindowAggregator(lateness=0, **kw)
    parts = [agg.push(b) for b in t.to_batches(max_chunksize=5_000)]
    parts.append(agg.flush())
    assert pa.Table.from_batches(parts).equals(whole)
    order = [
        (r["window_end"], r["window_start"], r["k"] is not None, r["k"])
        for r in whole.select(["window_end", "window_start", "k"]).to_pylist()
    ]
    nulls_first = [(e, s, has, k if has else 0 if key_type == "int" else "") for e, s, has, k in order]
    assert nulls_first == sorted(nulls_first)
