"""band_join and BandJoiner (ScaleJoin, Gulisano et al.) against a brute force, across strategies, threads,
batch splits and side interleavings; the paper's data against DuckDB; errors; windgate.spark.band_join on
local[2]."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate

STRATEGIES = ["reference", "serial", "scalejoin"]
THREADS = [1, 2, 3, 4, 8]
SEMANTICS = ["interval", "scalejoin"]
LEFT_SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.int32()), ("x", pa.float64())])
RIGHT_SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("a", pa.float64())])


# ----------------------------------------------------------------------------------------------------------
# Data and the oracle


def _value(any_float: bool):
    values = [
        st.none(),
        st.just(math.nan),
        st.integers(-12, 12).map(lambda i: i / 2),  # ties on purpose
    ]
    if any_float:
        values.append(st.floats(-20, 20, allow_nan=False, allow_infinity=False))
    return st.one_of(values)


def _rows(ts_range: int, max_size: int, value_col: str, any_float: bool):
    row = st.fixed_dictionaries(
        {
            "ts": st.integers(-ts_range, ts_range),
            "k": st.one_of(st.none(), st.integers(0, 2)),
            value_col: _value(any_float),
        }
    )
    return st.lists(row, max_size=max_size)


@st.composite
def predicates(draw):
    out = []
    if draw(st.booleans()):
        out.append(windgate.eq("k", "k"))
    if draw(st.booleans()):
        out.append(windgate.band("x", "a", draw(st.sampled_from([0, 0.5, 1, 3, 7.25]))))
    return out


@st.composite
def join_case(draw, ts_range=20, max_size=40, any_float=True):
    """Left and right rows, a window and predicates. ``any_float=False``: band values on a grid of halves,
    whose differences are exact in float64 (the index's known gap stays out of the way)."""
    left = draw(_rows(ts_range, max_size, "x", any_float))
    right = draw(_rows(ts_range, max_size, "a", any_float))
    window = draw(st.integers(0, 8))
    return left, right, window, draw(predicates())


def table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.table({f.name: pa.array([r[f.name] for r in rows], f.type) for f in schema}, schema=schema)


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _holds(preds, lrow: dict, rrow: dict) -> bool:
    for p in preds:
        lv, rv = lrow[p.left], rrow[p.right]
        if _is_missing(lv) or _is_missing(rv):
            return False
        if isinstance(p, windgate.Band):
            if not abs(float(lv) - float(rv)) <= p.eps:
                return False
        elif lv != rv:
            return False
    return True


def brute_join(left: list[dict], right: list[dict], window: int, preds, semantics: str, time=("ts", "ts")):
    """A sequential three-step join (Gulisano et al., ScaleJoin) over the merged order (ts, left before right,
    arrival).

    "scalejoin": compare with the opposite window, add, purge the own window of ts < t.ts - window.
    "interval": purge the opposite window of ts < t.ts - window first (the paper's "modified" variant).
    Returns ``(left index, right index, ts)`` in output order: by trigger, then partner, in the merged order.
    """
    merged = sorted(
        [(r[time[0]], 0, i) for i, r in enumerate(left)] + [(r[time[1]], 1, i) for i, r in enumerate(right)]
    )
    windows: tuple[list, list] = ([], [])
    out = []
    for ts, side, idx in merged:
        other = windows[1 - side]
        if semantics == "interval":
            other[:] = [w for w in other if w[0] >= ts - window]
        for _wts, widx in other:
            li, ri = (idx, widx) if side == 0 else (widx, idx)
            if _holds(preds, left[li], right[ri]):
                out.append((li, ri, ts))
        windows[side].append((ts, idx))
        if semantics == "scalejoin":
            windows[side][:] = [w for w in windows[side] if w[0] >= ts - window]
    return out


def _norm(v):
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


def expected_rows(left, right, pairs, lcols=("ts", "k", "x"), rcols=("ts", "k", "a")):
    return [
        {
            **{f"left_{c}": _norm(left[li][c]) for c in lcols},
            **{f"right_{c}": _norm(right[ri][c]) for c in rcols},
            "ts": ts,
        }
        for li, ri, ts in pairs
    ]


def rows_of(t: pa.Table | pa.RecordBatch) -> list[dict]:
    return [{k: _norm(v) for k, v in r.items()} for r in t.to_pylist()]


def same(a: pa.Table | pa.RecordBatch, b: pa.Table | pa.RecordBatch) -> bool:
    """Same schema, rows and order; NaN equals NaN (``Table.equals`` says it does not)."""
    return a.schema == b.schema and rows_of(a) == rows_of(b)


def _multiset(rows: list[dict]) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in rows)


