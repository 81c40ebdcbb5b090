"""window_aggregate and WindowAggregator against a brute force, across inputs, splits and disorder."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import aggregate as brute_aggregate

FUNCS = ["count*", "count", "sum", "min", "max", "mean", "first", "last", "var", "std"]
AGGS = {"*": "count", "v": ["count", "sum", "min", "max", "mean", "first", "last", "var", "std"]}


def table(rows, v_type=None):
    return pa.table(
        {
            "ts": pa.array([r["ts"] for r in rows], pa.int64()),
            "k": pa.array([r["k"] for r in rows], pa.int32()),
            "v": pa.array([r["v"] for r in rows], v_type or pa.float64()),
        }
    )


def assert_matches_brute(got: pa.Table, want: list[dict], approx=("var_v", "std_v")):
    got_rows = got.to_pylist()
    assert len(got_rows) == len(want)
    for g, w in zip(got_rows, want, strict=True):
        for name, wv in w.items():
            gv = g[name]
            if name in approx and wv is not None:
                assert gv == pytest.approx(wv, rel=1e-9, abs=1e-12), name
            else:
                assert gv == wv, (name, g, w)


row = st.fixed_dictionaries(
    {
        "ts": st.integers(-200, 200),
        "k": st.one_of(st.none(), st.integers(0, 4)),
        "v": st.one_of(
            st.none(),
            st.integers(-1000, 1000).map(lambda i: i / 4),
            st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
        ),
    }
)


@st.composite
def window_case(draw):
    size = draw(st.integers(1, 40))
    slide = draw(st.integers(1, size))
    offset = draw(st.integers(-50, 50))
    rows = draw(st.lists(row, max_size=80))
    lateness = draw(st.one_of(st.none(), st.integers(0, 15)))
    if lateness is not None:
        # Arrival = event order perturbed by a delay <= lateness: nothing is late.
        delays = draw(st.lists(st.integers(0, lateness), min_size=len(rows), max_size=len(rows)))
        rows = sorted(rows, key=lambda r: r["ts"])
        order = sorted(range(len(rows)), key=lambda i: (rows[i]["ts"] + delays[i], i))
        rows = [rows[i] for i in order]
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=5)))
    return size, slide, offset, rows, lateness, cuts


def batches_of(t: pa.Table, cuts: list[int]) -> list[pa.RecordBatch]:
    bounds = [0, *cuts, t.num_rows]
    return [
        t.slice(a, b - a).combine_chunks().to_batches()[0]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        if b > a
    ]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window_case())
def test_batch_and_streaming_match_brute_force(case):
    size, slide, offset, rows, lateness, cuts = case
    want = brute_aggregate(rows, size=size, slide=slide, offset=offset, by="k", funcs=FUNCS)
    t = table(rows)
    kw = dict(time="ts", size=size, slide=slide, offset=offset, by="k", aggs=AGGS)
    got = windgate.window_aggregate(t, lateness=lateness, **kw)
    assert_matches_brute(got, want)
    reference = windgate.window_aggregate(t, lateness=lateness, strategy="reference", **kw)
    assert reference.equals(got)

    # Streaming, over any batch split: the same rows in the same order.
    agg = windgate.WindowAggregator(lateness=lateness, **kw)
    outs = [agg.push(b) for b in batches_of(t, cuts)]
    outs.append(agg.flush())
    outs = [o for o in outs if o.num_columns]
    if outs:
        streamed = pa.Table.from_batches(outs, schema=got.schema)
        assert streamed.equals(got)
    assert agg.stats["late_rows"] == 0
    assert agg.stats["rows_in"] == len(rows)


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False), min_size=1, max_size=50),
    st.randoms(use_true_random=False),
)
def test_float_sums_are_exact_and_order_independent(values, rnd):
    t = pa.table({"ts": [0] * len(values), "v": values})
    got = windgate.window_aggregate(t, time="ts", size=10, aggs={"v": ["sum", "mean"]})
    shuffled = list(values)
    rnd.shuffle(shuffled)
    got2 = windgate.window_aggregate(
        pa.table({"ts": [0] * len(values), "v": shuffled}), time="ts", size=10, aggs={"v": ["sum", "mean"]}
    )
    assert got.equals(got2)
    assert got.column("sum_v")[0].as_py() == math.fsum(values)


def test_docstring_example_and_output_order():
    t = pa.table({"ts": [5, 1, 12, 25, 3], "k": ["b", "a", None, "a", None], "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
    out = windgate.window_aggregate(t, time="ts", size=10, by="k", aggs={"*": "count", "v": ["sum", "first"]})
    assert out.column_names == ["k", "window_start", "window_end", "count", "sum_v", "first_v"]
    assert out.to_pylist() == [
        {"k": None, "window_start": 0, "window_end": 10, "count": 1, "sum_v": 5.0, "first_v": 5.0},
        {"k": "a", "window_start": 0, "window_end": 10, "count": 1, "sum_v": 2.0, "first_v": 2.0},
        {"k": "b", "window_start": 0, "window_end": 10, "count": 1, "sum_v": 1.0, "first_v": 1.0},
        {"k": None, "window_start": 10, "window_end": 20, "count": 1, "sum_v": 3.0, "first_v": 3.0},
        {"k": "a", "window_start": 20, "window_end": 30, "count": 1, "sum_v": 4.0, "first_v": 4.0},
    ]


def test_timestamps_durations_and_types():
    ts = pa.array([0, 1_500_000, 61_000_000, 119_999_999], pa.timestamp("us", tz="UTC"))
    t = pa.table(
        {
            "ts": ts,
            "k": pa.array([1, 1, 2, 1], pa.int8()),
            "v": pa.array([1, 2, 3, 4], pa.int32()),
            "f": pa.array([0.5, 1.5, None, 2.5], pa.float32()),
        }
    )
    out = windgate.window_aggregate(
        t,
        time="ts",
        size="1 minute",
        slide="30s",
        by="k",
        aggs={
            "v": ["sum", "min", "max", "mean"],
            "f": ["max", "last"],
            "ts": ["min", "max", "first", "last"],
        },
    )
    assert out.schema.field("window_start").type == pa.timestamp("us", tz="UTC")
    assert out.schema.field("k").type == pa.int8()
    assert out.schema.field("sum_v").type == pa.int64()
    assert out.schema.field("min_v").type == pa.int32()
    assert out.schema.field("mean_v").type == pa.float64()
    assert out.schema.field("max_f").type == pa.float32()
    assert out.schema.field("min_ts").type == pa.timestamp("us", tz="UTC")
    first = out.to_pylist()[0]
    assert first["window_start"].timestamp() == -30 and first["sum_v"] == 3 and first["max_f"] == 1.5


def test_inputs_polars_pandas_reader_batch_and_sources():
    t = pa.table({"ts": [1, 2, 11, 15], "v": [1.0, 2.0, 3.0, 4.0]})
    kw = dict(time="ts", size=10, aggs={"*": "count", "v": "sum"})
    want = windgate.window_aggregate(t, **kw)
    pl = pytest.importorskip("polars")
    assert windgate.window_aggregate(pl.from_arrow(t), **kw).equals(want)
    assert windgate.window_aggregate(t.to_pandas(), **kw).equals(want)
    assert windgate.window_aggregate(
        pa.RecordBatchReader.from_batches(t.schema, t.to_batches()), **kw
    ).equals(want)
    assert windgate.window_aggregate(t.to_batches()[0], **kw).equals(want)
    # Two sources: the union.
    assert windgate.window_aggregate([t.slice(0, 2), t.slice(2)], **kw).equals(want)
    duckdb = pytest.importorskip("duckdb")
    rel = duckdb.sql("select * from t")
    assert windgate.window_aggregate(rel.arrow(), **kw).equals(want)


def test_empty_input_keeps_the_schema():
    t = pa.table({"ts": pa.array([], pa.int64()), "v": pa.array([], pa.float64())})
    out = windgate.window_aggregate(t, time="ts", size=10, aggs={"v": "sum"})
    assert out.num_rows == 0 and out.column_names == ["window_start", "window_end", "sum_v"]


def test_late_rows_dropped_counted_or_raised():
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=2)
    agg.push(pa.table({"ts": [10, 20, 17, 18, 30]}))
    assert agg.stats["late_rows"] == 1
    strict = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=2, on_late="error")
    with pytest.raises(windgate.LateRowError, match=r"ts = 17, below the watermark 18"):
        strict.push(pa.table({"ts": [10, 20, 17]}))
    # The rejected batch changed nothing: the operator goes on.
    strict.push(pa.table({"ts": [21]}))
    assert strict.stats["rows_in"] == 1


def test_adaptive_kslack_worked_trace():
    # The adaptive K-slack's worked trace (docs/architecture.md#late-rows): arrivals 10, 12, 11, 15, 9, 14,
    # 20 -> 11 and 9 dropped, K grows to 11.
    agg = windgate.WindowAggregator(time="ts", size=100, aggs={"*": "count"}, lateness="adaptive")
    agg.push(pa.table({"ts": [10, 12, 11, 15, 9, 14, 20]}))
    assert agg.stats["late_rows"] == 2
    assert agg.stats["slack"] == 11
    assert agg.flush().column("count").to_pylist() == [5]


def test_streaming_memory_is_bounded_by_open_panes():
    agg = windgate.WindowAggregator(time="ts", size=60, slide=10, by="k", aggs={"v": "sum"}, lateness=5)
    for i in range(200):
        ts = list(range(i * 100, (i + 1) * 100))
        agg.push(pa.table({"ts": ts, "k": [j % 7 for j in ts], "v": [1.0] * 100}))
        assert agg.stats["open_panes"] <= 8
    assert agg.stats["windows_out"] > 1900


def test_several_sources_merge_by_readiness():
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, sources=2)
    assert agg.push(pa.table({"ts": [1, 5, 25]}), source=0).num_rows == 0  # source 1 holds windows back
    out = agg.push(pa.table({"ts": [2, 30]}), source=1)
    assert out.to_pydict() == {"window_start": [0], "window_end": [10], "count": [3]}
    assert agg.close_source(1).num_rows == 0  # source 0 is at 25: [20, 30) is still open
    with pytest.raises(windgate.LateRowError, match="source 0 is not sorted by time"):
        agg.push(pa.table({"ts": [3]}), source=0)
    assert agg.close_source(0).to_pydict()["window_start"] == [20, 30]


@pytest.mark.parametrize("strategy", ["pane", "tumlsc", "wiml"])
def test_credits_refuse_a_source_far_ahead_without_consuming_the_batch(strategy):
    agg = windgate.WindowAggregator(
        time="ts", size=10, aggs={"*": "count"}, sources=2, credits=5, strategy=strategy
    )
    agg.push(pa.table({"ts": [1, 2, 3, 4]}), source=0)
    with pytest.raises(windgate.errors.BackpressureError, match=r"source\(s\) 1 hold the watermark back"):
        agg.push(pa.table({"ts": [11, 12]}), source=0)
    assert agg.stats["pending_rows"] == 4 and agg.stats["backpressured"] == 1
    # The slow source catches up, the same batch goes through, nothing is lost.
    out = [agg.push(pa.table({"ts": [15]}), source=1), agg.push(pa.table({"ts": [11, 12]}), source=0)]
    out += [agg.close_source(1), agg.flush()]
    counts = pa.Table.from_batches([b for b in out if b.num_rows]).column("count").to_pylist()
    assert sum(counts) == 7
    with pytest.raises(windgate.InvalidParameterError, match="credits"):
        windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, sources=2, credits=0)


@pytest.mark.parametrize("strategy", ["pane", "mq", "tumlsc", "wiml"])
def test_order_by_makes_first_last_independent_of_the_source_split(strategy):
    n = 600
    t = pa.table(
        {
            "ts": [i // 10 for i in range(n)],
            "id": [(i // 10) * 100 + 9 - i % 10 for i in range(n)],  # backwards within equal times
            "k": [i % 7 for i in range(n)],
            "v": [float(i) for i in range(n)],
        }
    )
    kw = dict(
        time="ts", size=10, slide=5, by="k", aggs={"v": ["first", "last"]}, strategy=strategy, order_by="id"
    )
    want = windgate.window_aggregate(t, **{**kw, "strategy": "reference"})
    for parts in (2, 5):
        sources = [t.filter(pa.array([i % parts == s for i in range(n)])) for s in range(parts)]
        assert windgate.window_aggregate(sources, **kw).equals(want)
    assert want.column("first_v")[0].as_py() == 7.0  # row 7 (id 2) before row 0 (id 9) at time 0
    with pytest.raises(windgate.ColumnTypeError, match="order_by"):
        windgate.window_aggregate(t, **{**kw, "order_by": "v"})


@pytest.mark.parametrize("strategy", ["pane", "mq", "mqlf", "tumlsc", "tumlmc", "wiml"])
def test_multiway_designs_stream_like_the_pane_engine(strategy):
    agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, sources=2, strategy=strategy)
    assert agg.push(pa.table({"ts": [1, 5, 25]}), source=0).num_rows == 0  # source 1 holds windows back
    out = agg.push(pa.table({"ts": [2, 30]}), source=1)
    assert out.to_pydict() == {"window_start": [0], "window_end": [10], "count": [3]}
    assert agg.close_source(1).num_rows == 0  # source 0 is at 25: [20, 30) is still open
    assert agg.close_source(0).to_pydict()["window_start"] == [20, 30]
    assert agg.stats["strategy"] == strategy


@pytest.mark.parametrize("strategy", ["mq", "mqlf", "tumlsc", "tumlmc", "wiml"])
def test_multiway_designs_equal_the_reference_on_many_sources(strategy):
    rng = np.random.default_rng(7)
    sources = []
    for s in range(6):
        ts = np.cumsum(rng.integers(0, 3, 400))  # ties inside and across sources
        sources.append(
            pa.table(
                {
                    "ts": ts,
                    "k": rng.integers(0, 5, ts.size).astype(np.int32),
                    "v": rng.normal(size=ts.size),
                    "src": np.full(ts.size, s),
                }
            )
        )
    kw = dict(
        time="ts",
        size=30,
        slide=10,
        by="k",
        aggs={"*": "count", "v": ["sum", "first", "last"], "src": "last"},
    )
    want = windgate.window_aggregate(sources, strategy="reference", **kw)
    assert windgate.window_aggregate(sources, strategy=strategy, **kw).equals(want)


def test_first_last_tie_break_by_source_then_arrival():
    a = pa.table({"ts": [5, 5], "v": [1, 2]})
    b = pa.table({"ts": [5, 4], "v": [3, 4]})
    out = windgate.window_aggregate([a, b], time="ts", size=10, aggs={"v": ["first", "last"]})
    # Order: (4, src1), (5, src0, 0), (5, src0, 1), (5, src1, 0).
    assert out.to_pydict()["first_v"] == [4] and out.to_pydict()["last_v"] == [3]


def test_gil_is_released_during_work():
    n = 3_000_000
    t = pa.table(
        {
            "ts": pa.array(range(n), pa.int64()),
            "k": pa.array([i % 1000 for i in range(n)], pa.int32()),
            "v": pa.array([1.0] * n),
        }
    )
    ticks = 0
    done = threading.Event()

    def spin():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    th = threading.Thread(target=spin)
    th.start()
    start = time.perf_counter()
    windgate.window_aggregate(t, time="ts", size=600, slide=100, by="k", aggs={"v": "sum"})
    elapsed = time.perf_counter() - start
    done.set()
    th.join()
    # With the GIL held for the whole call, the thread could not tick at all while it ran.
    assert elapsed < 0.05 or ticks > 3


def test_ctrl_c_interrupts_a_long_call():
    import _thread

    t = pa.table({"ts": pa.array(range(4_000_000), pa.int64())})
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=1000))
    timer = threading.Timer(0.05, _thread.interrupt_main)  # what Ctrl-C does
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            windgate.window_aggregate(reader, time="ts", size=10, aggs={"*": "count"})
    finally:
        timer.cancel()


def test_a_failing_input_stream_is_an_input_error():
    schema = pa.schema([("ts", pa.int64())])

    def batches():
        yield pa.record_batch([pa.array([1, 2], pa.int64())], schema=schema)
        raise OSError("disk on fire")

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    with pytest.raises(windgate.InputError, match="disk on fire"):
        windgate.window_aggregate(reader, time="ts", size=10, aggs={"*": "count"})
