"""Checkpoints of the streaming preference queries (SkylineQuery, TopDominantQuery, TopKQuery): a query
snapshotted after any push and restored (with other threads or another strategy, through pickle, in another
process) continues with exactly the rows and order of the uninterrupted query; mismatches and damaged bytes
are named errors; the committed snapshots of tests/fixtures/snapshots still restore
(docs/checkpoints.md#preference-queries)."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from windgate.errors import InvalidParameterError, SnapshotError, SnapshotMismatchError

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots"
CLASSES = {
    "skyline": windgate.SkylineQuery,
    "top_dominant": windgate.TopDominantQuery,
    "topk": windgate.TopKQuery,
}
STRATEGIES = ["auto", "pane", "farm", "recompute", "reference"]
SCHEMA = pa.schema(
    [
        ("ts", pa.int64()),
        ("g", pa.int32()),
        ("s", pa.string()),
        ("x0", pa.float64()),
        ("x1", pa.int32()),
        ("score", pa.float64()),
        ("id", pa.int64()),
    ]
)


def query_kw(query: str, *, prefer="min", delta=2, k=2, descending=True) -> dict:
    if query == "topk":
        return {"score": "score", "k": k, "descending": descending}
    kw = {"dims": ["x0", "x1"], "prefer": prefer}
    if query == "top_dominant":
        kw["delta"] = delta
    return kw


def batches_of(rows: list[dict], cuts: list[int]) -> list[pa.RecordBatch]:
    bounds = [0, *sorted(cuts), len(rows)]
    return [
        pa.RecordBatch.from_pylist(rows[a:b], schema=SCHEMA)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        if b > a
    ]


def concat(outs: list[pa.RecordBatch]) -> list[dict]:
    return [r for o in outs for r in o.to_pylist()]


def uninterrupted(query: str, kw: dict, batches: list[pa.RecordBatch]) -> list[dict]:
    q = CLASSES[query](**kw)
    outs = [q.push(b) for b in batches]
    outs.append(q.flush())
    return concat(outs)


_value = st.integers(0, 4).map(float)


@st.composite
def checkpoint_case(draw):
    query = draw(st.sampled_from(list(CLASSES)))
    n = draw(st.integers(0, 80))
    lateness = draw(st.sampled_from([None, "adaptive", 0, 2, 5]))
    jitter = 5 if lateness is None or lateness == "adaptive" else lateness
    rows = [
        {
            "ts": i // 3 - draw(st.integers(0, jitter)),
            "g": draw(st.one_of(st.none(), st.integers(0, 2))),
            "s": draw(st.sampled_from(["a", "b"])),
            "x0": draw(_value),
            "x1": draw(st.integers(0, 3)),
            "score": draw(_value),
            "id": i,
        }
        for i in range(n)
    ]
    size = draw(st.integers(1, 8))
    kw = dict(
        time="ts",
        size=size,
        slide=draw(st.integers(1, size)),
        by=draw(st.sampled_from([None, "g", ["s", "g"]])),
        lateness=lateness,
        **query_kw(
            query,
            prefer=draw(st.sampled_from(["min", "max", ["max", "min"]])),
            delta=draw(st.integers(0, 3)),
            k=draw(st.integers(0, 3)),
            descending=draw(st.booleans()),
        ),
    )
    cuts = draw(st.lists(st.integers(0, n), max_size=5))
    stops = sorted(draw(st.lists(st.integers(0, 6), min_size=2, max_size=2)))
    runtime = [
        {"strategy": draw(st.sampled_from(STRATEGIES)), "threads": draw(st.integers(1, 3))} for _ in range(3)
    ]
    return query, rows, kw, cuts, stops, runtime


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(checkpoint_case())
def test_a_restored_query_continues_the_uninterrupted_one(case):
    query, rows, kw, cuts, (stop1, stop2), runtime = case
    batches = batches_of(rows, cuts)
    want = uninterrupted(query, kw, batches)
    cls = CLASSES[query]
    q = cls(**kw, **runtime[0])
    outs = [q.push(b) for b in batches[:stop1]]
    q = cls.restore(q.snapshot(), **runtime[1])
    assert q.stats["threads"] <= runtime[1]["threads"]
    outs += [q.push(b) for b in batches[stop1:stop2]]
    q = pickle.loads(pickle.dumps(q))  # a restore of a restore, with the snapshot's own settings
    assert type(q) is cls
    q = cls.restore(q.snapshot(), **runtime[2])
    outs += [q.push(b) for b in batches[stop2:]]
    outs.append(q.flush())
    assert concat(outs) == want
    assert q.stats["rows_in"] == len(rows)


def _sample(query: str = "skyline", **runtime) -> tuple[windgate.SkylineQuery, list[pa.RecordBatch], dict]:
    rows = [
        {
            "ts": i // 2,
            "g": i % 3,
            "s": "ab"[i % 2],
            "x0": float(i * 7 % 5),
            "x1": i * 3 % 4,
            "score": 1.0,
            "id": i,
        }
        for i in range(60)
    ]
    kw = dict(time="ts", size=6, slide=2, by="g", lateness=1, **query_kw(query))
    q = CLASSES[query](**kw, **runtime)
    batches = batches_of(rows, [25])
    q.push(batches[0])
    return q, batches, kw


def test_restore_with_other_threads_and_strategy_and_pickle():
    q, batches, kw = _sample(threads=1)  # strategy="auto": the pane engine on one thread
    data = q.snapshot()
    assert isinstance(data, bytes)
    r = windgate.SkylineQuery.restore(data, threads=2)
    assert (r.stats["threads"], r.stats["strategy"]) == (2, "farm")
    assert r.stats["rows_in"] == q.stats["rows_in"] == 25
    p = pickle.loads(pickle.dumps(q))
    want = concat([q.push(batches[1]), q.flush()])
    assert concat([r.push(batches[1]), r.flush()]) == want
    assert concat([p.push(batches[1]), p.flush()]) == want
    r = windgate.SkylineQuery.restore(bytearray(data), strategy="recompute", farm={"scheduler": "pb_rr"})
    assert r.stats["strategy"] == "recompute"


def test_mismatching_keywords_and_queries_are_named():
    q, _, _ = _sample()
    data = q.snapshot()
    with pytest.raises(SnapshotMismatchError, match="^size:"):
        windgate.SkylineQuery.restore(data, size=7)
    with pytest.raises(SnapshotMismatchError, match="^prefer:"):
        windgate.SkylineQuery.restore(data, prefer="max")
    windgate.SkylineQuery.restore(data, size=6, dims=["x0", "x1"])  # equal values are fine
    with pytest.raises(SnapshotMismatchError, match="^query:"):
        windgate.TopKQuery.restore(data)
    with pytest.raises(SnapshotMismatchError, match="^query:"):
        windgate.TopDominantQuery.restore(data)
    with pytest.raises(InvalidParameterError, match="score"):
        windgate.SkylineQuery.restore(data, score="x0")
    with pytest.raises(InvalidParameterError, match="threads"):
        windgate.SkylineQuery.restore(data, threads=0)


def test_garbage_truncated_and_changed_bytes_are_snapshot_errors():
    q, _, _ = _sample("topk")
    data = q.snapshot()
    for bad in [b"", b"not a snapshot at all", data[:-1], data[: len(data) // 2], data[:-5] + b"xxxxx"]:
        with pytest.raises(SnapshotError):
            windgate.TopKQuery.restore(bad)
    with pytest.raises(InvalidParameterError):
        windgate.TopKQuery.restore("text")


def test_snapshot_of_a_failed_or_flushed_query_is_a_named_error():
    q, _, _ = _sample()
    q.flush()
    with pytest.raises(InvalidParameterError, match="flushed"):
        q.snapshot()
    q, _, _ = _sample()
    with pytest.raises(windgate.errors.InvalidValueError):
        q.push(pa.RecordBatch.from_pylist([{"ts": 30, "x0": float("nan"), "x1": 0, "g": 0}], schema=SCHEMA))
    # A rejected batch leaves the query usable, and its snapshot whole.
    windgate.SkylineQuery.restore(q.snapshot())


def _continue_elsewhere(q, batches: list[pa.RecordBatch]) -> list[dict]:
    """Runs in a spawned process: the query arrives pickled."""
    return concat([*(q.push(b) for b in batches), q.flush()])


def test_multiprocessing_spawn_round_trip():
    q, batches, kw = _sample("top_dominant", threads=2)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        got = pool.apply(_continue_elsewhere, (q, batches[1:]))
    assert got == concat([q.push(batches[1]), q.flush()])


def _read_ipc(path: Path) -> pa.Table:
    with pa.ipc.open_file(path) as f:
        return f.read_all()


@pytest.mark.parametrize("name", ["skyline", "topk"])
def test_committed_snapshots_still_restore(name):
    """Snapshots written by format version 1 (tests/fixtures/snapshots/make_preference.py): restored, fed the
    rest of their stream, they give the output recorded when they were written."""
    data = (FIXTURES / f"{name}_v1.snap").read_bytes()
    rest = _read_ipc(FIXTURES / f"{name}_v1.rest.arrow")
    want = _read_ipc(FIXTURES / f"{name}_v1.expected.arrow")
    for runtime in [{}, {"threads": 2, "strategy": "farm"}, {"strategy": "reference"}]:
        q = CLASSES[name].restore(data, **runtime)
        outs = [q.push(b) for b in rest.to_batches()]
        outs.append(q.flush())
        got = pa.Table.from_batches([o for o in outs if o.num_rows], schema=want.schema)
        assert got.equals(want), runtime


def test_dictionary_and_string_group_keys_keep_their_groups():
    """The group dictionary is written as its key columns; a dictionary-encoded ``by`` comes back as one."""
    t = pa.table(
        {
            "ts": list(range(40)),
            "g": pa.array(["a", "b", "c", "a"] * 10).dictionary_encode(),
            "v": [float(i % 7) for i in range(40)],
        }
    )

    def run(restore_at: int) -> list[dict]:
        q = windgate.TopKQuery(time="ts", size=6, slide=2, by="g", score="v", k=2, lateness=1)
        outs = []
        for i, b in enumerate(t.to_batches(max_chunksize=7)):
            if i == restore_at:
                q = windgate.TopKQuery.restore(q.snapshot(), threads=2)
            outs.append(q.push(b))
        outs.append(q.flush())
        return concat(outs)

    want = run(-1)
    assert want
    for at in range(6):
        assert run(at) == want
