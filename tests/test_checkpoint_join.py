"""BandJoiner checkpoints through Python: snapshot after any push, restore with other threads and strategy
(and pickle), continue, and get exactly the rows and order of the uninterrupted joiner; refused restores
name the problem; a committed snapshot of an earlier version still restores (``tests/fixtures/snapshots``)."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.compute
import pyarrow.ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from windgate.errors import SnapshotError, SnapshotMismatchError

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots"
SCHEMAS = {
    "left": pa.schema([("ts", pa.int64()), ("k", pa.int32()), ("x", pa.float64())]),
    "right": pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("a", pa.float64())]),
}
RUNTIMES = [("reference", 1), ("serial", 1), ("scalejoin", 2), ("scalejoin", 3), ("auto", 1)]


def _batch(side: str, rows: list[tuple[int, int | None, float | None]]) -> pa.RecordBatch:
    schema = SCHEMAS[side]
    return pa.record_batch(
        [pa.array([r[i] for r in rows], schema.field(i).type) for i in range(3)], schema=schema
    )


def _rows(size: int):
    row = st.tuples(
        st.integers(0, 60),
        st.one_of(st.none(), st.integers(0, 2)),
        st.one_of(st.none(), st.integers(0, 6).map(lambda v: v / 2)),
    )
    return st.lists(row, max_size=size)


@st.composite
def cases(draw):
    """A query and its pushes: each side's rows disordered within the lateness, cut and interleaved."""
    lateness = draw(st.one_of(st.none(), st.integers(0, 4)))
    pushes = []
    sides = {s: sorted(draw(_rows(30)), key=lambda r: r[0]) for s in ("left", "right")}
    for side, rows in sides.items():
        k = 40 if lateness is None else lateness
        delays = draw(st.lists(st.integers(0, k), min_size=len(rows), max_size=len(rows)))
        order = sorted(range(len(rows)), key=lambda i: (rows[i][0] + delays[i], i))
        sides[side] = [rows[i] for i in order]
    at = {"left": 0, "right": 0}
    while at["left"] < len(sides["left"]) or at["right"] < len(sides["right"]):
        side = draw(st.sampled_from(["left", "right"]))
        n = draw(st.integers(1, 8))
        chunk = sides[side][at[side] : at[side] + n]
        at[side] += n
        if chunk:
            pushes.append((side, chunk))
    on = [windgate.band("x", "a", draw(st.sampled_from([0, 0.5, 2])))]
    if draw(st.booleans()):
        on.append(windgate.eq("k", "k"))
    kwargs = dict(
        time="ts",
        window=draw(st.integers(0, 8)),
        on=on,
        lateness=lateness,
        how=draw(st.sampled_from(["inner", "left"])),
        semantics=draw(st.sampled_from(["interval", "scalejoin"])),
    )
    return kwargs, pushes


def _run(joiner: windgate.BandJoiner, pushes) -> list[list[dict]]:
    return [joiner.push(_batch(side, rows), side=side).to_pylist() for side, rows in pushes]


def _uninterrupted(kwargs, pushes) -> list[list[dict]]:
    j = windgate.BandJoiner(**kwargs, strategy="reference")
    return [*_run(j, pushes), j.flush().to_pylist()]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cases(),
    runs=st.lists(st.sampled_from(RUNTIMES), min_size=2, max_size=2),
    cut=st.integers(0, 100),
    via_pickle=st.booleans(),
)
def test_a_restored_joiner_continues_exactly(case, runs, cut, via_pickle):
    kwargs, pushes = case
    cut %= len(pushes) + 1
    want = _uninterrupted(kwargs, pushes)
    (s1, t1), (s2, t2) = runs
    j = windgate.BandJoiner(**kwargs, strategy=s1, threads=t1)
    got = _run(j, pushes[:cut])
    if via_pickle:
        j = pickle.loads(pickle.dumps(j))
    else:
        j = windgate.BandJoiner.restore(j.snapshot(), strategy=s2, threads=t2)
    got += _run(j, pushes[cut:])
    got.append(j.flush().to_pylist())
    assert got == want


