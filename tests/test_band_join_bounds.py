"""band_join / BandJoiner with asymmetric bounds (``lower``/``upper``) and ``how="left"``: every strategy,
thread count and batch split against a brute force (rows and order, ``brute.band_join_order``); durations,
validation."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import band_join_order

LEFT = pa.schema([("ts", pa.int64()), ("k", pa.int32()), ("x", pa.float64())])
RIGHT = pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("a", pa.float64())])


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _rows(col: str):
    value = st.one_of(st.none(), st.just(math.nan), st.integers(-6, 6).map(lambda i: i / 2))
    row = st.fixed_dictionaries(
        {"ts": st.integers(-25, 25), "k": st.one_of(st.none(), st.integers(0, 2)), col: value}
    )
    return st.lists(row, max_size=30)


@st.composite
def bounds_case(draw):
    left, right = draw(_rows("x")), draw(_rows("a"))
    lower = draw(st.integers(-10, 10))
    upper = lower + draw(st.integers(0, 10))
    on = []
    if draw(st.booleans()):
        on.append(windgate.eq("k", "k"))
    if draw(st.booleans()):
        on.append(windgate.band("x", "a", draw(st.sampled_from([0, 0.5, 1.5]))))
    return left, right, lower, upper, on, draw(st.sampled_from(["inner", "left"]))


def _table(rows, schema):
    return pa.table({f.name: pa.array([r[f.name] for r in rows], f.type) for f in schema}, schema=schema)


def _matches(left, right, on) -> np.ndarray:
    m = np.ones((len(left), len(right)), bool)
    for i, lr in enumerate(left):
        for j, rr in enumerate(right):
            for p in on:
                lv, rv = lr[p.left], rr[p.right]
                if _missing(lv) or _missing(rv):
                    m[i, j] = False
                elif isinstance(p, windgate.Band):
                    m[i, j] &= abs(lv - rv) <= p.eps
                else:
                    m[i, j] &= lv == rv
    return m


def _expected(left, right, lower, upper, on, how):
    rows = band_join_order(
        [r["ts"] for r in left], [r["ts"] for r in right], _matches(left, right, on), lower, upper, how
    )
    out = []
    for li, ri in rows:
        rr = right[ri] if ri is not None else {"ts": None, "k": None, "a": None}
        ts = left[li]["ts"] if ri is None else max(left[li]["ts"], rr["ts"])
        out.append(
            {
                **{f"left_{c}": left[li][c] for c in ("ts", "k", "x")},
                **{f"right_{c}": rr[c] for c in ("ts", "k", "a")},
                "ts": ts,
            }
        )
    return out


def _norm(rows):
    return [{k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bounds_case())
def test_every_engine_equals_the_brute_force(case):
    left, right, lower, upper, on, how = case
    want = _norm(_expected(left, right, lower, upper, on, how))
    lt, rt = _table(left, LEFT), _table(right, RIGHT)
    for strategy, threads in [("reference", 1), ("serial", 1), ("scalejoin", 2), ("scalejoin", 3)]:
        for index in (True, False):
            out = windgate.band_join(
                lt, rt, time="ts", lower=lower, upper=upper, how=how, on=on,
                strategy=strategy, threads=threads, index=index,
            )  # fmt: skip
            assert _norm(out.to_pylist()) == want, (strategy, threads, index)
            if how == "left":
                assert all(out.schema.field(f"right_{c}").nullable for c in ("ts", "k", "a"))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bounds_case(), st.lists(st.tuples(st.booleans(), st.integers(1, 8)), min_size=1, max_size=8))
def test_streaming_equals_batch_for_any_split(case, splits):
    left, right, lower, upper, on, how = case
    left = sorted(left, key=lambda r: r["ts"])
    right = sorted(right, key=lambda r: r["ts"])
    lt, rt = _table(left, LEFT), _table(right, RIGHT)
    want = windgate.band_join(lt, rt, time="ts", lower=lower, upper=upper, how=how, on=on)
    for threads in (1, 3):
        j = windgate.BandJoiner(
            time="ts", lower=lower, upper=upper, how=how, on=on, lateness=0, threads=threads
        )
        outs, li, ri = [], 0, 0
        for is_left, n in splits * 20:
            if is_left and li < len(left):
                outs.append(j.push(lt.slice(li, n), side="left"))
                li += n
            elif not is_left and ri < len(right):
                outs.append(j.push(rt.slice(ri, n), side="right"))
                ri += n
        outs.append(j.push(lt.slice(li), side="left"))
        outs.append(j.push(rt.slice(ri), side="right"))
        outs.append(j.flush())
        got = [r for b in outs for r in b.to_pylist()]
        assert _norm(got) == _norm(want.to_pylist()), threads
        assert j.stats["unmatched_rows"] == sum(r["right_ts"] is None for r in got)


def test_window_equals_symmetric_bounds():
    rng = np.random.default_rng(3)
    lt = pa.table({"ts": np.sort(rng.integers(0, 500, 400)), "x": rng.integers(0, 9, 400)})
    rt = pa.table({"ts": np.sort(rng.integers(0, 500, 400)), "x": rng.integers(0, 9, 400)})
    on = windgate.band("x", "x", 1)
    for how in ("inner", "left"):
        a = windgate.band_join(lt, rt, time="ts", window=7, on=on, how=how)
        b = windgate.band_join(lt, rt, time="ts", lower=-7, upper=7, on=on, how=how)
        assert a.equals(b)


def test_negative_durations_strings_and_timedeltas():
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    clicks = pa.table(
        {"ts": pa.array([t0 + dt.timedelta(seconds=s) for s in (40, 50, 100)], pa.timestamp("us", "UTC"))}
    )
    views = pa.table(
        {"ts": pa.array([t0 + dt.timedelta(seconds=s) for s in (5, 20, 45, 60)], pa.timestamp("us", "UTC"))}
    )
    want = [(40, 20), (50, 20), (50, 45), (100, None)]

    def pairs(out):
        return [
            (r["left_ts"].second if r["left_ts"].minute == 0 else 100, r["right_ts"] and r["right_ts"].second)
            for r in out.to_pylist()
        ]

    for lower, upper in [
        ("-30s", "0s"),
        ("-30 seconds", "-0s"),
        (dt.timedelta(seconds=-30), dt.timedelta(0)),
    ]:
        out = windgate.band_join(clicks, views, time="ts", lower=lower, upper=upper, how="left")
        assert pairs(out) == want, (lower, upper)
    # Entirely negative bounds: impressions 25 to 35 s before the click.
    out = windgate.band_join(clicks, views, time="ts", lower="-35s", upper="-25s")
    assert pairs(out) == [(40, 5), (50, 20)]


def test_bound_errors_name_the_parameter():
    lt = pa.table({"ts": [1, 2]})
    rt = pa.table({"ts": [1, 2]})
    cases = [
        ({"lower": 3, "upper": 2}, "lower"),
        ({"window": 3, "lower": -1, "upper": 2}, "window"),
        ({"lower": -1}, "upper"),
        ({"upper": 1}, "lower"),
        ({}, "window"),
        ({"lower": -3, "upper": 2, "semantics": "scalejoin"}, "semantics"),
        ({"lower": -3, "upper": 3, "how": "outer"}, "how"),
        ({"lower": "-3x", "upper": "3s"}, "lower"),
        ({"lower": "-3s", "upper": "3s"}, "lower"),  # durations need a timestamp column
    ]
    for kwargs, param in cases:
        with pytest.raises(windgate.InvalidParameterError, match=f"^{param}"):
            windgate.band_join(lt, rt, time="ts", **kwargs)
        with pytest.raises(windgate.InvalidParameterError, match=f"^{param}"):
            j = windgate.BandJoiner(time="ts", **kwargs)
            j.push(lt, side="left")
    # Symmetric bounds are fine with the paper's semantics, and give its answer.
    a = windgate.band_join(lt, rt, time="ts", lower=-1, upper=1, semantics="scalejoin")
    assert a.equals(windgate.band_join(lt, rt, time="ts", window=1, semantics="scalejoin"))
    ts = pa.timestamp("us", "UTC")
    stamps = pa.table({"ts": pa.array([0, 1], ts)})
    with pytest.raises(windgate.InvalidParameterError, match="^lower"):
        windgate.band_join(stamps, stamps, time="ts", lower="-1s", upper="-2s")


def test_left_outer_with_unmatchable_rows_and_empty_sides():
    lt = pa.table({"ts": [1, 2, 3], "k": pa.array([1, None, 1], pa.int64()), "x": [0.0, 0.0, math.nan]})
    rt = pa.table({"ts": [2, 3], "k": pa.array([1, 1], pa.int64()), "x": [0.0, 0.0]})
    on = [windgate.eq("k", "k"), windgate.band("x", "x", 1)]
    out = windgate.band_join(lt, rt, time="ts", lower=0, upper=1, on=on, how="left")
    got = [(r["left_ts"], r["right_ts"]) for r in out.to_pylist()]
    # Left 1 meets right 2; left 2 (null key) and left 3 (NaN) match nothing and close at the end.
    assert got == [(1, 2), (2, None), (3, None)]
    empty = rt.slice(0, 0)
    out = windgate.band_join(lt, empty, time="ts", lower=0, upper=1, on=on, how="left")
    assert out.column("right_ts").null_count == 3 and out.num_rows == 3
    out = windgate.band_join(lt.slice(0, 0), rt, time="ts", lower=0, upper=1, on=on, how="left")
    assert out.num_rows == 0
