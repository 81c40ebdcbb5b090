"""Large tables sorted by time run on time ranges side by side (``strategy="auto"``, more than one thread,
from 131,072 rows; docs/architecture.md, "Time ranges"): the rows must be the single-threaded pane engine's,
in order and bit for bit, whatever the window, keys, values, nulls, batch cut and thread count; and what
cannot be cut (unsorted times, null times, long windows next to the span) gives the same rows as well."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate

#: Above the cut-off (windgate's SPLIT_MIN_ROWS, 131,072), so that `auto` cuts sorted input.
ROWS = (140_000, 260_000)

AGGS = {
    "*": "count",
    "v": ["sum", "mean", "std", "min", "max", "first", "last"],
    "iv": ["sum", "max", "first"],
}


@st.composite
def cases(draw) -> dict:
    n = draw(st.integers(*ROWS))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    # Times: sorted, with runs of equal times, gaps and a random origin (negative included).
    step = draw(st.sampled_from([1, 2, 7, 1000]))
    ts = np.sort(rng.integers(0, n * step, n)) - draw(st.integers(-(10**9), 10**9))
    keys = draw(st.sampled_from(["int", "str", "few", "null"]))
    if keys == "int":
        k = pa.array(rng.integers(0, 5000, n))
    elif keys == "str":
        k = pa.array([f"sensor-{i}" for i in rng.integers(0, 300, n)])
    elif keys == "few":
        k = pa.array(rng.integers(0, 3, n))
    else:
        k = pa.array(rng.integers(0, 50, n), mask=rng.random(n) < 0.1)
    v = rng.normal(0, 1e3, n)
    v[rng.random(n) < 0.01] = np.nan
    t = pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "k": k,
            "v": pa.array(v, mask=rng.random(n) < 0.05),
            "iv": pa.array(rng.integers(-(10**6), 10**6, n)),
        }
    )
    span = n * step
    size = draw(st.sampled_from([1, 10, 997, span // 50, span // 4]))
    size = max(1, size)
    slide = max(1, size // draw(st.sampled_from([1, 2, 6, 10])))
    return {
        "table": t,
        "size": size,
        "slide": slide,
        "offset": draw(st.integers(0, 50)),
        "lateness": draw(st.sampled_from([None, 0, 5])),
        "threads": draw(st.sampled_from([2, 3, 4])),
        "chunk": draw(st.sampled_from([None, 10_000, 65_537])),
    }


def _source(t: pa.Table, chunk: int | None) -> pa.Table:
    return t if chunk is None else pa.Table.from_batches(t.to_batches(max_chunksize=chunk), t.schema)


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_time_ranges_give_the_pane_engines_rows(case):
    kw = dict(
        time="ts",
        size=case["size"],
        slide=case["slide"],
        offset=case["offset"],
        by="k",
        aggs=AGGS,
        lateness=case["lateness"],
    )
    t = _source(case["table"], case["chunk"])
    want = windgate.window_aggregate(t, strategy="pane", threads=1, **kw)
    got = windgate.window_aggregate(t, threads=case["threads"], **kw)
    assert got.schema == want.schema
    assert bit_identical(got, want), _first_difference(got, want)


def bit_identical(got: pa.Table, want: pa.Table) -> bool:
    """Equal to the bit: `Table.equals` says NaN differs from NaN, so float columns compare their bits."""
    if got.num_rows != want.num_rows:
        return False
    for name in want.column_names:
        a, b = got[name].combine_chunks(), want[name].combine_chunks()
        if not a.is_null().equals(b.is_null()):
            return False
        if pa.types.is_floating(a.type):
            bits = [np.asarray(x.fill_null(0).to_numpy(zero_copy_only=False)).view(np.uint64) for x in (a, b)]
            if not np.array_equal(*bits):
                return False
        elif not a.equals(b):
            return False
    return True


def _first_difference(got: pa.Table, want: pa.Table) -> str:
    if got.num_rows != want.num_rows:
        return f"{got.num_rows} rows, expected {want.num_rows}"
    g, w = got.to_pylist(), want.to_pylist()
    i = next((i for i in range(len(g)) if repr(g[i]) != repr(w[i])), None)
    return "same rows as printed" if i is None else f"row {i}: {g[i]}\nexpected {w[i]}"


def _table(n: int, rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(np.arange(n), pa.int64()),
            "k": pa.array(rng.integers(0, 100, n)),
            "v": pa.array(rng.random(n)),
        }
    )


def test_input_that_cannot_be_cut_gives_the_same_rows():
    rng = np.random.default_rng(7)
    base = _table(200_000, rng)
    kw = dict(time="ts", size=100, slide=10, by="k", aggs={"v": ["sum", "first"]})
    swapped = base.take(pa.array(np.r_[np.arange(1000, 200_000), np.arange(1000)]))
    nulls = base.set_column(0, "ts", pa.array(np.arange(200_000), mask=np.arange(200_000) % 9999 == 0))
    for t, extra in [(swapped, {}), (nulls, {"null_time": "drop"}), (base, {"size": 150_000, "slide": 1000})]:
        args = {**kw, **extra}
        want = windgate.window_aggregate(t, strategy="reference", **args)
        got = windgate.window_aggregate(t, threads=2, **args)
        assert bit_identical(got, want), _first_difference(got, want)


def test_late_rows_output_keeps_its_shape():
    """`on_late="keep"` on sorted input: no row is late, and the pair comes back as from one engine."""
    t = _table(200_000, np.random.default_rng(3))
    kw = dict(time="ts", size=100, by="k", aggs={"v": "sum"}, lateness=5, on_late="keep")
    w1, late1 = windgate.window_aggregate(t, strategy="pane", threads=1, **kw)
    w2, late2 = windgate.window_aggregate(t, threads=2, **kw)
    assert bit_identical(w2, w1)
    assert late2.num_rows == late1.num_rows == 0
    assert late2.schema == late1.schema


def test_a_window_part_that_overflows_at_a_cut_does_not_fail_the_call():
    """The windows at a cut are built in part by each range; an integer sum can overflow in a part while the
    whole window fits (-1 + (2^63 - 1) + 1). The call gives the pane engine's rows, not the part's error."""
    n, cut = 200_000, 99_999  # where two ranges meet for this input
    v = np.zeros(n, np.int64)
    v[cut - 1 : cut + 3] = [-1, 2**63 - 1, 1, -1]
    table = pa.table({"ts": pa.array(np.arange(n), pa.int64()), "v": pa.array(v)})
    kw = dict(time="ts", size=3, slide=1, aggs={"v": "sum"})
    want = windgate.window_aggregate(table, strategy="pane", threads=1, **kw)
    for threads in (2, 3):
        assert windgate.window_aggregate(table, threads=threads, **kw).equals(want)


@settings(
    max_examples=examples(6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    case=cases(),
    shuffle=st.sampled_from(["all", "halves", "blocks", "late"]),
    threads=st.sampled_from([1, 2, 3]),
)
def test_scattered_tables_give_the_pane_engines_rows(case, shuffle, threads):
    """A table in scattered time order (docs/architecture.md, "Scattered input grouped by pane"): grouped by
    pane first, or in bounded disorder (`late`: each row moved back by up to 500 places) cut into time ranges
    by scans, it still gives the single-threaded pane engine's rows on the same table, bit for bit, with runs
    of equal times (first/last ties) and any thread count; without a lateness bound, since with one the
    arrival order decides which rows are late."""
    t = case["table"]
    rng = np.random.default_rng(t.num_rows)
    n = t.num_rows
    if shuffle == "all":
        order = rng.permutation(n)
    elif shuffle == "halves":  # the two halves, each sorted, interleaved row by row
        half = (n + 1) // 2
        order = np.empty(n, np.int64)
        order[0::2], order[1::2] = np.arange(half), np.arange(half, n)
    elif shuffle == "late":  # row i arrives at place i + d, d up to 500: a stream's bounded disorder
        order = np.argsort(np.arange(n) + rng.integers(0, 501, n), kind="stable")
    else:  # blocks of 5,000 rows in random order
        blocks = np.arange(n) // 5000
        order = np.argsort(rng.permutation(blocks.max() + 1)[blocks] * n + np.arange(n), kind="stable")
    scattered = _source(t.take(pa.array(order)), case["chunk"])
    kw = dict(time="ts", size=case["size"], slide=case["slide"], offset=case["offset"], by="k", aggs=AGGS)
    want = windgate.window_aggregate(scattered, strategy="pane", threads=1, **kw)
    got = windgate.window_aggregate(scattered, threads=threads, **kw)
    assert got.schema == want.schema
    assert bit_identical(got, want), _first_difference(got, want)


#: The aggregates of `_table`'s columns.
TABLE_AGGS = {"*": "count", "v": ["sum", "max", "first"]}


def _ranges_call(t: pa.Table) -> pa.Table:
    return windgate.window_aggregate(t, time="ts", by="k", size=60, slide=10, aggs=TABLE_AGGS, threads=2)


def _in_forked_child(t: pa.Table, want: pa.Table) -> int:
    return int(bit_identical(_ranges_call(t), want))


def test_time_ranges_run_in_a_forked_child_and_in_threads_at_once():
    """The ranges' worker threads are kept between calls (docs/architecture.md, "Time ranges"). A child forked
    after the parent used them has none of them: its call must not wait for them (it would hang). Calls from
    several threads at once each get threads of their own and the single engine's rows."""
    import concurrent.futures
    import multiprocessing

    t = _table(200_000, np.random.default_rng(7))
    want = windgate.window_aggregate(
        t, time="ts", by="k", size=60, slide=10, aggs=TABLE_AGGS, strategy="pane"
    )
    assert bit_identical(_ranges_call(t), want)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        assert all(bit_identical(got, want) for got in pool.map(_ranges_call, [t] * 6))
    with multiprocessing.get_context("fork").Pool(1) as child:
        assert child.apply_async(_in_forked_child, (t, want)).get(timeout=60) == 1
