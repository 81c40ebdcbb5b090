"""Generative fault suite: for random inputs every public call returns the brute force's answer or raises a
``windgate.errors.WindgateError``, never a panic, a crash, a hang, a memory blow-up or a partial consumption.

Each case runs in an isolated child process (``fault_harness.Worker``) under a time limit and an address-space
limit; the child is reused across cases and replaced after a death or a time-out. A problem matching a fault
listed in ``fault_harness.KNOWN`` (reported, not yet fixed) only warns; every other problem fails. The
deterministic regression tests at the end hold one per fault found so far.
"""

from __future__ import annotations

import math
import os
import warnings

import fault_harness as fh
import numpy as np
import pyarrow as pa
import pytest
import scaled
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

SIGNED = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
UNSIGNED = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
TIMESTAMPS = [
    pa.timestamp("s"),
    pa.timestamp("ms", tz="UTC"),
    pa.timestamp("us", tz="Europe/Paris"),
    pa.timestamp("ns", tz="+05:30"),
]
TIME_TYPES = SIGNED + UNSIGNED + TIMESTAMPS + [pa.date32()]
VALUE_TYPES = (
    SIGNED
    + UNSIGNED
    + [pa.float32(), pa.float64(), pa.float64(), pa.bool_(), pa.string(), pa.large_string()]
    + [pa.dictionary(pa.int8(), pa.string()), pa.dictionary(pa.int32(), pa.int64())]
    + [pa.timestamp("us"), pa.date32()]
)
BY_TYPES = [
    pa.int64(),
    pa.int8(),
    pa.string(),
    pa.large_string(),
    pa.bool_(),
    pa.dictionary(pa.int16(), pa.string()),
]
FUNCS = ["count", "sum", "min", "max", "mean", "var", "std", "first", "last"]
SINGLE_STRATEGIES = ["auto", "pane", "farm", "rrcpa", "hsa", "rra", "hoa", "rrca", "reference"]
MULTI_STRATEGIES = ["mq", "mqlf", "tumlsc", "tumlmc", "wiml"]
EXTREME_INTS = [0, -1, 1, 2, 2**31, 2**40, 2**62, 2**63 - 1, 2**63, 2**64, -(2**63), 2**70]
WRONG_VALUES = [1.5, math.nan, math.inf, "abc", "", "10", None, {}, {"a": 1}, [], [1], True, b"x", object]

SETTINGS = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
    derandomize=False,
    print_blob=True,
)


def cfg(examples: int) -> settings:
    """The suite's settings with ``examples`` examples (scaled by ``WINDGATE_FAULT_EXAMPLES``, default 1)."""
    scale = float(os.environ.get("WINDGATE_FAULT_EXAMPLES", "1"))
    phases = (
        [ph for ph in Phase if ph is not Phase.shrink] if os.environ.get("WINDGATE_FAULT_NO_SHRINK") else None
    )
    return settings(
        SETTINGS,
        max_examples=max(1, int(scaled.examples(examples) * scale)),
        **({"phases": phases} if phases else {}),
    )


@pytest.fixture(scope="module")
def worker():
    w = fh.Worker()
    yield w
    w.close()


def describe(case: dict) -> str:
    """A readable repro of a case: its parameters, schemas, rows and batch cut."""
    lines = []
    for k, v in case.items():
        if isinstance(v, pa.Table):
            lines.append(
                f"  {k}: schema {v.schema.to_string(show_schema_metadata=False)!r}".replace("\\n", "; ")
            )
            lines.append(f"  {k} rows: {_clip(repr(_rows(v)), 1500)}")
        elif k == "pushes":
            lines.append("  pushes:")
            for b, s in v:
                lines.append(
                    f"    to {s!r}: {b.schema.to_string()!r} {_clip(repr(_rows(b)), 300)}".replace(
                        "\\n", "; "
                    )
                )
        elif k == "sources":
            for i, s in enumerate(v):
                lines.append(f"  source {i}: {_clip(repr(_rows(s)), 600)}")
        else:
            lines.append(f"  {k}: {v!r}")
    return "\n".join(lines)