_DUCK: list = []


def _duck(duckdb):
    if not _DUCK:
        _DUCK.append(duckdb.connect())
    return _DUCK[0]


def _duckdb_pairs(lt: pa.Table, rt: pa.Table, window: int, preds) -> list[dict]:
    duckdb = pytest.importorskip("duckdb")
    conds = [f"abs(l.ts - r.ts) <= {window}"]
    for p in preds:
        if isinstance(p, windgate.Band):
            conds.append(
                f"NOT isnan(l.{p.left}) AND NOT isnan(r.{p.right}) "
                f"AND abs(l.{p.left}::DOUBLE - r.{p.right}::DOUBLE) <= {p.eps!r}"
            )
        else:
            conds.append(f"l.{p.left} = r.{p.right}")
    con = _duck(duckdb)
    con.register("lt", lt)
    con.register("rt", rt)
    sql = (
        "SELECT l.ts AS left_ts, l.k AS left_k, l.x AS left_x, r.ts AS right_ts, r.k AS right_k, "
        f"r.a AS right_a, greatest(l.ts, r.ts) AS ts FROM lt l, rt r WHERE {' AND '.join(conds)}"
    )
    return rows_of(con.sql(sql).to_arrow_table())


# ----------------------------------------------------------------------------------------------------------
# Brute force


def _rounds_into_band(left: list[dict], right: list[dict], preds) -> bool:
    """Whether some pair's float64 ``|x - a|`` rounds down to ``<= eps`` while the exact difference exceeds
    eps: the band index misses such pairs (test_band_index_misses_pairs_whose_difference_rounds_to_eps)."""
    bands = [p for p in preds if isinstance(p, windgate.Band)]
    for p in bands:
        for lrow in left:
            for rrow in right:
                lv, rv = lrow[p.left], rrow[p.right]
                if _is_missing(lv) or _is_missing(rv):
                    continue
                if abs(lv - rv) <= p.eps and abs(Fraction(lv) - Fraction(rv)) > Fraction(p.eps):
                    return True
    return False


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(join_case())
def test_matches_brute_force_and_duckdb(case):
    left, right, window, preds = case
    lt, rt = table(left, LEFT_SCHEMA), table(right, RIGHT_SCHEMA)
    indexes = (False,) if _rounds_into_band(left, right, preds) else (False, True)
    for semantics in SEMANTICS:
        want = expected_rows(left, right, brute_join(left, right, window, preds, semantics))
        for index in indexes:
            got = windgate.band_join(
                lt, rt, time="ts", window=window, on=preds, semantics=semantics, index=index
            )
            assert got.column_names == ["left_ts", "left_k", "left_x", "right_ts", "right_k", "right_a", "ts"]
            assert rows_of(got) == want, (semantics, index)  # same rows in the same order
        ts = got.column("ts").to_pylist()
        assert ts == sorted(ts)
        if semantics == "interval":
            # The SQL cross join + filter: the same multiset of pairs.
            assert _multiset(rows_of(got)) == _multiset(_duckdb_pairs(lt, rt, window, preds))
            for r in got.to_pylist():
                assert abs(r["left_ts"] - r["right_ts"]) <= window
                assert r["ts"] == max(r["left_ts"], r["right_ts"])


# ----------------------------------------------------------------------------------------------------------
# Determinism


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(join_case(ts_range=60, max_size=120, any_float=False))
def test_every_strategy_thread_count_and_index_equals_reference(case):
    left, right, window, preds = case
    lt, rt = table(left, LEFT_SCHEMA), table(right, RIGHT_SCHEMA)
    for semantics in SEMANTICS:
        kw = dict(time="ts", window=window, on=preds, semantics=semantics)
        reference = windgate.band_join(lt, rt, strategy="reference", **kw)
        for strategy in STRATEGIES:
            for threads in THREADS:
                for index in (True, False):
                    got = windgate.band_join(lt, rt, strategy=strategy, threads=threads, index=index, **kw)
                    assert same(got, reference), (semantics, strategy, threads, index)
        for threads in (1, 4):
            assert same(windgate.band_join(lt, rt, strategy="auto", threads=threads, **kw), reference)


