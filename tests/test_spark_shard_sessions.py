"""The Structured Streaming processor of session windows (``windgate._spark_shard.WindgateShard``) driven by
a simulated Spark, no JVM: micro-batches, Spark's global watermark (the largest time of the earlier
micro-batches minus the lateness, in milliseconds), keys hashed into shards, each shard's rows delivered in
pandas chunks in any order, event-time timers fired when the watermark reaches them and no-data batches at
the end. For any data, batch split, disorder within the lateness, shard count and chunking, the sessions
that come out are the batch call's sessions that the final watermark has closed, and nothing else: each call
restores its operator from the snapshot bytes, so every call is a restore point."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import windgate

pytest.importorskip("pyspark")

from scaled import examples

from windgate import spark_streaming  # noqa: E402
from windgate._spark_shard import CLOCK, WindgateShard  # noqa: E402

AGGS = {"*": "count", "v": ["sum", "min", "max", "mean"]}
MS = 1000  # microseconds


class _State:
    def __init__(self) -> None:
        self.value: Any = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value


class _Handle:
    """What the processor calls on Spark's handle: one value state, event-time timers (in ms)."""

    def __init__(self) -> None:
        self.state = _State()
        self.timers: set[int] = set()

    def getValueState(self, name: str, schema: str) -> _State:  # noqa: N802
        return self.state

    def listTimers(self) -> list[int]:  # noqa: N802
        return sorted(self.timers)

    def registerTimer(self, at: int) -> None:  # noqa: N802
        self.timers.add(at)

    def deleteTimer(self, at: int) -> None:  # noqa: N802
        self.timers.discard(at)


class _Clock:
    def __init__(self, watermark_ms: int) -> None:
        self.watermark_ms = watermark_ms

    def getCurrentWatermarkInMs(self) -> int:  # noqa: N802
        return self.watermark_ms


def _shard(gap_ms: int, lateness_ms: int, by: list[str]) -> WindgateShard:
    """The processor as ``spark_streaming.windowed_stream`` builds it for ``window_aggregate(gap=...)``."""
    time_type = pa.timestamp("us", tz="UTC")
    schema = pa.schema(
        [("ts", time_type), ("k", pa.int64()), ("v", pa.float64()), pa.field(CLOCK, pa.int8())]
    )
    kwargs = dict(time="ts", gap=f"{gap_ms}ms", aggs=AGGS, lateness=f"{lateness_ms}ms", on_late="drop")
    spec = {"time": "ts", "time_type": time_type, "lateness": lateness_ms * MS, "unit": "us"}
    spec.update(spark_streaming._timer(kwargs, "us"))
    processor = WindgateShard("WindowAggregator", {**kwargs, "by": [*by, CLOCK]}, schema, spec, None)
    handle = _Handle()
    processor.init(handle)
    return processor


def _table(rows: list[tuple[int, int, float]]) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array([r[0] * MS for r in rows], pa.timestamp("us", tz="UTC")),
            "k": pa.array([r[1] for r in rows], pa.int64()),
            "v": pa.array([r[2] for r in rows], pa.float64()),
        }
    )


def _stream(rows, cuts, *, gap, lateness, shards, by, seed) -> tuple[pa.Table, int]:
    """Runs the micro-batches (``rows`` cut at ``cuts``) through simulated Spark; returns every row the
    processors emitted and Spark's final watermark (ms)."""
    rng = random.Random(seed)
    procs = [_shard(gap, lateness, by) for _ in range(shards)]
    out: list[Any] = []
    watermark, top = 0, None
    batches = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    for batch in [*batches, *([[]] * 3)]:  # then no-data batches while the watermark moves
        clock = _Clock(watermark)
        for s, proc in enumerate(procs):
            mine = [r for r in batch if (r[1] % shards if by else 0) == s]
            if not mine:
                continue
            rng.shuffle(mine)  # the shuffle's order, in chunks
            cut = rng.randint(0, len(mine))
            chunks = [_table(part).to_pandas() for part in (mine[:cut], mine[cut:]) if part]
            out.extend(proc.handleInputRows((s,), iter(chunks), clock))
        for s, proc in enumerate(procs):
            if any(t <= watermark for t in proc.handle.timers):
                out.extend(proc.handleExpiredTimer((s,), clock, None))
        if batch:
            here = max(r[0] for r in batch)
            top = here if top is None else max(top, here)
        if top is not None:
            watermark = max(watermark, top - lateness)
    for proc in procs:
        assert proc._load()[0].stats["late_rows"] == 0
    tables = [pa.Table.from_pandas(pdf, preserve_index=False) for pdf in out]
    return (pa.concat_tables(tables) if tables else None), watermark


row = st.tuples(st.integers(0, 400), st.integers(0, 4), st.integers(-40, 40).map(lambda i: i / 4))


@st.composite
def case(draw):
    gap = draw(st.integers(1, 40))
    lateness = draw(st.integers(0, 30))
    rows = sorted(draw(st.lists(row, max_size=120)))
    # Arrival: event order perturbed by a delay <= lateness, so no row is late.
    delays = draw(st.lists(st.integers(0, lateness), min_size=len(rows), max_size=len(rows)))
    rows = [r for _, r in sorted(zip(delays, rows, strict=True), key=lambda x: x[1][0] + x[0])]
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=6)))
    keyed = draw(st.booleans())
    shards = draw(st.integers(1, 3)) if keyed else 1
    return gap, lateness, rows, cuts, keyed, shards, draw(st.integers(0, 1000))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_simulated_stream_gives_the_closed_sessions_of_the_batch_call(c):
    gap, lateness, rows, cuts, keyed, shards, seed = c
    by = ["k"] if keyed else []
    got, watermark = _stream(rows, cuts, gap=gap, lateness=lateness, shards=shards, by=by, seed=seed)
    want = windgate.window_aggregate(_table(rows), time="ts", gap=f"{gap}ms", by=by or None, aggs=AGGS)
    want = want.filter(pc.less(pc.cast(want.column("window_end"), pa.int64()), watermark * MS))
    keys = [*by, "window_start"]
    want = want.sort_by([(k, "ascending") for k in keys])
    if got is None:
        assert want.num_rows == 0
        return
    got = got.select(want.column_names).cast(want.schema).sort_by([(k, "ascending") for k in keys])
    assert got.equals(want)


def test_a_shard_without_rows_closes_on_its_timer_and_then_stops():
    """One shard's last session closes on its timer once the watermark passes its end plus one; then no
    timer is left (the hidden clock group's own session holds none)."""
    proc = _shard(10, 5, ["k"])
    out = list(
        proc.handleInputRows((0,), iter([_table([(100, 1, 1.0), (104, 1, 2.0)]).to_pandas()]), _Clock(0))
    )
    assert out == []
    assert proc.handle.timers == {115}  # [100, 114) closes when the watermark reaches 115
    out = list(proc.handleExpiredTimer((0,), _Clock(114), None))
    assert out == [] and proc.handle.timers == {115}
    out = list(proc.handleExpiredTimer((0,), _Clock(115), None))
    assert [r["count"] for r in pa.Table.from_pandas(out[0]).to_pylist()] == [2]
    assert proc.handle.timers == set()