def _sample() -> tuple[windgate.BandJoiner, dict]:
    kwargs = dict(time="ts", window=3, on=[windgate.band("x", "a", 1)], lateness=1, how="left")
    j = windgate.BandJoiner(**kwargs, threads=2)
    j.push(_batch("left", [(t, t % 3, t % 4 / 2) for t in range(20)]), side="left")
    j.push(_batch("right", [(t, t % 2, t % 5 / 2) for t in range(0, 20, 2)]), side="right")
    return j, kwargs


def test_restore_takes_runtime_settings_and_keeps_the_query():
    j, _ = _sample()
    data = j.snapshot()
    k = windgate.BandJoiner.restore(data, threads=2, strategy="serial", index=False, credits=None)
    assert k.stats["strategy"] == "serial"
    assert k.stats["pairs_out"] == j.stats["pairs_out"]
    assert k.stats["rows_in_left"] == 20
    same = windgate.BandJoiner.restore(data, window=3, how="left")
    assert same.flush().to_pylist() == j.flush().to_pylist()


@pytest.mark.parametrize(
    ("name", "value"), [("window", 4), ("how", "inner"), ("lateness", 2), ("on", windgate.band("x", "a", 2))]
)
def test_another_query_is_a_mismatch_naming_it(name, value):
    j, _ = _sample()
    with pytest.raises(SnapshotMismatchError, match=f"^{name}:"):
        windgate.BandJoiner.restore(j.snapshot(), **{name: value})


def test_garbage_and_truncated_bytes_are_a_snapshot_error():
    j, _ = _sample()
    data = j.snapshot()
    for bad in (b"garbage", data[:-1], data[: len(data) // 2], data[:9] + bytes([data[9] ^ 1]) + data[10:]):
        with pytest.raises(SnapshotError):
            windgate.BandJoiner.restore(bad)


def _continue(data: bytes) -> list[dict]:
    """Runs in a spawned process: unpickle the joiner, push the right side's rest, flush."""
    j = pickle.loads(data)
    out = j.push(_batch("right", [(t, t % 2, t % 5 / 2) for t in range(20, 30, 2)]), side="right").to_pylist()
    return out + j.flush().to_pylist()


def test_a_joiner_crosses_a_spawned_process():
    j, _ = _sample()
    data = pickle.dumps(j)
    with mp.get_context("spawn").Pool(1) as pool:
        got = pool.apply(_continue, (data,))
    assert got == _continue(data)
    assert got


def _read_ipc(path: Path) -> pa.Table:
    with pa.ipc.open_file(path) as f:
        return f.read_all()


def test_the_committed_v1_snapshot_still_restores():
    """``make_band_join.py`` wrote these with state version 1; a later format must keep reading them."""
    data = (FIXTURES / "band_join_v1.snap").read_bytes()
    rest = _read_ipc(FIXTURES / "band_join_v1.rest.arrow")
    want = _read_ipc(FIXTURES / "band_join_v1.expected.arrow")
    for runtime in ({}, {"threads": 3, "strategy": "scalejoin"}, {"strategy": "reference"}):
        j = windgate.BandJoiner.restore(data, **runtime)
        out = [j.push(*push) for push in _pushes(rest)]
        out.append(j.flush())
        got = pa.Table.from_batches([b for b in out if b.num_rows], schema=want.schema)
        assert got.equals(want), runtime


def _pushes(rest: pa.Table) -> list[tuple[pa.Table, str]]:
    """The fixture's input still to push: rows tagged with their push number and side."""
    out = []
    for n in sorted(set(rest["push"].to_pylist())):
        rows = rest.filter(pa.compute.equal(rest["push"], n))
        out.append((rows.drop_columns(["push", "side"]), rows["side"][0].as_py()))
    return out