def test_larger_random_data_all_engines_agree():
    rng = np.random.default_rng(2)
    n = 3000
    lt = pa.table(
        {
            "ts": np.sort(rng.integers(0, 600, n)),
            "k": pa.array(rng.integers(0, 4, n), pa.int32()),
            "x": rng.integers(0, 200, n) / 2,
        }
    )
    rt = pa.table(
        {"ts": np.sort(rng.integers(0, 600, n)), "k": rng.integers(0, 4, n), "a": rng.random(n) * 100}
    )
    on = [windgate.band("x", "a", 1.5), windgate.eq("k", "k")]
    for semantics in SEMANTICS:
        kw = dict(time="ts", window=25, on=on, semantics=semantics)
        reference = windgate.band_join(lt, rt, strategy="reference", **kw)
        assert reference.num_rows > 100
        for strategy, threads, index in [
            ("scalejoin", 8, True),
            ("scalejoin", 3, False),
            ("serial", 1, True),
        ]:
            got = windgate.band_join(lt, rt, strategy=strategy, threads=threads, index=index, **kw)
            assert got.equals(reference), (semantics, strategy, threads, index)


# ----------------------------------------------------------------------------------------------------------
# Streaming


@st.composite
def stream_case(draw):
    left, right, window, preds = draw(join_case(ts_range=40, max_size=50, any_float=False))
    lateness = draw(st.integers(0, 6))

    def disorder(rows):
        # Arrival = time order perturbed by a delay <= lateness: nothing is late.
        delays = draw(st.lists(st.integers(0, lateness), min_size=len(rows), max_size=len(rows)))
        rows = sorted(rows, key=lambda r: r["ts"])
        return [rows[i] for i in sorted(range(len(rows)), key=lambda i: (rows[i]["ts"] + delays[i], i))]

    left, right = disorder(left), disorder(right)

    def split(n):
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4))))
        bounds = [0, *[c for c in cuts if c < n], n]
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]

    pieces = [("left", p) for p in split(len(left))], [("right", p) for p in split(len(right))]
    # A random interleaving of the two sides' batch sequences (each side keeps its own order).
    order = draw(st.permutations([0] * len(pieces[0]) + [1] * len(pieces[1])))
    its = [iter(pieces[0]), iter(pieces[1])]
    events = [next(its[s]) for s in order]
    empty_push = draw(st.booleans())  # an empty batch now and then changes nothing
    return left, right, window, preds, lateness, events, empty_push


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_case(), st.sampled_from(SEMANTICS))
def test_streaming_equals_batch_for_any_split_interleaving_and_threads(case, semantics):
    left, right, window, preds, lateness, events, empty_push = case
    lt, rt = table(left, LEFT_SCHEMA), table(right, RIGHT_SCHEMA)
    kw = dict(time="ts", window=window, on=preds, lateness=lateness, semantics=semantics, on_late="error")
    batch = windgate.band_join(lt, rt, **kw)
    # Nothing is late, so the bounded-lateness answer is the exact one (ties in time by arrival order).
    exact = windgate.band_join(lt, rt, time="ts", window=window, on=preds, semantics=semantics)
    assert same(batch, exact)
    assert rows_of(batch) == expected_rows(left, right, brute_join(left, right, window, preds, semantics))

    joiners = {t: windgate.BandJoiner(threads=t, **kw) for t in (1, 2, 4)}
    outs: dict[int, list[pa.RecordBatch]] = {t: [] for t in joiners}
    for side, (a, b) in events:
        src = lt if side == "left" else rt
        piece = src.slice(a, b - a).combine_chunks().to_batches()[0]
        per_thread = {t: j.push(piece, side=side) for t, j in joiners.items()}
        if empty_push:
            for j in joiners.values():
                extra = j.push(pa.RecordBatch.from_pylist([], schema=src.schema), side=side)
                assert extra.num_rows == 0
        for t, out in per_thread.items():
            assert rows_of(out) == rows_of(per_thread[1]), (t, side, a, b)  # same rows at every push
            outs[t].append(out)
    for t, j in joiners.items():
        outs[t].append(j.flush())
    for t in (2, 4):
        assert rows_of(outs[t][-1]) == rows_of(outs[1][-1]), t
    for t, j in joiners.items():
        nonempty = [o for o in outs[t] if o.num_rows]
        streamed = pa.Table.from_batches(nonempty) if nonempty else batch.schema.empty_table()
        assert rows_of(streamed) == rows_of(batch), t
        if nonempty:
            assert streamed.schema == batch.schema
        s = j.stats
        assert s["late_rows"] == 0
        assert (s["rows_in_left"], s["rows_in_right"]) == (len(left), len(right))
        assert s["pairs_out"] == batch.num_rows
        assert s["threads"] == t
        assert s["semantics"] == semantics


