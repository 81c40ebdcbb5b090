"""Checkpoints of WindowAggregator: snapshot after any push, restore under any strategy and thread count (or
through pickle, or in another process), and the rows and their order are those of the uninterrupted run."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from windgate import _native

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots"
AGGS = {"*": "count", "v": ["sum", "min", "max", "mean", "first", "last", "var"], "n": ["sum", "last"]}
#: Strategies that take any single source (the multiway designs need time-sorted sources).
STRATEGIES = [s["name"] for s in _native.strategies("window_aggregate") if not s["sorted_sources"]]


def table(rows: list[tuple[int, int | None, float | None, int]]) -> pa.Table:
    ts, k, v, n = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array(k, pa.int32()),
            "v": pa.array(v, pa.float64()),
            "n": pa.array(n, pa.int64()),
        }
    )


@st.composite
def cases(draw):
    size = draw(st.integers(1, 15))
    slide = draw(st.integers(1, size))
    lateness = draw(st.none() | st.integers(0, 6))
    n = draw(st.integers(0, 80))
    rows = []
    for _ in range(n):
        rows.append(
            (
                draw(st.integers(-40, 60)),
                draw(st.none() | st.integers(0, 4)),
                draw(st.none() | st.integers(-20, 20).map(lambda x: x * 0.25)),
                draw(st.integers(-1000, 1000)),
            )
        )
    if lateness is not None:
        # Arrival is event order perturbed by a delay within the bound: nothing is late.
        delays = [draw(st.integers(0, lateness)) for _ in rows]
        arrival = sorted(range(n), key=lambda i: (rows[i][0] + delays[i], i))
        rows = [rows[i] for i in arrival]
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=5)))
    return dict(size=size, slide=slide, lateness=lateness), rows, cuts


def pieces(rows, cuts):
    out, start = [], 0
    for end in [*cuts, len(rows)]:
        out.append(table(rows[start:end]))
        start = end
    return out


def run(params, rows, cuts, start=("reference", 1), restores=()):
    """Every piece pushed, the operator replaced before push ``i`` by a restore of its snapshot for each
    ``(i, strategy, threads, how)`` in ``restores``; then flushed."""
    query = dict(time="ts", by="k", aggs=AGGS, **params)
    agg = windgate.WindowAggregator(strategy=start[0], threads=start[1], **query)
    outs = []
    for i, piece in enumerate(pieces(rows, cuts)):
        for _, strategy, threads, how in [r for r in restores if r[0] == i]:
            if how == "pickle":
                agg = pickle.loads(pickle.dumps(agg))
            else:
                agg = windgate.WindowAggregator.restore(agg.snapshot(), strategy=strategy, threads=threads)
        outs.append(agg.push(piece))
    outs.append(agg.flush())
    return pa.Table.from_batches([b for b in outs if b.num_columns])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cases(),
    first=st.tuples(st.sampled_from(STRATEGIES), st.integers(1, 3)),
    restores=st.lists(
        st.tuples(
            st.integers(0, 6),
            st.sampled_from(STRATEGIES),
            st.integers(1, 3),
            st.sampled_from(["bytes", "pickle"]),
        ),
        max_size=3,
    ),
)
def test_restore_anywhere_continues_the_uninterrupted_rows(case, first, restores):
    params, rows, cuts = case
    want = run(params, rows, cuts)
    got = run(params, rows, cuts, first, restores)
    assert got.equals(want)


def test_restore_refuses_another_query_and_bad_bytes():
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=2)
    agg.push(table([(1, 1, 1.0, 1), (12, 2, 2.0, 2)]))
    data = agg.snapshot()
    with pytest.raises(windgate.SnapshotMismatchError, match=r"^size: .*size=10.*20"):
        windgate.WindowAggregator.restore(data, size=20)
    with pytest.raises(windgate.SnapshotError, match="checksum"):
        windgate.WindowAggregator.restore(data[:-1])
    with pytest.raises(windgate.SnapshotError, match="magic"):
        windgate.WindowAggregator.restore(b"not a snapshot")
    with pytest.raises(windgate.InvalidParameterError, match="^data: expected the bytes"):
        windgate.WindowAggregator.restore("text")
    with pytest.raises(windgate.InvalidParameterError, match="^colour:"):
        windgate.WindowAggregator.restore(data, colour="red")
    # The same value of a query parameter is fine, and so are runtime settings.
    again = windgate.WindowAggregator.restore(data, size=10, threads=2, strategy="farm")
    assert again.stats["strategy"] == "farm"
    assert again.stats["rows_in"] == 2


def test_flushed_operator_refuses_to_snapshot():
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"})
    agg.flush()
    with pytest.raises(windgate.InvalidParameterError, match="^snapshot: the operator was flushed"):
        agg.snapshot()


def _continue_in_child(data: bytes, rest: pa.Table) -> pa.Table:
    agg = pickle.loads(data)
    outs = [agg.push(rest), agg.flush()]
    return pa.Table.from_batches([b for b in outs if b.num_columns])


def test_operator_crosses_to_another_process():
    rows = [(t, t % 3, t * 0.5, t) for t in range(0, 60, 2)]
    query = dict(time="ts", size=10, slide=5, by="k", aggs=AGGS, lateness=0)
    whole = windgate.WindowAggregator(**query)
    want = pa.Table.from_batches([whole.push(table(rows)), whole.flush()])
    agg = windgate.WindowAggregator(**query)
    first = agg.push(table(rows[:15]))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        rest = pool.apply(_continue_in_child, (pickle.dumps(agg), table(rows[15:])))
    assert pa.concat_tables([pa.Table.from_batches([first]), rest]).equals(want)


@pytest.mark.parametrize("strategy", ["pane", "farm", "shard", "reference"])
def test_fixture_of_version_1_restores_and_continues(strategy):
    """A snapshot written by the first state version: every later windgate must keep reading it."""
    data = (FIXTURES / "window_aggregate_v1.snap").read_bytes()
    rest = ipc.open_file(FIXTURES / "window_aggregate_v1.rest.arrow").read_all()
    want = ipc.open_file(FIXTURES / "window_aggregate_v1.expected.arrow").read_all()
    info = _native.snapshot_info(data)
    assert (info["operator"], info["version"]) == ("window_aggregate", 1)
    agg = windgate.WindowAggregator.restore(data, strategy=strategy, threads=2)
    outs = [agg.push(b) for b in rest.to_batches(max_chunksize=37)] + [agg.flush()]
    got = pa.Table.from_batches(outs)
    assert got.equals(want)