def _rows(t: pa.Table | pa.RecordBatch) -> dict[str, list]:
    """The columns as Python lists, times as plain ints (so a timestamp beyond Python's datetime prints)."""
    return {name: fh._plain_values(col) for name, col in zip(t.column_names, t.columns, strict=True)}


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + " ..."


def run_case(worker: fh.Worker, name: str, case: dict, timeout: float = fh.TIME_LIMIT_S) -> None:
    """Runs a check in the child; unknown problems fail the test with the case, known ones warn."""
    problems = worker.run(name, case, timeout)
    # A tag whose fault was fixed (no longer in KNOWN) is a regression: it fails like any other problem.
    unknown = [p for p in problems if p.known not in fh.KNOWN]
    for p in problems:
        if p.known in fh.KNOWN:
            warnings.warn(f"known fault ({p.known}: {fh.KNOWN[p.known]}): {p.text[:300]}", stacklevel=2)
    if unknown:
        pytest.fail("\n".join(str(p) for p in unknown) + "\ncase:\n" + describe(case), pytrace=False)


# --------------------------------------------------------------------------------------------------------
# Strategies


def _int_range(t: pa.DataType, extreme: bool) -> tuple[int, int]:
    info = np.iinfo(t.to_pandas_dtype())
    lo, hi = int(info.min), int(info.max)
    if extreme:
        return lo, hi
    return max(lo, -40), min(hi, 160)


@st.composite
def column_values(draw, t: pa.DataType, n: int, nulls: bool) -> pa.Array:
    """n values of type t, nulls anywhere when ``nulls``; floats with NaN/inf/-0.0 and extremes."""
    extreme = draw(st.booleans()) if draw(st.integers(0, 5)) == 0 else False
    if pa.types.is_dictionary(t):
        inner = draw(column_values(t.value_type, n, nulls))
        return inner.dictionary_encode().cast(t)
    if pa.types.is_integer(t):
        lo, hi = _int_range(t, extreme)
        elem = st.integers(lo, hi) if not extreme else st.sampled_from([lo, hi, 0, 1, -1 if lo < 0 else 2])
    elif pa.types.is_floating(t):
        width = 32 if t == pa.float32() else 64
        elem = (
            st.floats(width=width, allow_nan=True, allow_infinity=True)
            if extreme
            else st.one_of(
                st.integers(-50, 50).map(float),
                st.floats(width=width),
                st.sampled_from([math.nan, math.inf, -0.0]),
            )
        )
    elif pa.types.is_boolean(t):
        elem = st.booleans()
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        elem = st.sampled_from(["a", "b", "", "é", "zz", "a\x00b", "B"])
    elif pa.types.is_timestamp(t):
        elem = st.integers(-(10**6), 10**6) if not extreme else st.integers(-(2**62), 2**62)
    elif pa.types.is_date32(t):
        elem = st.integers(-1000, 1000)
    else:
        raise AssertionError(t)
    if nulls:
        elem = st.one_of(st.none(), elem, elem, elem)
    vals = draw(st.lists(elem, min_size=n, max_size=n))
    if pa.types.is_timestamp(t):
        return pa.array(vals, pa.int64()).cast(t)
    if pa.types.is_date32(t):
        return pa.array(vals, pa.int32()).cast(t)
    return pa.array(vals, t)


@st.composite
def time_column(draw, t: pa.DataType, n: int, nulls: bool, order: str) -> pa.Array:
    if pa.types.is_integer(t):
        lo, hi = _int_range(t, False)
        if draw(st.integers(0, 9)) == 0:
            lo, hi = _int_range(t, True)
            elem = st.sampled_from(sorted({lo, hi, lo + 1, hi - 1, 0, min(hi, 5)}))
        else:
            elem = st.integers(lo, hi)
    elif pa.types.is_timestamp(t):
        elem = (
            st.integers(-200, 200) if draw(st.integers(0, 9)) else st.sampled_from([2**63 - 1, -(2**63), 0])
        )
    else:
        elem = st.integers(-200, 200)
    vals = draw(st.lists(elem, min_size=n, max_size=n))
    if order == "sorted":
        vals.sort()
    elif order == "near":
        vals.sort()
        vals = [v for v in vals]
        for i in range(len(vals) - 1):
            if draw(st.integers(0, 4)) == 0:
                vals[i], vals[i + 1] = vals[i + 1], vals[i]
    if nulls:
        mask = draw(st.lists(st.integers(0, 7), min_size=n, max_size=n))
        vals = [None if m == 0 else v for v, m in zip(vals, mask, strict=True)]
    if pa.types.is_timestamp(t):
        return pa.array(vals, pa.int64()).cast(t)
    if pa.types.is_date32(t):
        return pa.array(vals, pa.int32()).cast(t)
    return pa.array(vals, t)