def test_streaming_emits_before_flush_and_counts_late_rows():
    j = windgate.BandJoiner(time="ts", window=2, lateness=0)
    assert j.push(pa.record_batch({"ts": [1, 4]}), side="left").num_rows == 0
    assert j.schema is None
    out = j.push(pa.record_batch({"ts": [2, 9]}), side="right")
    assert out.to_pydict() == {"left_ts": [1], "right_ts": [2], "ts": [2]}
    assert j.schema == out.schema
    # (4, 2) is final only once the right side has moved past 4, here at the flush.
    assert j.push(pa.record_batch({"ts": [0]}), side="left").num_rows == 0  # late: dropped, counted
    assert j.flush().to_pydict() == {"left_ts": [4], "right_ts": [2], "ts": [4]}
    s = j.stats
    assert (s["late_rows"], s["late_rows_left"], s["late_rows_right"]) == (1, 1, 0)
    assert s["pairs_out"] == 2


# ----------------------------------------------------------------------------------------------------------
# The ScaleJoin paper's data and worked example


def test_seed_002_data_equals_duckdb_range_join():
    duckdb = pytest.importorskip("duckdb")
    from windgate.datasets import bandjoin

    r, s = bandjoin(rows=5000, rate=100)
    on = [windgate.band("x", "a", 10), windgate.band("y", "b", 10)]
    got = windgate.band_join(r, s, time="ts", window=100, on=on)
    con = duckdb.connect()
    con.register("r", r)
    con.register("s", s)
    want = con.sql(
        "SELECT r.ts, r.x, r.y, r.z, s.ts, s.a, s.b, s.c, s.d FROM r JOIN s "
        "ON r.ts - s.ts BETWEEN -100 AND 100 AND abs(r.x::DOUBLE - s.a::DOUBLE) <= 10 "
        "AND abs(r.y::DOUBLE - s.b::DOUBLE) <= 10"
    ).fetchall()
    cols = ["left_ts", "left_x", "left_y", "left_z", "right_ts", "right_a", "right_b", "right_c", "right_d"]
    mine = list(zip(*(got.column(c).to_pylist() for c in cols), strict=True))
    assert len(want) > 20
    assert Counter(mine) == Counter(want)
    ts = got.column("ts").to_pylist()
    assert ts == sorted(ts)
    no_index = windgate.band_join(r, s, time="ts", window=100, on=on, index=False, threads=2)
    assert no_index.equals(got)


def test_worked_example_of_the_scalejoin_paper():
    # WS = 4; t1 = R@1, t2 = S@2, t3 = R@3, t4 = S@6, t5 = S@7 (R = left, S = right).
    r = pa.table({"ts": [1, 3], "name": ["t1", "t3"]})
    s = pa.table({"ts": [2, 6, 7], "name": ["t2", "t4", "t5"]})
    for threads in (1, 2, 3):
        out = windgate.band_join(r, s, time="ts", window=4, semantics="scalejoin", threads=threads)
        # (trigger, partner): the later tuple, then the one in the opposite window it was compared with.
        pairs = [
            (o["right_name"], o["left_name"])
            if o["right_ts"] > o["left_ts"]
            else (o["left_name"], o["right_name"])
            for o in out.to_pylist()
        ]
        assert pairs == [("t2", "t1"), ("t3", "t2"), ("t4", "t1"), ("t4", "t3"), ("t5", "t1"), ("t5", "t3")]
        assert out.column("ts").to_pylist() == [2, 3, 6, 6, 7, 7]
        out = windgate.band_join(r, s, time="ts", window=4, semantics="interval", threads=threads)
        names = zip(out.column("left_name").to_pylist(), out.column("right_name").to_pylist(), strict=True)
        assert list(names) == [
            ("t1", "t2"),
            ("t3", "t2"),
            ("t3", "t4"),
            ("t3", "t5"),
        ]
        assert out.column("ts").to_pylist() == [2, 3, 6, 7]


def test_docstring_example():
    left = pa.table({"ts": [1, 5, 9], "x": [10, 20, 30]})
    right = pa.table({"ts": [2, 6], "a": [11, 40]})
    out = windgate.band_join(left, right, time="ts", window=3, on=[windgate.band("x", "a", 2)])
    assert out.to_pydict() == {"left_ts": [1], "left_x": [10], "right_ts": [2], "right_a": [11], "ts": [2]}


# ----------------------------------------------------------------------------------------------------------
# Time columns


