"""skyline, top_dominant and topk (the preference queries of Mencagli et al. 2017) and their streaming classes
against a brute force over all pairs, across strategies, threads, farm schedulers and pane splitting, batch
splits and disorder; a DuckDB anti-join; errors; windgate.spark on local[2]."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import windows_of

QUERIES = ["skyline", "top_dominant", "topk"]
STRATEGIES = ["reference", "pane", "recompute", "farm"]
THREADS = [1, 2, 3, 4, 8]
# The farm's knobs change who computes what, never the answer. split_threshold 1..3 forces pane splitting.
FARMS = [
    None,
    {"scheduler": "as_pid", "window_scheduler": "win_fb", "split_threshold": 1, "sample_interval": 0.001},
    {"scheduler": "pb_rr", "window_scheduler": "win_rr", "split_threshold": 1},
    {"scheduler": "tb_rr", "window_scheduler": "win_fb", "split_threshold": 2},
    {"scheduler": "as_pid", "window_scheduler": "win_rr", "split_threshold": 3, "sample_interval": 0.001},
    {"scheduler": "pb_rr", "window_scheduler": "win_fb"},
    {"scheduler": "tb_rr", "window_scheduler": "win_rr"},
    {"scheduler": "as_pid", "window_scheduler": "win_fb", "setpoint": 0.5, "sample_interval": 0.001},
]
DIMS = ["x0", "x1", "x2", "x3"]
SCHEMA = pa.schema(
    [
        ("ts", pa.int64()),
        ("g", pa.int32()),
        ("s", pa.string()),
        ("x0", pa.float64()),
        ("x1", pa.float64()),
        ("x2", pa.int32()),  # integer dimensions are fine too
        ("x3", pa.float64()),
        ("score", pa.float64()),
        ("id", pa.int64()),
    ]
)


# ----------------------------------------------------------------------------------------------------------
# The oracle: every window and group by enumeration, every query by its definition over all pairs


def _null_first(v) -> tuple:
    return (0,) if v is None else (1, v)


def _oriented(rows: list[dict], members: list[int], dims: list[str], prefer: list[str]) -> np.ndarray:
    """The members' points with every dimension turned into "smaller is better"."""
    signs = np.array([1.0 if p == "min" else -1.0 for p in prefer], dtype=float)
    x = np.array([[float(rows[i][d]) for d in dims] for i in members], dtype=float)
    return x.reshape(len(members), len(dims)) * signs


def brute(
    rows: list[dict],
    query: str,
    *,
    size: int,
    slide: int | None = None,
    offset: int = 0,
    by: list[str] | str | None = None,
    dims: list[str] | str = (),
    prefer: list[str] | str = "min",
    delta: int | None = None,
    score: str | None = None,
    k: int | None = None,
    descending: bool = True,
    time: str = "ts",
) -> list[dict]:
    """``rows`` in arrival order (dicts of every column, integer times). Returns the output rows in order."""
    slide = slide or size
    by = [by] if isinstance(by, str) else list(by or [])
    dims = [dims] if isinstance(dims, str) else list(dims)
    prefer = [prefer] if isinstance(prefer, str) else list(prefer)
    if len(prefer) == 1:
        prefer = prefer * len(dims)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for seq, r in enumerate(rows):
        for start in windows_of(r[time], size, slide, offset):
            groups[(start, tuple(r[b] for b in by))].append(seq)
    out = []
    for start, key in sorted(groups, key=lambda g: (g[0], tuple(_null_first(v) for v in g[1]))):
        # The total order: (time, arrival).
        members = sorted(groups[(start, key)], key=lambda i: (rows[i][time], i))
        kappa: list[int] | None = None
        if query == "topk":
            sign = -1.0 if descending else 1.0
            picked = sorted(range(len(members)), key=lambda p: (sign * float(rows[members[p]][score]), p))
            picked = picked[:k]
        else:
            x = _oriented(rows, members, dims, prefer)
            at_least = (x[:, None, :] <= x[None, :, :]).sum(axis=2)  # [j, i]: dims where j is as good as i
            strictly = (x[:, None, :] < x[None, :, :]).any(axis=2)  # [j, i]: j strictly better somewhere
            dominated = ((at_least == len(dims)) & strictly).any(axis=0)
            kappa = np.where(strictly, at_least, 0).max(axis=0).tolist()
            picked = [p for p in range(len(members)) if not dominated[p]]  # the skyline
            if query == "top_dominant":
                picked = sorted(sorted(picked, key=lambda p: (kappa[p], p))[:delta])
        for p in picked:
            rec = {"window_start": start, "window_end": start + size, **rows[members[p]]}
            if query == "top_dominant":
                rec["kappa"] = kappa[p]
            out.append(rec)
    return out


def run(query: str, data, **kw) -> pa.Table:
    return getattr(windgate, query)(data, **kw)


def open_query(query: str, **kw):
    cls = {
        "skyline": windgate.SkylineQuery,
        "top_dominant": windgate.TopDominantQuery,
        "topk": windgate.TopKQuery,
    }
    return cls[query](**kw)


