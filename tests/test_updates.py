"""The update mode: ``allowed_lateness`` (fired windows fire again with late rows, marked by ``revision``) and
``emit="early"`` (open windows fire partial results, marked not ``final``), against a brute force that replays
the stream push by push."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import windows_of
from windgate.errors import InvalidParameterError

SIZE, SLIDE = 10, 5

streams = st.integers(0, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 150), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
        st.lists(st.integers(-50, 50), min_size=n, max_size=n),
        st.lists(st.integers(0, n), max_size=5),
    )
)


def pushes(ts, keys, vals, cuts):
    bounds = sorted({0, len(ts), *cuts})
    for a, b in zip(bounds, bounds[1:], strict=False):
        yield (
            pa.record_batch(
                {
                    "ts": pa.array(ts[a:b], pa.int64()),
                    "k": pa.array(keys[a:b], pa.int64()),
                    "v": pa.array(vals[a:b], pa.int64()),
                }
            ),
            range(a, b),
        )


def replay(ts, keys, vals, cuts, lateness, allowed):
    """The update mode's output, push by push, from its definition: a row below the watermark it met (``wm``)
    counts in each of its windows whose end is above ``wm - allowed``; after each push the windows whose end
    the watermark passed fire once, and fired windows that took rows in that push fire again."""
    top = None
    counted = defaultdict(list)  # (start, key) -> values
    fired: dict[tuple[int, int], int] = {}
    out = []
    for _, rows in pushes(ts, keys, vals, cuts):
        touched = set()
        for i in rows:
            wm = None if top is None else top - lateness
            for start in windows_of(ts[i], SIZE, SLIDE, 0):
                if wm is None or ts[i] >= wm or start + SIZE > wm - allowed:
                    counted[(start, keys[i])].append(vals[i])
                    touched.add((start, keys[i]))
            top = ts[i] if top is None else max(top, ts[i])
        wm = None if top is None else top - lateness
        fire = [
            w
            for w in counted
            if (w in fired and w in touched) or (w not in fired and wm is not None and w[0] + SIZE <= wm)
        ]
        for w in sorted(fire):
            fired[w] = fired[w] + 1 if w in fired else 0
            out.append((w[1], w[0], len(counted[w]), sum(counted[w]), fired[w]))
    for w in sorted(w for w in counted if w not in fired):
        out.append((w[1], w[0], len(counted[w]), sum(counted[w]), 0))
    return out


def rows_of(batches):
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return []
    t = pa.Table.from_batches(batches)
    return list(
        zip(
            *[t.column(c).to_pylist() for c in ["k", "window_start", "count", "sum_v", "revision"]],
            strict=True,
        )
    )


QUERY = dict(time="ts", size=SIZE, slide=SLIDE, by="k", aggs={"*": "count", "v": "sum"})


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams, lateness=st.integers(0, 20), allowed=st.integers(0, 30))
def test_revisions_replay_the_definition(stream, lateness, allowed):
    ts, keys, vals, cuts = stream
    agg = windgate.WindowAggregator(**QUERY, lateness=lateness, allowed_lateness=allowed)
    outs = [agg.push(b) for b, _ in pushes(ts, keys, vals, cuts)]
    outs.append(agg.flush())
    assert rows_of(outs) == replay(ts, keys, vals, cuts, lateness, allowed)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams, lateness=st.integers(0, 20), interval=st.integers(1, 12))
def test_early_firings_end_in_the_default_rows(stream, lateness, interval):
    """The final rows are exactly the default mode's; each early row is a window still open then, holding
    part of what its final row holds."""
    ts, keys, vals, cuts = stream
    early = windgate.WindowAggregator(**QUERY, lateness=lateness, emit="early", interval=interval)
    plain = windgate.WindowAggregator(**QUERY, lateness=lateness)
    got, want = [], []
    for b, _ in pushes(ts, keys, vals, cuts):
        got.append(early.push(b))
        want.append(plain.push(b))
    got.append(early.flush())
    want.append(plain.flush())
    if not ts:
        return
    got = pa.Table.from_batches([b for b in got if b.num_rows], schema=early.schema)
    want = pa.Table.from_batches([b for b in want if b.num_rows], schema=plain.schema)
    final = got.filter(got.column("final")).drop_columns(["final"])
    assert final.equals(want)
    counts = {(r["k"], r["window_start"]): r["count"] for r in want.to_pylist()}
    for r in got.filter(pa.compute.invert(got.column("final"))).to_pylist():
        assert r["count"] <= counts[(r["k"], r["window_start"])]


def test_memory_is_bounded_by_the_allowed_lateness():
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=0, allowed_lateness=20)
    for start in range(0, 100_000, 1000):
        agg.push(pa.record_batch({"ts": pa.array(range(start, start + 1000), pa.int64())}))
        assert agg.stats["open_slots"] <= 1000 + 40  # the rows of the last push and of 40 units before it


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(allowed_lateness=5), "allowed_lateness.*lateness="),
        (dict(lateness=1, allowed_lateness=-1), "allowed_lateness"),
        (dict(lateness=1, emit="early"), "interval"),
        (dict(lateness=1, interval=5), "interval"),
        (dict(lateness=1, emit="soon", interval=5), "emit"),
        (dict(lateness=1, emit="early", interval=0), "interval"),
        (dict(lateness=1, allowed_lateness=5, strategy="pane"), "strategy"),
        (dict(lateness=1, allowed_lateness=5, output="partials"), "allowed_lateness"),
    ],
)
def test_bad_update_parameters(kw, match):
    with pytest.raises(InvalidParameterError, match=match):
        windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, **kw)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=streams,
    lateness=st.integers(0, 20),
    allowed=st.integers(0, 30),
    interval=st.one_of(st.none(), st.integers(1, 12)),
    at=st.integers(0, 6),
)
def test_a_restored_operator_fires_what_the_uninterrupted_one_does(stream, lateness, allowed, interval, at):
    """Snapshot (through pickle) after any push, restore, go on: the same rows, revisions, early firings."""
    import pickle

    ts, keys, vals, cuts = stream
    kw = dict(QUERY, lateness=lateness, allowed_lateness=allowed)
    if interval is not None:
        kw.update(emit="early", interval=interval)
    whole, agg = windgate.WindowAggregator(**kw), windgate.WindowAggregator(**kw)
    want, got = [], []
    for i, (b, _) in enumerate(pushes(ts, keys, vals, cuts)):
        want.append(whole.push(b))
        got.append(agg.push(b))
        if i == at:
            agg = pickle.loads(pickle.dumps(agg))
    want.append(whole.flush())
    got.append(agg.flush())
    assert [b.to_pylist() for b in got] == [b.to_pylist() for b in want]


def test_durations_on_a_timestamp_column():
    t = pa.table({"ts": pa.array([0, 70_000_000, 5_000_000], pa.timestamp("us")), "v": [1, 2, 3]})
    out = windgate.window_aggregate(
        t, time="ts", size="1m", aggs={"v": "sum"}, lateness="1s", allowed_lateness="1m"
    )
    assert out.column("sum_v").to_pylist() == [4, 2] and out.column("revision").to_pylist() == [0, 0]
