"""The pane farm from Python: every strategy and scheduler returns the reference's rows in the same order, for
any thread count and batch split; stats report the farm's figures; bad farm options name the parameter."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples
from test_window_aggregate import AGGS, batches_of, table, window_case

import windgate

SCHEDULERS = ["as_pid", "as", "pb_rr", "tb_rr"]
#: The single-source research baselines of the registry: the approaches of Beicht's thesis on disjoint
#: parallel aggregation (RRCPA, the line baselines HSA and RRA, the ring baselines HOA and RRCA). Read from
#: the registry, so a baseline added there is tested here without another edit.
BASELINES = tuple(
    s["name"]
    for s in windgate._native.strategies("window_aggregate")
    if s["role"] == "baseline" and not s["sorted_sources"]
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    window_case(),
    st.sampled_from([1, 2, 3, 4, 8]),
    st.sampled_from(SCHEDULERS),
    st.sampled_from(["win_fb", "win_rr"]),
    st.sampled_from([None, 1, 3]),
)
def test_farm_equals_reference_for_any_threads_scheduler_and_split(case, threads, scheduler, win, split):
    size, slide, offset, rows, lateness, cuts = case
    t = table(rows)
    kw = dict(time="ts", size=size, slide=slide, offset=offset, by="k", aggs=AGGS, lateness=lateness)
    reference = windgate.window_aggregate(t, strategy="reference", **kw)
    farm = {
        "scheduler": scheduler,
        "window_scheduler": win,
        "split_threshold": split,
        "sample_interval": 0.001,
    }
    got = windgate.window_aggregate(t, strategy="farm", threads=threads, farm=farm, **kw)
    assert got.equals(reference)
    for baseline in BASELINES:
        got = windgate.window_aggregate(t, strategy=baseline, threads=threads, **kw)
        assert got.equals(reference), baseline

    # Streaming, push by push: every parallel strategy returns what the pane engine returns at each push.
    pane = windgate.WindowAggregator(strategy="pane", **kw)
    aggs = [windgate.WindowAggregator(strategy="farm", threads=threads, farm=farm, **kw)]
    aggs += [windgate.WindowAggregator(strategy=s, threads=threads, **kw) for s in BASELINES]
    for b in batches_of(t, cuts):
        want = pane.push(b)
        for agg in aggs:
            assert agg.push(b).equals(want), agg.stats["strategy"]
    want = pane.flush()
    for agg in aggs:
        assert agg.flush().equals(want), agg.stats["strategy"]


def test_streaming_push_returns_what_the_pane_engine_returns():
    # Push by push, not only in total: the farm waits for the windows a push closes.
    t = pa.table(
        {"ts": list(range(0, 3000)), "k": [i % 7 for i in range(3000)], "v": [i * 0.5 for i in range(3000)]}
    )
    kw = dict(time="ts", size=100, slide=20, by="k", aggs={"*": "count", "v": ["sum", "last"]}, lateness=5)
    pane = windgate.WindowAggregator(strategy="pane", **kw)
    farm = windgate.WindowAggregator(strategy="farm", threads=2, farm={"split_threshold": 10}, **kw)
    for b in t.to_batches(max_chunksize=250):
        assert farm.push(b).equals(pane.push(b))
    assert farm.flush().equals(pane.flush())
    s = farm.stats
    assert s["strategy"] == "farm" and s["threads"] == 2
    assert s["panes_split"] > 0 and s["split_factor"] > 1
    assert len(s["plq_busy_s"]) == 2 and len(s["wlq_busy_s"]) >= 1
    assert s["punctuations"] > 0 and s["late_rows"] == 0


@pytest.mark.parametrize("strategy", ["hoa", "rrca"])
def test_ring_baselines_stream_and_report_per_pu_busy_time(strategy):
    # The thesis' ring approaches: push by push like the pane engine, one busy time per PU in stats.
    t = pa.table(
        {"ts": list(range(0, 3000)), "k": [i % 7 for i in range(3000)], "v": [i * 0.5 for i in range(3000)]}
    )
    kw = dict(time="ts", size=100, slide=20, by="k", aggs={"*": "count", "v": ["sum", "last"]}, lateness=5)
    pane = windgate.WindowAggregator(strategy="pane", **kw)
    ring = windgate.WindowAggregator(strategy=strategy, threads=3, **kw)
    for b in t.to_batches(max_chunksize=250):
        assert ring.push(b).equals(pane.push(b))
    assert ring.flush().equals(pane.flush())
    s = ring.stats
    assert s["strategy"] == strategy and s["threads"] == 3
    assert len(s["plq_busy_s"]) == 3 and all(b > 0 for b in s["plq_busy_s"])


def test_auto_picks_the_measured_fastest_engine():
    # Streams start on the pane engine; the farm only pays off with large pushes (benches/peers and the
    # constants in aggregate/operator.rs), few panes per window and more than one thread.
    kw = dict(time="ts", size=10, aggs={"*": "count"})
    assert windgate.WindowAggregator(threads=2, **kw).stats["strategy"] == "pane"
    assert windgate.WindowAggregator(strategy="farm", threads=2, **kw).stats["strategy"] == "farm"
    assert windgate.WindowAggregator(strategy="rrcpa", threads=3, **kw).stats["threads"] == 3
    big = pa.table({"ts": pa.array(range(40_000), pa.int64())})
    small = big.slice(0, 1000)
    cases = [
        (dict(threads=2), big, "farm"),
        (dict(threads=1), big, "pane"),
        (dict(threads=2), small, "pane"),
        (dict(threads=2, slide=1), big, "farm"),  # 10 panes a window
        (dict(threads=2, size=100, slide=1), big, "farm"),  # 100 panes a window: blocks of windows
        (dict(threads=2, size=300, slide=1), big, "pane"),  # 300 panes a window: the farm ties at best
    ]
    for extra, data, want in cases:
        agg = windgate.WindowAggregator(**{**kw, **extra})
        got = agg.push(data)
        assert agg.stats["strategy"] == want, extra
        ref = windgate.WindowAggregator(strategy="reference", **{**kw, **extra})
        assert got.equals(ref.push(data))
        assert agg.flush().equals(ref.flush())


@pytest.mark.parametrize(
    ("farm", "match"),
    [
        ({"scheduler": "fifo"}, "scheduler"),
        ({"window_scheduler": "x"}, "window_scheduler"),
        ({"split_threshold": 0}, "split_threshold"),
        ({"setpoint": -1}, "setpoint"),
        ({"sample_interval": 0}, "sample_interval"),
        ({"speed": 1}, "farm"),
    ],
)
def test_bad_farm_options_name_the_parameter(farm, match):
    with pytest.raises(windgate.InvalidParameterError, match=match):
        windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, strategy="farm", farm=farm)


def test_unknown_strategy_lists_the_choices():
    with pytest.raises(windgate.InvalidParameterError, match="farm"):
        windgate.window_aggregate(
            pa.table({"ts": [1]}), time="ts", size=10, aggs={"*": "count"}, strategy="x"
        )


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    window_case(),
    st.sampled_from([1, 2, 3]),
    st.sampled_from(["pane", "farm", "shard", "rrcpa", "reference"]),
)
def test_in_memory_and_streamed_input_give_the_same_rows(case, threads, strategy):
    # A table is read whole and windows close as soon as they are exact; a reader is streamed and every
    # window waits for the end. The rows must not differ.
    size, slide, offset, rows, lateness, cuts = case
    batches = batches_of(table(rows), cuts)
    schema = table(rows).schema
    kw = dict(time="ts", size=size, slide=slide, offset=offset, by="k", aggs=AGGS, lateness=lateness)
    want = windgate.window_aggregate(
        pa.RecordBatchReader.from_batches(schema, batches), strategy="reference", **kw
    )
    got = windgate.window_aggregate(
        pa.Table.from_batches(batches, schema), strategy=strategy, threads=threads, **kw
    )
    assert got.equals(want)
