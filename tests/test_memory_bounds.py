"""Streaming operators hold what their open windows need, not what the stream has carried (README, "Limits and
guarantees"): long streams with many keys, checked through ``stats``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import windgate


def key_stream(pushes: int, rows: int, *, repeat_keys: bool):
    """Batches with increasing times (100 rows a time unit); keys never repeat (or cycle over 1000)."""
    for p in range(pushes):
        i = np.arange(p * rows, (p + 1) * rows, dtype=np.int64)
        keys = i if not repeat_keys else i % 1000
        yield pa.record_batch({"ts": i // 100, "k": keys, "v": np.ones(rows)})


@pytest.mark.parametrize("strategy", ["pane", "reference"])
def test_window_aggregator_forgets_keys_without_open_state(strategy):
    agg = windgate.WindowAggregator(
        time="ts", size=10, by="k", aggs={"v": ["sum", "var"]}, lateness=0, strategy=strategy
    )
    out = 0
    held = []
    for batch in key_stream(30, 10_000, repeat_keys=False):
        out += agg.push(batch).num_rows
        held.append(agg.stats["keys"])
    out += agg.flush().num_rows
    assert out == 300_000  # every key's single window, none lost
    # Bounded by the open state (a few panes' keys), never by the 300,000 keys seen.
    assert max(held) <= 2 * 10_000, held
    assert agg.stats["open_panes"] == 0


def test_window_aggregator_open_state_does_not_grow_with_the_stream():
    agg = windgate.WindowAggregator(time="ts", size=60, slide=10, by="k", aggs={"v": "sum"}, lateness=5)
    panes, slots = [], []
    for batch in key_stream(50, 20_000, repeat_keys=True):
        agg.push(batch)
        panes.append(agg.stats["open_panes"])
        slots.append(agg.stats["open_slots"])
    # 200 time units a push; windows of 60 with lateness 5: the open panes are those of the last ~70 units.
    assert max(panes[5:]) == max(panes[-5:]), panes
    assert max(slots) <= 20 * 1000, slots


@pytest.mark.parametrize("make", ["topk", "skyline"])
def test_preference_queries_retain_only_the_open_windows_rows(make):
    if make == "topk":
        q = windgate.TopKQuery(time="ts", size=50, slide=10, score="v", k=3, lateness=5)
    else:
        q = windgate.SkylineQuery(time="ts", size=50, slide=10, dims=["v", "w"], lateness=5)
    retained = []
    rng = np.random.default_rng(7)
    for p in range(40):
        i = np.arange(p * 5_000, (p + 1) * 5_000, dtype=np.int64)
        q.push(pa.record_batch({"ts": i // 100, "v": rng.random(i.size), "w": rng.random(i.size)}))
        retained.append(q.stats["retained_rows"])
    q.flush()
    # Each push covers 50 time units; the open windows span at most ~65: retained rows stay flat.
    assert max(retained[5:]) <= 2 * max(retained[:5]) + 10_000, retained