def test_duration_window_on_timestamp_columns_and_time_pair():
    rng = np.random.default_rng(5)
    n = 400
    lt_us = np.sort(rng.integers(0, 60_000_000, n))
    rt_us = np.sort(rng.integers(0, 60_000_000, n))
    left = pa.table({"lt": pa.array(lt_us, pa.timestamp("us", tz="UTC")), "v": rng.integers(0, 50, n)})
    right = pa.table({"rt": pa.array(rt_us, pa.timestamp("us", tz="UTC")), "w": rng.integers(0, 50, n)})
    on = [windgate.band("v", "w", 1)]
    got = windgate.band_join(left, right, time=("lt", "rt"), window="1500ms", on=on)
    assert got.column_names == ["left_lt", "left_v", "right_rt", "right_w", "ts"]
    assert got.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    as_int = windgate.band_join(
        left.set_column(0, "lt", pa.array(lt_us)),
        right.set_column(0, "rt", pa.array(rt_us)),
        time=("lt", "rt"),
        window=1_500_000,
        on=on,
    )
    assert got.num_rows > 10
    assert got.cast(as_int.schema).equals(as_int)
    for window in (dt.timedelta(milliseconds=1500), "1.5s", "1500 ms"):
        try:
            other = windgate.band_join(left, right, time=("lt", "rt"), window=window, on=on)
        except windgate.InvalidParameterError:
            assert window == "1.5s"  # fractional durations may be refused, but then with a clear error
            continue
        assert other.equals(got), window
    # Milliseconds: the duration is converted to the column's unit.
    ms_l = left.set_column(0, "lt", pa.array(lt_us // 1000, pa.timestamp("ms")))
    ms_r = right.set_column(0, "rt", pa.array(rt_us // 1000, pa.timestamp("ms")))
    ms = windgate.band_join(ms_l, ms_r, time=("lt", "rt"), window="1500ms", on=on)
    want = windgate.band_join(
        ms_l.set_column(0, "lt", pa.array(lt_us // 1000)),
        ms_r.set_column(0, "rt", pa.array(rt_us // 1000)),
        time=("lt", "rt"),
        window=1500,
        on=on,
    )
    assert ms.cast(want.schema).equals(want)


def test_times_at_the_ends_of_int64():
    lo, hi = -(2**63), 2**63 - 1
    left = [{"ts": t, "k": 0, "x": 0.0} for t in (lo, lo + 1, 0, hi - 1, hi)]
    right = [{"ts": t, "k": 0, "a": 0.0} for t in (lo, lo + 3, 2, hi - 2, hi)]
    lt, rt = table(left, LEFT_SCHEMA), table(right, RIGHT_SCHEMA)
    for window in (0, 1, 3, 2**62, hi):
        for semantics in SEMANTICS:
            got = windgate.band_join(lt, rt, time="ts", window=window, semantics=semantics)
            want = expected_rows(left, right, brute_join(left, right, window, [], semantics))
            assert rows_of(got) == want, (window, semantics)


def test_unsorted_input_is_exact_without_lateness():
    rng = np.random.default_rng(9)
    lt = pa.table({"ts": rng.integers(0, 100, 300)})
    rt = pa.table({"ts": rng.integers(0, 100, 300)})
    got = windgate.band_join(lt, rt, time="ts", window=3)
    idx_l = np.argsort(lt["ts"].to_numpy(), kind="stable")
    idx_r = np.argsort(rt["ts"].to_numpy(), kind="stable")
    assert windgate.band_join(lt.take(idx_l), rt.take(idx_r), time="ts", window=3).equals(got)


# ----------------------------------------------------------------------------------------------------------
# Errors


def _lr():
    left = pa.table({"ts": [0, 1], "x": [1.0, 2.0], "s": ["a", "b"], "k": [1, 2]})
    right = pa.table({"ts": [0, 1], "a": [1.0, 2.0], "k": [1, 2]})
    return left, right


def test_errors_name_the_parameter_or_column():
    left, right = _lr()
    j = windgate.band_join
    with pytest.raises(windgate.ColumnNotFoundError, match=r"on: column 'nope'.*left input"):
        j(left, right, time="ts", window=1, on=[windgate.eq("nope", "k")])
    with pytest.raises(windgate.ColumnNotFoundError, match=r"on: column 'nope'.*right input"):
        j(left, right, time="ts", window=1, on=[windgate.band("x", "nope", 1)])
    with pytest.raises(windgate.ColumnNotFoundError, match=r"time: column 'when'"):
        j(left, right, time="when", window=1)
    with pytest.raises(windgate.ColumnTypeError, match=r"column 's'.*numeric"):
        j(left, right, time="ts", window=1, on=[windgate.band("s", "a", 1)])
    with pytest.raises(windgate.ColumnTypeError, match=r"column 'ts'.*time column"):
        j(left.set_column(0, "ts", pa.array([0.5, 1.5])), right, time="ts", window=1)
    with pytest.raises(windgate.InvalidParameterError, match=r"window: .*non-negative.*-1"):
        j(left, right, time="ts", window=-1)
    with pytest.raises(windgate.InvalidParameterError, match=r"window: a duration string"):
        j(left, right, time="ts", window="1s")  # a duration on plain integers
    with pytest.raises(windgate.ColumnTypeError, match=r"window: expected an int"):
        j(left, right, time="ts", window=1.5)
    for eps in (-1, math.inf, math.nan):
        with pytest.raises(windgate.InvalidParameterError, match=r'on: band\("x", "a", eps\)'):
            j(left, right, time="ts", window=1, on=[windgate.band("x", "a", eps)])
    with pytest.raises(windgate.ColumnTypeError, match=r"band: eps must be a number"):
        windgate.band("x", "a", "1")
    with pytest.raises(windgate.ColumnTypeError, match=r"eq: expected two column names"):
        windgate.eq("x", 1)
    with pytest.raises(windgate.InvalidParameterError, match=r"on: expected windgate.band"):
        j(left, right, time="ts", window=1, on=[("band", "x", "a", 1)])
    with pytest.raises(windgate.ColumnTypeError, match=r"time: expected a column name or a \(left, right\)"):
        j(left, right, time=("ts",), window=1)
    with pytest.raises(
        windgate.InvalidParameterError, match=r"semantics: expected .*interval.*'?\"?modified"
    ):
        j(left, right, time="ts", window=1, semantics="modified")
    with pytest.raises(windgate.InvalidParameterError, match=r"strategy: expected .*\"fast\""):
        j(left, right, time="ts", window=1, strategy="fast")
    with pytest.raises(windgate.InvalidParameterError, match=r"on_late: expected"):
        j(left, right, time="ts", window=1, on_late="ignore")
    with pytest.raises(windgate.InvalidParameterError, match=r"threads: expected a positive int"):
        j(left, right, time="ts", window=1, threads=0)
    with pytest.raises(windgate.InvalidParameterError, match=r"lateness: expected a non-negative"):
        j(left, right, time="ts", window=1, lateness=-1)
    with pytest.raises(windgate.ColumnTypeError, match=r"left: expected a pyarrow"):
        j([1, 2], right, time="ts", window=1)


def test_data_errors():
    left, right = _lr()
    j = windgate.band_join
    nulls = left.set_column(0, "ts", pa.array([0, None], pa.int64()))
    with pytest.raises(
        windgate.NullTimeError, match=r"column 'ts': null time at row 1 of this batch of the left input"
    ):
        j(nulls, right, time="ts", window=1)
    with pytest.raises(windgate.NullTimeError, match=r"right input"):
        j(
            right.rename_columns(["ts", "x", "k"]),
            nulls.select(["ts", "x", "k"]).rename_columns(["ts", "a", "k"]),
            time="ts",
            window=1,
        )
    stamps = right.set_column(0, "ts", pa.array([0, 1], pa.timestamp("us")))
    with pytest.raises(windgate.SchemaMismatchError, match=r"time: the left time column 'ts' is Int64"):
        j(left, stamps, time="ts", window=1)
    with pytest.raises(windgate.SchemaMismatchError, match=r"time: .*Int32"):
        j(left.set_column(0, "ts", pa.array([0, 1], pa.int32())), right, time="ts", window=1)
    with pytest.raises(windgate.SchemaMismatchError, match=r'on: eq\("x", "k"\)'):
        j(left, right, time="ts", window=1, on=[windgate.eq("x", "k")])
    late = left.set_column(0, "ts", pa.array([5, 0]))
    with pytest.raises(
        windgate.LateRowError, match=r"left input: row 1 of this batch has time 0 below the watermark 4"
    ):
        j(late, right, time="ts", window=1, lateness=1, on_late="error")
    dropped = windgate.BandJoiner(time="ts", window=1, lateness=1)
    dropped.push(late, side="left")
    assert dropped.stats["late_rows_left"] == 1


def test_joiner_errors():
    left, right = _lr()
    j = windgate.BandJoiner(time="ts", window=1, on=[windgate.eq("k", "k")])
    with pytest.raises(
        windgate.InvalidParameterError, match=r'side: expected "left" or "right", got "middle"'
    ):
        j.push(left, side="middle")
    j.push(left, side="left")
    with pytest.raises(windgate.SchemaMismatchError, match=r"left input: a batch's schema differs"):
        j.push(left.drop_columns(["s"]), side="left")
    with pytest.raises(windgate.ColumnNotFoundError, match=r"on: column 'k'.*right input"):
        j.push(right.drop_columns(["k"]), side="right")
    j.push(right, side="right")  # still usable after a rejected batch
    assert j.flush().column("ts").to_pylist() == [0, 1]  # equal k: (0, 0) and (1, 1)
    with pytest.raises(windgate.InvalidParameterError, match=r"push: the joiner was flushed"):
        j.push(left, side="left")
    with pytest.raises(windgate.InvalidParameterError, match=r"flush: the joiner was already flushed"):
        j.flush()
    with pytest.raises(windgate.LateRowError, match=r"right input: row 1 of this batch has time 0"):
        e = windgate.BandJoiner(time="ts", window=1, lateness=0, on_late="error")
        e.push(right.set_column(0, "ts", pa.array([3, 0])), side="right")


# ----------------------------------------------------------------------------------------------------------
# Edge cases these tests found in the first version (now fixed)


def test_push_of_an_empty_table():
    j = windgate.BandJoiner(time="ts", window=1, lateness=0)
    j.push(pa.table({"ts": [1]}), side="right")
    out = j.push(pa.schema([("ts", pa.int64())]).empty_table(), side="left")  # a Table of zero chunks
    assert out.num_rows == 0
    j.push(pa.table({"ts": [2]}), side="left")
    assert j.flush().num_rows == 1


def test_band_index_finds_pairs_whose_difference_rounds_to_eps():
    # |1.0 - (-1e-17)| is 1.0 in float64, so the predicate holds (index=False finds the pair), but the window
    # tuple's cell floor(-1e-17 / 1.0) = -1 lies outside floor(0.0)..floor(2.0) = 0..2: the probe needs
    # a margin.
    lt = pa.table({"ts": [1], "x": [1.0]})
    rt = pa.table({"ts": [0], "a": [-1e-17]})
    kw = dict(time="ts", window=5, on=[windgate.band("x", "a", 1.0)])
    assert windgate.band_join(lt, rt, index=False, **kw).num_rows == 1
    assert windgate.band_join(lt, rt, index=True, **kw).num_rows == 1


def test_eq_nan_matches_nothing():
    t = pa.table({"ts": [0], "k": [math.nan]})
    assert windgate.band_join(t, t, time="ts", window=1, on=[windgate.eq("k", "k")]).num_rows == 0


def test_eq_negative_zero_equals_zero():
    lt = pa.table({"ts": [0], "k": [-0.0]})
    rt = pa.table({"ts": [0], "k": [0.0]})
    assert windgate.band_join(lt, rt, time="ts", window=1, on=[windgate.eq("k", "k")]).num_rows == 1


# ----------------------------------------------------------------------------------------------------------
# Spark


def _spark_data(n=1500, seed=4, stamps=False):
    rng = np.random.default_rng(seed)
    lt = np.sort(rng.integers(-300, 300, n))
    rt = np.sort(rng.integers(-300, 300, n))
    x = rng.integers(0, 60, n).astype(float)
    x[rng.random(n) < 0.03] = np.nan
    t_type = pa.timestamp("us", tz="UTC") if stamps else pa.int64()
    scale = 1_000_000 if stamps else 1
    left = pa.table(
        {
            "ts": pa.array(lt * scale, t_type),
            "k": pa.array(rng.integers(0, 4, n), pa.int32(), mask=rng.random(n) < 0.05),
            "x": pa.array(x, pa.float64(), mask=rng.random(n) < 0.03),
            "name": pa.array([f"l{i}" for i in range(n)]),
        }
    )
    right = pa.table(
        {
            "ts": pa.array(rt * scale, t_type),
            "k": pa.array(rng.integers(0, 4, n), pa.int64()),
            "a": pa.array(rng.integers(0, 60, n), pa.int64()),
        }
    )
    return left, right


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


@pytest.mark.spark
def test_spark_band_join_matches_local_call(spark):
    from windgate import spark as wspark

    left, right = _spark_data()
    ldf = spark.createDataFrame(left).repartition(3)
    rdf = spark.createDataFrame(right).repartition(2)
    cases = [
        ([windgate.band("x", "a", 2)], None),
        ([windgate.band("x", "a", 2)], 3),  # buckets narrower than the window: right rows in many buckets
        ([windgate.eq("k", "k"), windgate.band("x", "a", 5)], 1),
        ([windgate.eq("k", "k")], 50),
        ([], 200),
    ]
    for on, bucket in cases:
        want = windgate.band_join(left, right, time="ts", window=7, on=on)
        got = wspark.band_join(ldf, rdf, time="ts", window=7, on=on, bucket=bucket, threads=2).toArrow()
        assert want.num_rows > 50
        assert got.schema.names == want.schema.names
        assert same(_sorted(got.cast(want.schema)), _sorted(want)), (on, bucket)


@pytest.mark.spark
def test_spark_band_join_at_the_ends_of_int64(spark):
    from windgate import spark as wspark

    lo, hi = -(2**63), 2**63 - 1
    left = pa.table({"ts": [lo, lo + 1, -7, 0, 5, hi - 1, hi], "v": list(range(7))})
    right = pa.table({"ts": [lo, lo + 3, -2, 2, hi - 2, hi], "w": list(range(6))})
    ldf, rdf = spark.createDataFrame(left), spark.createDataFrame(right)
    for window, bucket in [
        (0, None),
        (3, None),
        (3, 2),
        (3, 2**60),
        (2**59, 2**58),
        (2**62, None),
        (hi, None),
    ]:
        want = windgate.band_join(left, right, time="ts", window=window)
        got = wspark.band_join(ldf, rdf, time="ts", window=window, bucket=bucket).toArrow()
        assert same(_sorted(got.cast(want.schema)), _sorted(want)), (window, bucket)


@pytest.mark.spark
def test_spark_band_join_timestamps_and_durations(spark):
    from windgate import spark as wspark

    left, right = _spark_data(n=1000, seed=8, stamps=True)
    left = left.rename_columns(["lt", "k", "x", "name"])
    ldf = spark.createDataFrame(left)
    rdf = spark.createDataFrame(right)
    on = [windgate.band("x", "a", 3), windgate.eq("k", "k")]
    want = windgate.band_join(left, right, time=("lt", "ts"), window="5s", on=on)
    assert want.num_rows > 50
    for bucket in (None, "2s", dt.timedelta(seconds=30)):
        got = wspark.band_join(ldf, rdf, time=("lt", "ts"), window="5s", on=on, bucket=bucket).toArrow()
        assert same(_sorted(got.cast(want.schema)), _sorted(want)), bucket


@pytest.mark.spark
def test_spark_band_join_errors(spark):
    from windgate import spark as wspark

    left, right = _spark_data(n=20)
    ldf, rdf = spark.createDataFrame(left), spark.createDataFrame(right)
    with pytest.raises(windgate.InvalidParameterError, match=r"semantics: .*only \"interval\""):
        wspark.band_join(ldf, rdf, time="ts", window=3, semantics="scalejoin")
    with pytest.raises(windgate.ColumnNotFoundError, match=r"on: column 'nope' is not in the right"):
        wspark.band_join(ldf, rdf, time="ts", window=3, on=[windgate.eq("k", "nope")])
    with pytest.raises(windgate.ColumnNotFoundError, match=r"time: column 'when' is not in the left"):
        wspark.band_join(ldf, rdf, time=("when", "ts"), window=3)
    with pytest.raises(windgate.ColumnTypeError, match=r"column 'name'.*numeric"):
        wspark.band_join(ldf, rdf, time="ts", window=3, on=[windgate.band("name", "a", 1)])
    with pytest.raises(windgate.InvalidParameterError, match=r"window: "):
        wspark.band_join(ldf, rdf, time="ts", window=-3)
    with pytest.raises(windgate.InvalidParameterError, match=r"window: a duration string"):
        wspark.band_join(ldf, rdf, time="ts", window="3s")
    with pytest.raises(windgate.InvalidParameterError, match=r"bucket: expected a positive width.*got 0"):
        wspark.band_join(ldf, rdf, time="ts", window=3, bucket=0)
    with pytest.raises(windgate.SchemaMismatchError, match=r"time: "):
        wspark.band_join(ldf, rdf.withColumn("ts", rdf.ts.cast("int")), time="ts", window=3)


@pytest.mark.spark
def test_spark_band_join_null_time_fails_like_the_local_call(spark):
    from windgate import spark as wspark

    left, right = _spark_data(n=30)
    right = right.set_column(0, "ts", pa.array([None, *right["ts"].to_pylist()[1:]], pa.int64()))
    with pytest.raises(windgate.NullTimeError, match="null time"):
        windgate.band_join(left, right, time="ts", window=3)
    # Spark raises its own exception type; the message is windgate's.
    with pytest.raises(Exception, match=r"NullTimeError.*column 'ts': null time"):
        wspark.band_join(
            spark.createDataFrame(left), spark.createDataFrame(right), time="ts", window=3
        ).collect()