def query_kw(query: str, *, dims, prefer="min", delta=3, score="score", k=3, descending=True) -> dict:
    """The query-specific keyword arguments."""
    if query == "topk":
        return {"score": score, "k": k, "descending": descending}
    kw = {"dims": dims, "prefer": prefer}
    if query == "top_dominant":
        kw["delta"] = delta
    return kw


def output_columns(query: str, schema: pa.Schema) -> list[str]:
    return ["window_start", "window_end", *schema.names, *(["kappa"] if query == "top_dominant" else [])]


def rows_of(t: pa.Table | pa.RecordBatch) -> list[dict]:
    return t.to_pylist()


def same(a: pa.Table | pa.RecordBatch, b: pa.Table | pa.RecordBatch) -> bool:
    """Same schema, same rows in the same order."""
    return a.schema == b.schema and rows_of(a) == rows_of(b)


def concat(outs: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    nonempty = [o for o in outs if o.num_rows]
    return pa.Table.from_batches(nonempty, schema=schema) if nonempty else schema.empty_table()


def batches_of(t: pa.Table, cuts: list[int]) -> list[pa.RecordBatch]:
    bounds = [0, *sorted(cuts), t.num_rows]
    return [
        t.slice(a, b - a).combine_chunks().to_batches()[0]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        if b > a
    ]


def table(rows: list[dict], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.table({f.name: pa.array([r[f.name] for r in rows], f.type) for f in schema}, schema=schema)


def random_rows(rng: np.random.Generator, n: int, *, t_lo=-20, t_hi=100, sorted_times=False) -> list[dict]:
    """Small integer-valued points (ties everywhere), exact duplicates, -0.0 next to 0.0, a null group."""
    ts = rng.integers(t_lo, t_hi, n)
    if sorted_times:
        ts = np.sort(ts)
    x = rng.integers(0, 5, (n, 4)).astype(float)
    dup = rng.random(n) < 0.2
    x[dup] = x[rng.integers(0, n, n)][dup]  # copies of other rows' points
    x[(x == 0) & (rng.random((n, 4)) < 0.5)] = -0.0
    score = rng.integers(0, 7, n).astype(float)
    score[(score == 0) & (rng.random(n) < 0.5)] = -0.0
    g = rng.integers(0, 3, n)
    g_null = rng.random(n) < 0.15
    return [
        {
            "ts": int(ts[i]),
            "g": None if g_null[i] else int(g[i]),
            "s": "ab"[int(rng.integers(0, 2))],
            "x0": float(x[i, 0]),
            "x1": float(x[i, 1]),
            "x2": int(x[i, 2]),
            "x3": float(x[i, 3]),
            "score": float(score[i]),
            "id": i,
        }
        for i in range(n)
    ]


# ----------------------------------------------------------------------------------------------------------
# Every strategy, thread count and farm configuration equals the brute force, rows and order

CASES = [
    # (size, slide, offset, by, dims, prefer)
    (10, 10, 0, "g", ["x0"], "min"),
    (12, 4, 3, "g", ["x0", "x1"], ["min", "max"]),
    (9, 3, -2, None, ["x0", "x1", "x2"], "max"),
    (20, 5, 0, ["g", "s"], DIMS, ["max", "min", "min", "max"]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("query", QUERIES)
def test_every_strategy_thread_count_and_farm_equals_brute_force(query, case):
    size, slide, offset, by, dims, prefer = CASES[case]
    rows = random_rows(np.random.default_rng(100 + case), 160)
    t = table(rows)
    qkw = query_kw(query, dims=dims, prefer=prefer, delta=2 + case, k=1 + case, descending=case % 2 == 0)
    kw = dict(time="ts", size=size, slide=slide, offset=offset, by=by, **qkw)
    want = brute(rows, query, **kw)
    assert len(want) > 20
    reference = run(query, t, strategy="reference", **kw)
    assert reference.column_names == output_columns(query, SCHEMA)
    assert rows_of(reference) == want
    if query == "top_dominant":
        assert reference.schema.field("kappa").type == pa.int32()
    for strategy in STRATEGIES:
        for threads in THREADS:
            got = run(query, t, strategy=strategy, threads=threads, **kw)
            assert same(got, reference), (strategy, threads)
    for farm in FARMS[1:]:
        for threads in THREADS:
            got = run(query, t, strategy="farm", threads=threads, farm=farm, **kw)
            assert same(got, reference), (farm, threads)
    for threads in (1, 3):
        assert same(run(query, t, strategy="auto", threads=threads, **kw), reference)


@pytest.mark.parametrize("query", QUERIES)
def test_larger_input_farm_splits_panes_and_agrees(query):
    rng = np.random.default_rng(7)
    rows = random_rows(rng, 3000, t_lo=0, t_hi=600, sorted_times=True)
    t = table(rows)
    kw = dict(time="ts", size=60, slide=20, by="g", **query_kw(query, dims=["x0", "x1", "x3"], delta=5, k=4))
    reference = run(query, t, strategy="reference", **kw)
    assert rows_of(reference) == brute(rows, query, **kw)
    for strategy, threads, farm in [
        ("pane", 1, None),
        ("recompute", 2, None),
        ("farm", 2, {"split_threshold": 4, "scheduler": "as_pid", "sample_interval": 0.001}),
        ("farm", 3, {"scheduler": "tb_rr", "window_scheduler": "win_rr"}),
        ("farm", 8, {"scheduler": "pb_rr", "split_threshold": 16}),
    ]:
        q = open_query(query, strategy=strategy, threads=threads, farm=farm, lateness=0, **kw)
        outs = [q.push(b) for b in t.to_batches(max_chunksize=250)]
        outs.append(q.flush())
        assert same(concat(outs, reference.schema), reference), (strategy, threads, farm)
        s = q.stats
        assert s["strategy"] == strategy
        assert s["rows_in"] == len(rows) and s["late_rows"] == 0 and s["rows_out"] == reference.num_rows
        assert sum(o.num_rows for o in outs[:-1]) > 0  # windows closed before the flush
        if strategy == "farm":
            assert s["threads"] == threads
            assert len(s["plq_busy_s"]) >= 1 and len(s["wlq_busy_s"]) >= 1
            assert s["punctuations"] > 0 and s["panes_closed"] > 0 and s["window_tasks"] > 0
            if farm.get("split_threshold") == 4:
                assert s["panes_split"] > 0 and s["split_factor"] > 1


# ----------------------------------------------------------------------------------------------------------
# Streaming: splits, disorder within the lateness bound, late rows


def _disordered(rows: list[dict], rng: np.random.Generator, bound: int) -> list[dict]:
    """Arrival = time order perturbed by a delay <= bound: no row is more than ``bound`` behind the max."""
    rows = sorted(rows, key=lambda r: r["ts"])
    delays = rng.integers(0, bound + 1, len(rows))
    return [rows[i] for i in sorted(range(len(rows)), key=lambda i: (rows[i]["ts"] + delays[i], i))]


@pytest.mark.parametrize("query", QUERIES)
def test_streaming_splits_and_bounded_disorder_equal_the_batch_call(query):
    rng = np.random.default_rng(11)
    kw = dict(
        time="ts", size=15, slide=5, by="g", **query_kw(query, dims=["x0", "x2"], prefer=["max", "min"])
    )
    for lateness in (None, 0, 4):
        rows = random_rows(rng, 300)
        if lateness is not None:
            rows = _disordered(rows, rng, lateness)
        t = table(rows)
        batch = run(query, t, lateness=lateness, **kw)
        assert rows_of(batch) == brute(rows, query, **kw)  # nothing is late: the exact answer
        for trial in range(3):
            cuts = rng.integers(0, len(rows), int(rng.integers(0, 8))).tolist()
            pieces = batches_of(t, cuts)
            # Push by push, every strategy returns what the pane engine returns.
            engines = {
                ("pane", 1): open_query(query, strategy="pane", lateness=lateness, **kw),
                ("recompute", 1): open_query(query, strategy="recompute", lateness=lateness, **kw),
                ("reference", 1): open_query(query, strategy="reference", lateness=lateness, **kw),
            }
            for threads in (2, 3, 8):
                farm = FARMS[(trial + threads) % len(FARMS)]
                engines[("farm", threads)] = open_query(
                    query, strategy="farm", threads=threads, farm=farm, lateness=lateness, **kw
                )
            outs: dict = {e: [] for e in engines}
            for piece in pieces:
                want = engines[("pane", 1)].push(piece)
                outs[("pane", 1)].append(want)
                for e, q in engines.items():
                    if e != ("pane", 1):
                        got = q.push(piece)
                        assert same(got, want) or (got.num_rows == want.num_rows == 0), e
                        outs[e].append(got)
                if lateness is None:
                    assert want.num_rows == 0  # nothing is final before the flush
            for e, q in engines.items():
                outs[e].append(q.flush())
                assert same(concat(outs[e], batch.schema), batch), (lateness, e, cuts)
                s = q.stats
                assert s["rows_in"] == len(rows) and s["late_rows"] == 0, e
                assert s["rows_out"] == batch.num_rows
                assert s["batches_in"] == len(pieces)
                assert q.schema == batch.schema


def _late_set(rows: list[dict], bound: int) -> list[bool]:
    """Which rows arrive more than ``bound`` behind the largest time seen before them."""
    top, late = None, []
    for r in rows:
        is_late = top is not None and r["ts"] < top - bound
        late.append(is_late)
        if not is_late:
            top = r["ts"] if top is None else max(top, r["ts"])
    return late


@pytest.mark.parametrize("query", QUERIES)
def test_late_rows_are_dropped_counted_or_raised(query):
    rng = np.random.default_rng(5)
    rows = _disordered(random_rows(rng, 300), rng, 12)  # disorder up to 12, bound 3: many late rows
    late = _late_set(rows, 3)
    assert 10 < sum(late) < 200
    kept = [r for r, is_late in zip(rows, late, strict=True) if not is_late]
    t = table(rows)
    kw = dict(time="ts", size=10, slide=5, **query_kw(query, dims=["x1", "x3"]))
    got = run(query, t, lateness=3, **kw)
    assert rows_of(got) == brute(kept, query, **kw)
    for strategy, threads in [("pane", 1), ("farm", 2), ("farm", 4)]:
        q = open_query(query, lateness=3, strategy=strategy, threads=threads, **kw)
        outs = [q.push(b) for b in batches_of(t, [50, 51, 170])]
        outs.append(q.flush())
        assert same(concat(outs, got.schema), got), (strategy, threads)
        assert q.stats["late_rows"] == sum(late)
        assert q.stats["rows_in"] == len(rows)
    first_late = late.index(True)
    with pytest.raises(windgate.LateRowError):
        run(query, t, lateness=3, on_late="error", **kw)
    strict = open_query(query, lateness=3, on_late="error", **kw)
    strict.push(t.slice(0, first_late))
    with pytest.raises(windgate.LateRowError):
        strict.push(t.slice(first_late, 1))


def test_adaptive_lateness_drops_what_the_kslack_trace_drops():
    # The adaptive K-slack's worked trace (docs/architecture.md#late-rows): arrivals 10, 12, 11, 15, 9, 14,
    # 20 -> 11 and 9 are dropped, K grows to 11.
    t = pa.table({"ts": [10, 12, 11, 15, 9, 14, 20], "x": [7.0, 6.0, 0.0, 5.0, 0.0, 4.0, 3.0]})
    q = windgate.SkylineQuery(time="ts", size=100, dims="x", lateness="adaptive")
    q.push(t)
    assert q.stats["late_rows"] == 2 and q.stats["slack"] == 11
    # The dropped rows (the two best points) are not in the answer.
    assert q.flush().column("x").to_pylist() == [3.0]


def _kslack_late(rows: list[dict]) -> list[bool]:
    """The adaptive K-slack (docs/architecture.md#late-rows): which rows it drops (K = the largest lateness
    seen, measured against each new maximum, dropped rows included; a row below the last punctuation is
    dropped)."""
    k, t_max, last_p, buf, late = 0, None, None, [], []
    for r in rows:
        ts = r["ts"]
        buf.append(ts)
        if t_max is None or ts > t_max:
            t_max = ts
            k = max(k, max(t_max - x for x in buf))
            buf.clear()
            last_p = t_max - k if last_p is None else max(last_p, t_max - k)
        late.append(ts < last_p)
    return late


@pytest.mark.parametrize("query", QUERIES)
def test_adaptive_lateness_under_disorder_is_deterministic(query):
    rng = np.random.default_rng(18)
    rows = sorted(random_rows(rng, 400, t_lo=0, t_hi=300), key=lambda r: r["ts"])
    # Every 25th row is delayed further than any before it: K keeps growing and each such row is late.
    delays = [0] * len(rows)
    for j, i in enumerate(range(10, len(rows), 25)):
        delays[i] = 2 + 2 * j
    rows = [rows[i] for i in sorted(range(len(rows)), key=lambda i: (rows[i]["ts"] + delays[i], i))]
    late = _kslack_late(rows)
    assert sum(late) >= 5
    kept = [r for r, is_late in zip(rows, late, strict=True) if not is_late]
    t = table(rows)
    kw = dict(time="ts", size=12, slide=4, by="g", **query_kw(query, dims=["x0", "x1"]))
    want = brute(kept, query, **kw)
    kw["lateness"] = "adaptive"
    assert rows_of(run(query, t, **kw)) == want
    pieces = batches_of(t, rng.integers(0, len(rows), 6).tolist())
    engines = [open_query(query, strategy="pane", **kw)]
    engines += [open_query(query, strategy="farm", threads=n, farm=FARMS[n], **kw) for n in (2, 3)]
    engines += [open_query(query, strategy=s, **kw) for s in ("recompute", "reference")]
    outs: list[list] = [[] for _ in engines]
    for piece in pieces:
        first = engines[0].push(piece)
        outs[0].append(first)
        for i, q in enumerate(engines[1:], 1):
            got = q.push(piece)
            assert same(got, first) or got.num_rows == first.num_rows == 0, q.stats["strategy"]
            outs[i].append(got)
    for i, q in enumerate(engines):
        outs[i].append(q.flush())
        assert rows_of(concat(outs[i], engines[0].schema)) == want
        assert q.stats["late_rows"] == sum(late)


# ----------------------------------------------------------------------------------------------------------
# Random inputs (hypothesis): splits, threads and strategies against the reference and the brute force

_value = st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, 3.0, -1.0])


@st.composite
def preference_case(draw):
    query = draw(st.sampled_from(QUERIES))
    row = st.fixed_dictionaries(
        {
            "ts": st.integers(-25, 25),
            "g": st.one_of(st.none(), st.integers(0, 2)),
            "s": st.sampled_from(["a", "b"]),
            "x0": _value,
            "x1": _value,
            "x2": st.integers(-1, 2),
            "x3": _value,
            "score": _value,
        }
    )
    rows = draw(st.lists(row, max_size=60))
    for i, r in enumerate(rows):
        r["id"] = i
    size = draw(st.integers(1, 20))
    slide = draw(st.integers(1, size))
    offset = draw(st.integers(-10, 10))
    d = draw(st.integers(1, 4))
    dims = draw(st.permutations(DIMS))[:d]
    prefer = draw(
        st.one_of(
            st.sampled_from(["min", "max"]), st.lists(st.sampled_from(["min", "max"]), min_size=d, max_size=d)
        )
    )
    qkw = query_kw(
        query,
        dims=dims,
        prefer=prefer,
        delta=draw(st.integers(0, 5)),
        k=draw(st.integers(0, 5)),
        descending=draw(st.booleans()),
    )
    by = draw(st.sampled_from([None, "g", ["s", "g"]]))
    lateness = draw(st.one_of(st.none(), st.integers(0, 8)))
    if lateness is not None:
        delays = draw(st.lists(st.integers(0, lateness), min_size=len(rows), max_size=len(rows)))
        rows = sorted(rows, key=lambda r: r["ts"])
        rows = [rows[i] for i in sorted(range(len(rows)), key=lambda i: (rows[i]["ts"] + delays[i], i))]
    cuts = draw(st.lists(st.integers(0, len(rows)), max_size=5))
    strategy = draw(st.sampled_from([*STRATEGIES, "auto"]))
    threads = draw(st.sampled_from(THREADS))
    farm = draw(st.sampled_from(FARMS)) if strategy == "farm" else None
    kw = dict(time="ts", size=size, slide=slide, offset=offset, by=by, **qkw)
    return query, rows, kw, lateness, cuts, strategy, threads, farm


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preference_case())
def test_random_inputs_splits_threads_and_strategies_match_reference(case):
    query, rows, kw, lateness, cuts, strategy, threads, farm = case
    t = table(rows)
    reference = run(query, t, strategy="reference", **kw)
    assert rows_of(reference) == brute(rows, query, **kw)
    engine = dict(strategy=strategy, threads=threads, farm=farm, lateness=lateness)
    assert same(run(query, t, **engine, **kw), reference)
    q = open_query(query, **engine, **kw)
    outs = [q.push(b) for b in batches_of(t, cuts)]
    outs.append(q.flush())
    assert same(concat(outs, reference.schema), reference)
    assert q.stats["late_rows"] == 0 and q.stats["rows_in"] == len(rows)


# ----------------------------------------------------------------------------------------------------------
# Definitions on small hand-made inputs


def test_duplicates_are_all_kept_and_negative_zero_equals_zero():
    t = pa.table(
        {
            "ts": [0, 1, 2, 3, 4],
            "x": [1.0, 1.0, -0.0, 0.0, 2.0],
            "y": [1.0, 1.0, 5.0, 5.0, 2.0],
        }
    )
    out = windgate.skyline(t, time="ts", size=10, dims=["x", "y"])
    # (1, 1) twice: neither dominates the other; (-0.0, 5) and (0.0, 5) are duplicates too; (2, 2) is
    # dominated.
    assert out.column("ts").to_pylist() == [0, 1, 2, 3]
    kappa = windgate.top_dominant(t, time="ts", size=10, dims=["x", "y"], delta=10)
    assert kappa.column("ts").to_pylist() == [0, 1, 2, 3]
    # (1, 1) is beaten in x by (0, 5): kappa 1; (0, 5) is beaten in y by (1, 1): kappa 1.
    assert kappa.column("kappa").to_pylist() == [1, 1, 1, 1]
    top = windgate.topk(
        pa.table({"ts": [0, 1, 2], "v": [0.0, -0.0, -1.0]}), time="ts", size=5, score="v", k=2
    )
    assert top.column("ts").to_pylist() == [0, 1]  # 0.0 and -0.0 tie: by the total order


def test_top_dominant_keeps_lowest_kappa_ties_by_time_then_arrival():
    # Three dimensions: p3 is beaten only in z (kappa 1); p0, p1, p2 are each 2-dominated.
    t = pa.table({"ts": [5, 1, 5, 3], "x": [1, 2, 1, 0], "y": [1, 2, 3, 0], "z": [5, 1, 3, 9]})
    out = windgate.top_dominant(t, time="ts", size=10, dims=["x", "y", "z"], delta=2)
    # Lowest kappa first: ts 3 (kappa 1), then among kappa 2 the first in (time, arrival): ts 1.
    assert out.select(["ts", "x", "kappa"]).to_pylist() == [
        {"ts": 1, "x": 2, "kappa": 2},
        {"ts": 3, "x": 0, "kappa": 1},
    ]
    assert windgate.top_dominant(t, time="ts", size=10, dims=["x", "y", "z"], delta=0).num_rows == 0


def test_topk_order_and_ties():
    t = pa.table({"ts": [3, 1, 3, 2, 0], "v": [4, 9, 9, 9, 1], "name": ["a", "b", "c", "d", "e"]})
    out = windgate.topk(t, time="ts", size=10, score="v", k=4)
    # Best score first, equal scores by (time, arrival): b (1), d (2), c (3); then a.
    assert out.column("name").to_pylist() == ["b", "d", "c", "a"]
    low = windgate.topk(t, time="ts", size=10, score="v", k=2, descending=False)
    assert low.column("name").to_pylist() == ["e", "a"]
    assert windgate.topk(t, time="ts", size=10, score="v", k=0).num_rows == 0


def test_output_types_and_column_order():
    t = pa.table(
        {
            "flag": pa.array([True, False, True]),
            "ts": pa.array([1, 2, 3], pa.int32()),
            "k": pa.array([1, None, 1], pa.int8()),
            "x": pa.array([1.5, 0.5, 0.5], pa.float32()),
            "y": pa.array([3, 2, 1], pa.uint16()),
            "name": pa.array(["a", "b", "c"], pa.large_string()),
        }
    )
    out = windgate.top_dominant(t, time="ts", size=4, slide=2, by="k", dims=["x", "y"], delta=1)
    assert out.column_names == ["window_start", "window_end", "flag", "ts", "k", "x", "y", "name", "kappa"]
    assert out.schema.field("window_start").type == pa.int64()  # int64 for every integer time column
    for name in t.column_names:
        assert out.schema.field(name).type == t.schema.field(name).type, name
    # (window, k): nulls first. In [0, 4), (0.5, 1) at ts 3 dominates (1.5, 3) at ts 1.
    assert out.select(["window_start", "k", "ts"]).to_pylist() == [
        {"window_start": -2, "k": 1, "ts": 1},
        {"window_start": 0, "k": None, "ts": 2},
        {"window_start": 0, "k": 1, "ts": 3},
        {"window_start": 2, "k": None, "ts": 2},
        {"window_start": 2, "k": 1, "ts": 3},
    ]


def test_empty_input_keeps_the_schema():
    t = SCHEMA.empty_table()
    for query in QUERIES:
        out = run(query, t, time="ts", size=10, **query_kw(query, dims=["x0", "x1"]))
        assert out.num_rows == 0 and out.column_names == output_columns(query, SCHEMA)
        q = open_query(query, time="ts", size=10, **query_kw(query, dims=["x0", "x1"]))
        assert q.schema is None
        q.push(t)
        assert q.flush().num_rows == 0


def test_inputs_polars_pandas_reader_and_batch():
    t = table(random_rows(np.random.default_rng(3), 50))
    kw = dict(time="ts", size=10, dims=["x0", "x1"], by="g")
    want = windgate.skyline(t, **kw)
    assert windgate.skyline(t.to_batches()[0], **kw).equals(want)
    assert windgate.skyline(pa.RecordBatchReader.from_batches(t.schema, t.to_batches(7)), **kw).equals(want)
    assert windgate.skyline(t.to_pandas(), **kw).cast(want.schema).equals(want)
    pl = pytest.importorskip("polars")
    assert windgate.skyline(pl.from_arrow(t), **kw).cast(want.schema).equals(want)


def test_timestamp_time_column_durations_and_timedeltas():
    rng = np.random.default_rng(8)
    rows = random_rows(rng, 400, t_lo=-30, t_hi=120)
    t = table(rows)
    micros = (t["ts"].to_numpy() * 250_000).tolist()  # quarter seconds, ties kept
    for r, us in zip(rows, micros, strict=True):
        r["ts"] = us
    as_int = t.set_column(0, "ts", pa.array(micros, pa.int64()))
    stamps = t.set_column(0, "ts", pa.array(micros, pa.timestamp("us", tz="UTC")))
    for query in QUERIES:
        qkw = query_kw(query, dims=["x0", "x3"], prefer=["min", "max"])
        want = brute(rows, query, size=5_000_000, slide=1_000_000, offset=250_000, by="g", **qkw)
        got_int = run(
            query, as_int, time="ts", size=5_000_000, slide=1_000_000, offset=250_000, by="g", **qkw
        )
        assert rows_of(got_int) == want
        for size, slide, offset in [
            ("5s", "1s", "250ms"),
            (dt.timedelta(seconds=5), dt.timedelta(seconds=1), dt.timedelta(milliseconds=250)),
        ]:
            got = run(query, stamps, time="ts", size=size, slide=slide, offset=offset, by="g", **qkw)
            assert got.schema.field("window_start").type == pa.timestamp("us", tz="UTC")
            assert got.schema.field("window_end").type == pa.timestamp("us", tz="UTC")
            assert got.cast(got_int.schema).equals(got_int)


# ----------------------------------------------------------------------------------------------------------
# DuckDB: the skyline as an anti-join


def test_skyline_equals_duckdb_anti_join():
    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(13)
    t = table(random_rows(rng, 600, t_lo=0, t_hi=200))
    size, slide = 20, 5
    got = windgate.skyline(
        t,
        time="ts",
        size=size,
        slide=slide,
        by="g",
        dims=["x0", "x1", "x2"],
        prefer=["min", "max", "min"],
        threads=2,
    )
    con = duckdb.connect()
    con.register("t", t)
    sql = f"""
        WITH w AS (SELECT unnest(range(-{size}, 200 + {slide}, {slide})) AS ws),
        tw AS (SELECT w.ws, t.* FROM t JOIN w ON t.ts >= w.ws AND t.ts < w.ws + {size})
        SELECT a.ws AS window_start, a.id FROM tw a
        WHERE NOT EXISTS (
            SELECT 1 FROM tw b
            WHERE b.ws = a.ws AND b.g IS NOT DISTINCT FROM a.g
              AND b.x0 <= a.x0 AND b.x1 >= a.x1 AND b.x2 <= a.x2
              AND (b.x0 < a.x0 OR b.x1 > a.x1 OR b.x2 < a.x2)
        )
    """
    want = Counter(con.sql(sql).fetchall())
    mine = Counter(zip(got.column("window_start").to_pylist(), got.column("id").to_pylist(), strict=True))
    assert sum(want.values()) > 100
    assert mine == want


# ----------------------------------------------------------------------------------------------------------
# Errors


T_ERR = pa.table(
    {
        "ts": pa.array([1, 2, 3], pa.int64()),
        "price": [1.0, 2.0, 3.0],
        "stars": pa.array([3, 4, 5], pa.int32()),
        "name": ["a", "b", "c"],
    }
)


@pytest.mark.parametrize("query", QUERIES)
def test_nan_and_null_in_a_dimension_or_score_name_the_column(query):
    for bad in (pa.array([1.0, math.nan, 3.0]), pa.array([1.0, None, 3.0], pa.float64())):
        t = T_ERR.set_column(1, "price", bad)
        kw = dict(time="ts", size=10, **query_kw(query, dims=["stars", "price"], score="price"))
        with pytest.raises(windgate.InvalidValueError, match="price") as info:
            run(query, t, **kw)
        assert isinstance(info.value, ValueError)
        text = str(info.value).lower()
        assert ("nan" in text) if bad.null_count == 0 else ("null" in text)
        q = open_query(query, lateness=0, **kw)
        with pytest.raises(windgate.InvalidValueError, match="price"):
            q.push(t)


@pytest.mark.parametrize(
    ("query", "kw", "cls", "pattern"),
    [
        ("skyline", dict(dims=["price", "nope"]), windgate.ColumnNotFoundError, r"dims.*'nope'"),
        ("skyline", dict(dims="price", by="nope"), windgate.ColumnNotFoundError, r"by.*'nope'"),
        ("skyline", dict(dims="price", time="nope"), windgate.ColumnNotFoundError, r"time.*'nope'"),
        ("topk", dict(score="nope", k=1), windgate.ColumnNotFoundError, r"score.*'nope'"),
        ("skyline", dict(dims=["price", "name"]), windgate.ColumnTypeError, r"'name'"),
        ("topk", dict(score="name", k=1), windgate.ColumnTypeError, r"'name'"),
        (
            "skyline",
            dict(dims=["price", "stars"], prefer=["min"] * 3),
            windgate.InvalidParameterError,
            "prefer",
        ),
        ("skyline", dict(dims=["price", "stars"], prefer=[]), windgate.WindgateError, "prefer"),
        ("skyline", dict(dims="price", prefer="best"), windgate.InvalidParameterError, "prefer"),
        ("skyline", dict(dims="price", prefer=1), windgate.ColumnTypeError, "prefer"),
        ("skyline", dict(dims=1), windgate.ColumnTypeError, "dims"),
        ("top_dominant", dict(dims="price", delta=-1), windgate.InvalidParameterError, "delta"),
        ("top_dominant", dict(dims="price", delta=1.5), windgate.ColumnTypeError, "delta"),
        ("topk", dict(score="price", k=-2), windgate.InvalidParameterError, r"\bk\b"),
        ("topk", dict(score=["price"], k=1), windgate.ColumnTypeError, "score"),
        ("skyline", dict(dims="price", size=5, slide=6), windgate.InvalidParameterError, "slide"),
        ("skyline", dict(dims="price", size=0), windgate.InvalidParameterError, "size"),
        ("skyline", dict(dims="price", strategy="fast"), windgate.InvalidParameterError, "strategy"),
        ("skyline", dict(dims="price", threads=0), windgate.InvalidParameterError, "threads"),
        ("skyline", dict(dims="price", lateness=-1), windgate.InvalidParameterError, "lateness"),
        ("skyline", dict(dims="price", on_late="keep"), windgate.InvalidParameterError, "on_late"),
        ("skyline", dict(dims="price", size="10s"), windgate.InvalidParameterError, "size"),
        (
            "skyline",
            dict(dims="price", farm={"scheduler": "fifo"}, strategy="farm"),
            windgate.InvalidParameterError,
            "scheduler",
        ),
        (
            "skyline",
            dict(dims="price", farm={"split_threshold": 0}, strategy="farm"),
            windgate.InvalidParameterError,
            "split_threshold",
        ),
    ],
)
def test_bad_parameters_name_the_parameter(query, kw, cls, pattern):
    base = {"time": "ts", "size": 10, **kw}
    with pytest.raises(cls, match=pattern):
        run(query, T_ERR, **base)
    with pytest.raises(cls, match=pattern):  # column errors may wait for the first batch
        q = open_query(query, **base)
        q.push(T_ERR)


def test_a_bad_input_type_and_a_changed_schema():
    with pytest.raises(windgate.ColumnTypeError, match="data: expected a pyarrow"):
        windgate.skyline([1, 2], time="ts", size=10, dims="price")
    q = windgate.SkylineQuery(time="ts", size=10, dims="price")
    q.push(T_ERR)
    with pytest.raises(windgate.SchemaMismatchError, match="stars"):
        q.push(T_ERR.set_column(2, "stars", pa.array([3, 4, 5], pa.int64())))
    with pytest.raises(windgate.SchemaMismatchError, match="name"):  # a column is missing
        q.push(T_ERR.drop_columns(["name"]))
    with pytest.raises(windgate.WindgateError, match="extra"):
        q.push(T_ERR.append_column("extra", pa.array([1, 2, 3])))
    q.push(T_ERR)  # a rejected batch changes nothing
    assert q.flush().column("ts").to_pylist() == [1, 1]


def test_a_batch_with_reordered_columns_is_rejected_at_push_or_handled_by_name():
    t = pa.table({"ts": [1, 2], "x": [1.0, 2.0]})
    q = windgate.SkylineQuery(time="ts", size=10, dims="x")
    q.push(t)
    try:
        q.push(t.select(["x", "ts"]))
    except windgate.SchemaMismatchError:
        assert q.flush().to_pydict() == {"window_start": [0], "window_end": [10], "ts": [1], "x": [1.0]}
    else:  # accepted: then matched by name
        assert q.flush().to_pydict() == {
            "window_start": [0] * 2,
            "window_end": [10] * 2,
            "ts": [1, 1],
            "x": [1.0] * 2,
        }


def test_null_time_error_or_drop():
    t = T_ERR.set_column(0, "ts", pa.array([1, None, 3], pa.int64()))
    with pytest.raises(windgate.NullTimeError, match="ts"):
        windgate.skyline(t, time="ts", size=10, dims="stars")
    out = windgate.skyline(t, time="ts", size=10, dims="stars", null_time="drop")
    assert out.column("ts").to_pylist() == [1]
    q = windgate.TopKQuery(time="ts", size=10, score="stars", k=5, null_time="drop")
    q.push(t)
    assert q.flush().column("ts").to_pylist() == [3, 1]
    assert q.stats["null_time_rows"] == 1


# ----------------------------------------------------------------------------------------------------------
# Spark


def _spark_table(n=400, seed=21, stamps=False) -> pa.Table:
    t = table(random_rows(np.random.default_rng(seed), n, t_lo=0, t_hi=150, sorted_times=False))
    if stamps:
        t = t.set_column(0, "ts", pa.array(t["ts"].to_numpy() * 1_000_000, pa.timestamp("us", tz="UTC")))
    return t


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


SPARK_CASES = [
    ("skyline", dict(dims=["x0", "x1", "x2"], prefer=["min", "max", "min"])),
    ("top_dominant", dict(dims=["x0", "x1", "x3"], delta=2)),
    ("topk", dict(score="score", k=3, descending=False)),
]


@pytest.mark.spark
@pytest.mark.parametrize(("query", "qkw"), SPARK_CASES)
def test_spark_matches_local_call_keyed_and_unkeyed(spark, query, qkw):
    from windgate import spark as wspark

    t = _spark_table()
    df = spark.createDataFrame(t)  # row order = the table's: ties in time break alike
    for by, extra in [("g", {}), (None, {}), (None, {"range_size": 5})]:
        kw = dict(time="ts", size=20, slide=5, offset=2, by=by, **qkw)
        want = run(query, t, **kw)
        assert want.num_rows > 50
        got = getattr(wspark, query)(df, threads=2, **kw, **extra).toArrow()
        assert got.column_names == want.column_names
        assert same(_sorted(got.cast(want.schema)), _sorted(want)), (by, extra)


@pytest.mark.spark
def test_spark_timestamps_and_null_times(spark):
    from windgate import spark as wspark

    t = _spark_table(n=200, seed=5, stamps=True)
    kw = dict(time="ts", size="30s", slide="10s", dims=["x0", "x1"], delta=3)
    want = windgate.top_dominant(t, **kw)
    got = wspark.top_dominant(spark.createDataFrame(t), **kw).toArrow()
    assert same(_sorted(got.cast(want.schema)), _sorted(want))
    nulls = t.set_column(0, "ts", pa.array([None, *t["ts"].to_pylist()[1:]], t.schema.field("ts").type))
    df = spark.createDataFrame(nulls)
    want = windgate.top_dominant(nulls, null_time="drop", **kw)
    got = wspark.top_dominant(df, null_time="drop", **kw).toArrow()
    assert same(_sorted(got.cast(want.schema)), _sorted(want))
    with pytest.raises(Exception, match=r"NullTimeError.*ts"):
        wspark.top_dominant(df, **kw).collect()


@pytest.mark.spark
def test_spark_errors_before_any_job(spark):
    from windgate import spark as wspark

    df = spark.createDataFrame(_spark_table(n=10))
    with pytest.raises(windgate.ColumnNotFoundError, match="'nope'"):
        wspark.skyline(df, time="ts", size=10, dims=["x0", "nope"])
    with pytest.raises(windgate.ColumnTypeError, match="'s'"):
        wspark.skyline(df, time="ts", size=10, dims=["x0", "s"])
    with pytest.raises(windgate.InvalidParameterError, match="prefer"):
        wspark.skyline(df, time="ts", size=10, dims=["x0", "x1"], prefer=["min", "max", "min"])
    with pytest.raises(windgate.InvalidParameterError, match=r"\bk\b"):
        wspark.topk(df, time="ts", size=10, score="score", k=-1)
    with pytest.raises(windgate.InvalidParameterError, match="slide"):
        wspark.top_dominant(df, time="ts", size=10, slide=20, dims="x0", delta=1)