@st.composite
def chunkings(draw, n: int) -> list[int]:
    """Batch sizes covering n rows, with empty and 1-row batches."""
    out, left = [], n
    while left > 0 and len(out) < 12:
        k = draw(st.sampled_from([0, 1, 1, 2, 3, 5, 8, left]))
        k = min(k, left)
        out.append(k)
        left -= k
    if draw(st.booleans()):
        out.insert(draw(st.integers(0, len(out))), 0)
    return out


@st.composite
def window_params(draw, temporal: bool) -> tuple[dict, bool]:
    """size/slide/offset/lateness, usually small and valid, sometimes extreme or invalid."""
    valid = True
    if draw(st.integers(0, 7)) == 0:
        size = draw(st.sampled_from(EXTREME_INTS[:10] + [-5, 3]))
        slide = draw(st.sampled_from([None, 1, 2, size, 2**20, 2**39, -1, 0]))
        offset = draw(st.sampled_from([0, 1, -1, 2**40, 2**62, -(2**62), 2**63 - 1]))
        valid = False
    else:
        size = draw(st.integers(1, 40))
        slide = draw(
            st.one_of(st.none(), st.integers(1, size), st.sampled_from([d for d in (1, 2, 5) if d <= size]))
        )
        offset = draw(st.integers(-15, 15)) if not temporal else 0
    lateness = draw(st.one_of(st.none(), st.integers(0, 12), st.sampled_from([2**40, 2**63 - 1, -1])))
    if lateness is not None and lateness < 0:
        valid = False
    return {"size": size, "slide": slide, "offset": offset, "lateness": lateness}, valid


@st.composite
def agg_cases(draw, max_rows: int = 40, multi: bool = True) -> dict:
    """A window_aggregate case: table, aggregates, parameters, batch cut and input form."""
    n = draw(st.integers(0, max_rows))
    ttype = draw(st.sampled_from(TIME_TYPES))
    temporal = pa.types.is_date32(ttype)
    null_time = draw(st.sampled_from(["error", "drop"]))
    order = draw(st.sampled_from(["sorted", "near", "any"]))
    cols = {"ts": draw(time_column(ttype, n, draw(st.integers(0, 4)) == 0, order))}
    by = None
    if draw(st.booleans()):
        cols["k"] = draw(column_values(draw(st.sampled_from(BY_TYPES)), n, draw(st.booleans())))
        by = "k"
    aggs = []
    if draw(st.booleans()):
        aggs.append(("*", ["count"]))
    for i in range(draw(st.integers(0 if aggs else 1, 2))):
        name = f"v{i}"
        cols[name] = draw(column_values(draw(st.sampled_from(VALUE_TYPES)), n, draw(st.booleans())))
        aggs.append((name, draw(st.lists(st.sampled_from(FUNCS), min_size=1, max_size=4, unique=True))))
    names = list(cols)
    if len(names) > 1 and draw(st.integers(0, 14)) == 0:
        i, j = draw(st.sampled_from([(a, b) for a in range(len(names)) for b in range(len(names)) if a != b]))
        names[j] = names[i]
    table = pa.Table.from_arrays(list(cols.values()), names=names)
    params, valid = draw(window_params(temporal))
    threads = draw(st.sampled_from([None, 1, 2, 3, None, 2]))
    strategy = draw(st.sampled_from(SINGLE_STRATEGIES + (MULTI_STRATEGIES if multi else [])))
    if strategy in MULTI_STRATEGIES and params["lateness"] is not None:
        valid = False
    params.update(time="ts", by=by, aggs=aggs, null_time=null_time, threads=threads, strategy=strategy)
    if params["lateness"] is not None and not isinstance(params["lateness"], int):
        valid = False
    case = {
        "table": table,
        "params": params,
        "chunks": draw(chunkings(n)),
        "form": draw(st.sampled_from(["table", "reader", "batch"])),
        "valid": valid,
        "span": "d" if temporal else None,
    }
    if temporal and (params["offset"] or not 0 <= (params["lateness"] or 0) <= 10**6):
        case["valid"] = False
    if multi and n and draw(st.integers(0, 3)) == 0:
        k = draw(st.integers(2, 3))
        srt = _sort_by_time(table) if order != "any" else table
        sources = [srt.filter(pa.array([(i % k) == s for i in range(n)])) for s in range(k)]
        case["sources"] = sources
    return case


@st.composite
def bad_batch(draw, table: pa.Table, case: dict) -> pa.RecordBatch | None:
    """A batch the operator should reject: a null time, a column of another type, a missing column, a late or
    out-of-order row; None when the table offers nothing to break."""
    schema = table.schema
    kind = draw(st.sampled_from(["null_ts", "wrong_type", "missing", "late"]))
    if kind == "missing" and len(schema) > 1:
        return pa.RecordBatch.from_arrays(
            [_times([1], f.type) if i == 0 else pa.array([None], f.type) for i, f in enumerate(schema)][:-1],
            names=schema.names[:-1],
        )
    if kind == "wrong_type" and len(schema) > 1:
        arrays = [_times([0], f.type) if i == 0 else pa.array([None], f.type) for i, f in enumerate(schema)]
        arrays[-1] = pa.array(["not a number"], pa.string())
        return pa.RecordBatch.from_arrays(
            arrays, names=[f.name if i else f.name for i, f in enumerate(schema)]
        )
    if kind == "late" and table.num_rows:
        ts = [t for t in fh._time_ints(table.column(0)) if t is not None]
        if not ts:
            return None
        hi = max(ts)
        lat = case["params"].get("lateness") or 0
        if not isinstance(lat, int) or lat > 10**6:
            return None
        times = [hi, hi - lat - 5]
        if not _fits(times, schema.field(0).type):
            return None  # no late time fits the column's type
        arrays = [_times(times, schema.field(0).type)] + [
            pa.array([None, None], f.type) for f in list(schema)[1:]
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
    arrays = [pa.array([None], f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _sort_by_time(table: pa.Table) -> pa.Table:
    """The table sorted by its first column (the time column), nulls last, whatever the other names are."""
    ts = fh._time_ints(table.column(0))
    order = sorted(range(len(ts)), key=lambda i: (ts[i] is None, ts[i] or 0, i))
    return table.take(pa.array(order, pa.int64()))


def _fits(vals: list[int], t: pa.DataType) -> bool:
    """Whether every value is representable in the time column's type, so no cast wraps it around."""
    bits = t.bit_width if pa.types.is_integer(t) or pa.types.is_date32(t) else 64
    if pa.types.is_unsigned_integer(t):
        lo, hi = 0, 2**bits - 1
    else:
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return all(lo <= v <= hi for v in vals)


def _times(vals: list[int], t: pa.DataType) -> pa.Array:
    if pa.types.is_integer(t):
        return pa.array(vals, t)
    if pa.types.is_timestamp(t):
        return pa.array(vals, pa.int64()).cast(t, safe=False)
    if pa.types.is_date32(t):
        return pa.array(vals, pa.int64()).cast(pa.int32(), safe=False).cast(t)
    return pa.array(vals, pa.int64()).cast(t, safe=False)


@st.composite
def agg_stream_cases(draw) -> dict:
    case = draw(agg_cases(max_rows=30, multi=False))
    table = case["table"]
    assume(len(set(table.column_names)) == len(table.column_names))
    p = case["params"]
    p["on_late"] = draw(st.sampled_from(["drop", "error"]))
    n_sources = draw(st.sampled_from([1, 1, 2, 3])) if p["lateness"] is None else 1
    if n_sources > 1:
        table = _sort_by_time(table)
        case["table"] = table
        p["strategy"] = draw(st.sampled_from(["auto", "pane", "reference", *MULTI_STRATEGIES]))
    batches = fh._batches(table, case["chunks"])
    pushes = [(b, draw(st.integers(0, n_sources - 1)) if n_sources > 1 else 0) for b in batches]
    if n_sources > 1:
        # Each source must stay sorted: give consecutive runs of batches to the sources in turn.
        pushes = [
            (b, min(n_sources - 1, i * n_sources // max(1, len(pushes)))) for i, (b, _) in enumerate(pushes)
        ]
    for _ in range(draw(st.integers(0, 2))):
        bad = draw(bad_batch(table, case))
        if bad is not None:
            pushes.insert(draw(st.integers(0, len(pushes))), (bad, draw(st.integers(0, n_sources - 1))))
    case.update(op="aggregate", pushes=pushes, n_sources=n_sources, oracle="aggregate")
    return case


@st.composite
def join_cases(draw, stream: bool = False) -> dict:
    ttype = draw(st.sampled_from([pa.int64(), pa.int32(), pa.timestamp("ms")]))

    def side(prefix: str) -> pa.Table:
        n = draw(st.integers(0, 25))
        order = draw(st.sampled_from(["sorted", "near", "any"]))
        cols = {
            "ts": draw(time_column(ttype, n, False, order)),
            "id": pa.array(range(n), pa.int64()),
            "x": draw(column_values(pa.float64(), n, draw(st.booleans()))),
            "g": draw(column_values(draw(st.sampled_from([pa.int8(), pa.string()])), n, draw(st.booleans()))),
        }
        return pa.table(cols)

    left, right = side("l"), side("r")
    on = []
    if draw(st.booleans()):
        on.append(("band", "x", "x", draw(st.sampled_from([0.0, 1.0, 5.5, math.inf]))))
    if draw(st.booleans()) and left.schema.field("g").type == right.schema.field("g").type:
        on.append(("eq", "g", "g", None))
    window = draw(st.one_of(st.integers(0, 30), st.sampled_from([2**40, 2**63 - 1, -1])))
    lateness = draw(st.sampled_from([None, None, 0, 3, 50]))
    params = {
        "time": "ts",
        "window": window,
        "lateness": lateness,
        "threads": draw(st.sampled_from([None, 1, 2, 3])),
        "strategy": draw(st.sampled_from(["auto", "scalejoin", "serial", "reference"])),
    }
    valid = window >= 0 and lateness is None and window < 2**40 and all(p[3] != math.inf for p in on)
    case = {
        "left": left,
        "right": right,
        "on": on,
        "params": params,
        "chunks": draw(chunkings(25)),
        "form": draw(st.sampled_from(["table", "reader"])),
        "valid": valid,
    }
    if stream:
        pushes = [(b, "left") for b in fh._batches(left, draw(chunkings(left.num_rows)))]
        for b in fh._batches(right, draw(chunkings(right.num_rows))):
            pushes.insert(draw(st.integers(0, len(pushes))), (b, "right"))
        if draw(st.booleans()):
            bad = pa.RecordBatch.from_arrays([pa.array(["x"]), pa.array([1])], names=["ts", "id"])
            pushes.insert(draw(st.integers(0, len(pushes))), (bad, draw(st.sampled_from(["left", "right"]))))
        case.update(op="join", pushes=pushes, oracle="join" if valid else None)
    return case


@st.composite
def preference_cases(draw) -> dict:
    n = draw(st.integers(0, 40))
    ttype = draw(st.sampled_from([pa.int64(), pa.int16(), pa.uint32(), pa.timestamp("us", tz="UTC")]))
    cols = {
        "ts": draw(
            time_column(ttype, n, draw(st.integers(0, 5)) == 0, draw(st.sampled_from(["sorted", "any"])))
        )
    }
    for d in ("a", "b"):
        t = draw(st.sampled_from([pa.float64(), pa.int32(), pa.float32(), pa.uint8()]))
        cols[d] = draw(column_values(t, n, draw(st.integers(0, 5)) == 0))
    by = None
    if draw(st.booleans()):
        cols["k"] = draw(column_values(draw(st.sampled_from(BY_TYPES)), n, draw(st.booleans())))
        by = "k"
    table = pa.table(cols)
    wp, valid = draw(window_params(False))
    query = draw(st.sampled_from(["skyline", "top_dominant", "topk"]))
    params = {
        "time": "ts",
        "size": wp["size"],
        "slide": wp["slide"],
        "offset": wp["offset"],
        "lateness": wp["lateness"],
        "by": by,
        "threads": draw(st.sampled_from([None, 1, 2])),
        "strategy": draw(st.sampled_from(["auto", "pane", "farm", "recompute"])),
        "null_time": draw(st.sampled_from(["error", "drop"])),
    }
    if query == "topk":
        params.update(
            score="a", k=draw(st.sampled_from([0, 1, 2, 5, 2**31, 2**62])), descending=draw(st.booleans())
        )
    else:
        params.update(dims=["a", "b"], prefer=draw(st.sampled_from(["min", "max", ["min", "max"]])))
        if query == "top_dominant":
            params["delta"] = draw(st.sampled_from([0, 1, 3, 2**40]))
    return {
        "query": query,
        "table": table,
        "params": params,
        "chunks": draw(chunkings(n)),
        "form": draw(st.sampled_from(["table", "reader"])),
        "valid": valid,
    }


FUZZ_TABLE = pa.table(
    {
        "ts": pa.array([0, 1, 5, 12, 13], pa.int64()),
        "k": ["a", "b", "a", None, "b"],
        "v": [1.0, 2.0, 3.0, 4.0, 5.0],
    }
)
FUNCTION_PARAMS = {
    "window_aggregate": {"time": "ts", "size": 10, "slide": None, "offset": 0, "lateness": None, "by": "k",
                         "aggs": {"*": "count", "v": ["sum"]}, "threads": None, "strategy": "auto",
                         "farm": None,
                         "on_late": "drop", "null_time": "error"},
    "WindowAggregator": {"time": "ts", "size": 10, "slide": 5, "aggs": {"v": "max"}, "lateness": 0,
                         "sources": 1,
                         "credits": 1 << 20, "threads": None, "push_source": 0, "strategy": "auto"},
    "skyline": {"time": "ts", "size": 10, "slide": 5, "dims": ["v"], "prefer": "min", "threads": None},
    "top_dominant": {"time": "ts", "size": 10, "dims": ["v"], "delta": 2, "threads": None},
    "topk": {"time": "ts", "size": 10, "slide": 2, "score": "v", "k": 2, "descending": True, "threads": None},
    "band_join": {"time": "ts", "window": 3, "threads": None, "lateness": None, "strategy": "auto",
                  "semantics": "interval"},
    "BandJoiner": {"time": "ts", "window": 3, "threads": None, "lateness": 0, "push_side": "left"},
}  # fmt: skip
INT_ONLY = {"threads", "sources", "credits", "k", "delta", "push_source"}
INT_PARAMS = {"size", "slide", "offset", "lateness", "threads", "sources", "credits", "k", "delta", "window",
              "push_source"}  # fmt: skip
STR_PARAMS = {"time", "strategy", "on_late", "null_time", "semantics", "prefer", "push_side", "by"}


@st.composite
def param_fuzz_cases(draw) -> dict:
    fn = draw(st.sampled_from(sorted(FUNCTION_PARAMS)))
    params = dict(FUNCTION_PARAMS[fn])
    wrong = False
    for name in draw(st.lists(st.sampled_from(sorted(params)), min_size=1, max_size=3, unique=True)):
        value = draw(
            st.one_of(
                st.sampled_from(EXTREME_INTS + [-5, 3, 255, 256, 10000]),
                st.sampled_from(WRONG_VALUES),
                st.sampled_from(["10s", "1h30m", "ts", "v", "k", "auto", "bogus", "adaptive", "min"]),
            )
        )
        if value is object:
            value = object()
        params[name] = value
        if name in INT_PARAMS and (
            (
                not isinstance(value, int)
                and not (value is None and name in ("slide", "lateness", "threads", "credits"))
            )
            or isinstance(value, bool)
            or (isinstance(value, int) and not -(2**63) <= value < 2**63)
        ):
            wrong = wrong or not isinstance(value, str) or name in INT_ONLY
        if name in STR_PARAMS and not isinstance(value, str) and (value is not None or name != "by"):
            wrong = True
        if name in ("aggs", "farm", "dims") and not isinstance(value, (dict, list, str, type(None))):
            wrong = True
        if name in ("aggs", "farm") and not isinstance(value, dict):
            wrong = True
    return {
        "call": "call_param_fuzz",
        "function": fn,
        "table": FUZZ_TABLE,
        "params": params,
        "wrong_types": wrong,
    }


# --------------------------------------------------------------------------------------------------------
# Generative tests


@cfg(160)
@given(case=agg_cases())
def test_window_aggregate_matches_brute_force_or_raises_windgate_error(worker, case):
    """window_aggregate over random schemas, types, nulls, batch cuts, sources and parameters returns the
    brute force's rows (in order) or raises a WindgateError; a valid call on supported types must succeed."""
    run_case(worker, "check_aggregate", case)


@cfg(100)
@given(case=agg_stream_cases())
def test_window_aggregator_rejected_push_consumes_nothing(worker, case):
    """WindowAggregator fed random batches with bad ones mixed in (null time, wrong type, missing column, late
    row): a rejected push changes nothing (per-push output equals a fresh operator's fed only the accepted
    batches) and the output equals the brute force over the accepted rows."""
    run_case(worker, "check_stream", case)


@cfg(60)
@given(case=join_cases())
def test_band_join_matches_nested_loops_or_raises_windgate_error(worker, case):
    """band_join with band/equality predicates, NaN and nulls returns the nested-loop pairs in the documented
    order or raises a WindgateError."""
    run_case(worker, "check_join", case)


@cfg(50)
@given(case=join_cases(stream=True))
def test_band_joiner_rejected_push_consumes_nothing(worker, case):
    """BandJoiner pushes (with a batch of the wrong schema mixed in) behave as if the rejected batch was never
    pushed, and the pairs equal the nested-loop brute force."""
    run_case(worker, "check_stream", case)


@cfg(60)
@given(case=preference_cases())
def test_preference_queries_match_reference_engine_or_raise_windgate_error(worker, case):
    """skyline/top_dominant/topk over random types, NaN, nulls and parameters return their reference engine's
    rows or raise a WindgateError."""
    run_case(worker, "check_preference", case)


@cfg(150)
@given(case=param_fuzz_cases())
def test_any_parameter_value_gives_a_result_or_a_windgate_error(worker, case):
    """Every public entry point with extreme ints (0, negative, 2**40, 2**62, 2**63-1, 2**70), floats,
    strings, None, dicts and lists in any parameter returns or raises a WindgateError, quickly and without
    crashing."""
    run_case(worker, "check_call", case)


@pytest.mark.slow
@cfg(4)
@given(case=agg_cases(max_rows=12, multi=False), copies=st.integers(5500, 7000))
def test_window_aggregate_batches_over_65536_rows_match_brute_force(worker, case, copies):
    """A batch larger than 65,536 rows (the case's rows repeated) gives the brute force's rows."""
    table = case["table"]
    assume(table.num_rows >= 10 and case["valid"])
    big = pa.concat_tables([table] * copies).combine_chunks()
    case.update(table=big, chunks=[big.num_rows], form="batch", rows_cap=big.num_rows)
    case.pop("sources", None)
    # Order statistics only: the exact (Fraction) sums of the brute force are too slow for 70k rows.
    params = case["params"]
    params["slide"] = None  # tumbling: one window per row keeps the brute force linear
    params["aggs"] = [
        (c, ["count", "min", "max", "first", "last"] if c != "*" else ["count"]) for c, _ in params["aggs"]
    ]
    run_case(worker, "check_aggregate", case, timeout=60)


# --------------------------------------------------------------------------------------------------------
# Deterministic regression tests, one per fault found so far


def assert_clean(worker: fh.Worker, scenario: str, timeout: float = fh.TIME_LIMIT_S) -> None:
    """Runs a regression scenario of ``fault_harness`` in the child: any problem, known or not, fails."""
    problems = worker.run("check_call", {"call": scenario, "interrupt_ok": True}, timeout)
    if problems:
        pytest.fail("\n".join(p.text for p in problems), pytrace=False)


def test_close_source_before_any_push_does_not_poison(worker):
    """close_source(1) of a 2-source WindowAggregator before any push neither panics nor poisons; later pushes
    give window_aggregate's rows; flush() of an operator that saw no rows returns an empty batch."""
    assert_clean(worker, "reg_close_source_before_push")


def test_huge_sources_is_an_invalid_parameter_not_an_abort(worker):
    """WindowAggregator(sources=2**40) raises a WindgateError naming sources instead of aborting."""
    assert_clean(worker, "reg_huge_sources")


def test_huge_size_to_slide_ratio_is_an_invalid_parameter_not_an_abort(worker):
    """window_aggregate(size=2**40, slide=1) raises a WindgateError naming size/slide instead of aborting."""
    assert_clean(worker, "reg_huge_size")


def test_huge_skyline_window_is_an_invalid_parameter_not_an_abort(worker):
    """skyline(size=2**62, slide=1) raises a WindgateError naming size/slide instead of aborting."""
    assert_clean(worker, "reg_huge_skyline")


def test_lateness_zero_keys_stay_bounded_by_open_state(worker):
    """With lateness=0 and 200k keys that never repeat, stats['keys'] stays bounded by the open panes' keys
    (at most two batches' worth), not the stream's length."""
    assert_clean(worker, "reg_lateness0_keys_bounded", timeout=60)


def test_dictionary_encoded_by_column_works_like_the_plain_column(worker):
    """A dictionary-encoded ``by`` column (pa dictionary_encode(), pandas Categorical) gives the plain
    column's rows."""
    assert_clean(worker, "reg_dictionary_by")


def test_duplicate_input_column_names_raise_an_error_naming_the_column(worker):
    """Two input columns named 'v' with aggs on 'v' raise a WindgateError naming 'v'."""
    assert_clean(worker, "reg_duplicate_names")


def test_var_overflowing_float64_is_inf_not_nan(worker):
    """var/std of [1e200, -1e200] are +inf (the exact variance exceeds float64), not NaN."""
    assert_clean(worker, "reg_var_overflow")


def test_one_operator_from_two_threads_raises_windgate_error_or_serialises(worker):
    """Two Python threads pushing into one WindowAggregator get results or WindgateErrors, never
    RuntimeError('Already borrowed')."""
    assert_clean(worker, "reg_two_threads", timeout=60)


def test_poisoned_operator_messages_do_not_nest(worker):
    """After an overflow poisons an operator, each further push raises the same-size message, not one that
    nests the previous message again."""
    assert_clean(worker, "reg_poison_not_nested")


def test_wrongly_typed_arguments_raise_windgate_errors_naming_them(worker):
    """time=0, aggs={'*': 5}, farm='as_pid', push(source=10**20), topk(k=2**70) and threads='2' raise a
    WindgateError naming the parameter, not a bare TypeError/ValueError/OverflowError."""
    assert_clean(worker, "reg_wrong_types")


@pytest.mark.slow
def test_band_join_200k_rows_lateness_zero_finishes(worker):
    """band_join(t, t, window=1, lateness=0) over 200k consecutive times returns 599,998 pairs within the
    time limit (no deadlock)."""
    assert_clean(worker, "reg_band_join_200k", timeout=30)


def test_keyboard_interrupt_in_input_generator_propagates(worker):
    """A reader over a generator that raises KeyboardInterrupt makes the call raise KeyboardInterrupt, not
    InputError."""
    assert_clean(worker, "reg_keyboard_interrupt")


def test_band_join_huge_thread_count_is_an_invalid_parameter(worker):
    """band_join(threads=2**31) raises a WindgateError naming threads instead of aborting on allocation."""
    assert_clean(worker, "reg_band_join_huge_threads")


def test_var_is_the_exact_variance_rounded_once(worker):
    """var of [20, 115, 6, 69, 13, -18] (float64 and int64) equals the exact sample variance rounded once
    (2382.1666666666665)."""
    assert_clean(worker, "reg_var_rounded_once")
