"""Isolated execution and brute-force checks for the generative fault suite (``test_faults.py``).

A case is a picklable dict. It runs in a child process (``Worker``) under a wall-clock limit and an address
space limit, so that a panic, an abort (Rust aborts on a failed allocation: exit code 134), a segfault, a
hang or a memory blow-up fails the test that generated it instead of taking pytest down. The child is reused
across cases and replaced after it dies or overruns.

The check functions (``check_*``) run in the child: they call windgate, compare whatever it returns with a
brute force (``brute.windows_of`` and exact arithmetic) and return a list of ``Problem``\\ s. The contract
they check for every public call: it either returns the brute force's answer or raises a
``windgate.errors.WindgateError`` subclass, never another exception, a panic or an "internal error"; and a
push that raises leaves the operator exactly as if the batch had never been pushed.

Problems that match a fault already reported (``KNOWN``, keyed by the fault's number) are tagged with it, so
the generative tests stay green on them while the deterministic regression tests in ``test_faults.py``
(marked ``xfail`` until the fixes land) document what must hold. Any other problem fails the test.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import pickle
import resource
import sys
import tempfile
import time as _time
import traceback
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

TIME_LIMIT_S = 20.0
#: An address-space limit, not a resident one: allocators (pyarrow's, the extension's mimalloc) and thread
#: stacks reserve address space they never touch, so a healthy worker already maps ~3 GiB. The faults this
#: catches ask for terabytes or grow without end.
MEMORY_LIMIT = 8 << 30
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Faults reported against the contract (and those this suite found on top of them), by number. A problem
#: tagged with one of these is tolerated by the generative tests (and reported as a warning); the regression
#: tests assert the fixed behaviour. Remove an entry once its fix lands, so that the generative tests guard
#: it too.
KNOWN: dict[str, str] = {}


@dataclass
class Problem:
    """One violation of the contract; ``known`` is the ``KNOWN`` item it matches, if any."""

    text: str
    known: str | None = None

    def __str__(self) -> str:
        tag = f"[known fault {self.known}] " if self.known else ""
        return tag + self.text


# --------------------------------------------------------------------------------------------------------
# The child process


def _child_limits() -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _worker_main(conn: Any, stderr_path: str) -> None:
    """Runs ``(function name, case)`` requests until the pipe closes; fd 2 goes to ``stderr_path`` so that
    panic messages printed by Rust can be inspected after each case."""
    os.environ["RUST_BACKTRACE"] = "0"
    _child_limits()
    err = open(stderr_path, "w+b", buffering=0)  # noqa: SIM115 - open for the process's lifetime
    os.dup2(err.fileno(), 2)
    import windgate  # noqa: F401 - import once, before the first case

    module = sys.modules[__name__]
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        name, case = request
        err.seek(0)
        err.truncate()
        try:
            problems = getattr(module, name)(case)
            reply: tuple = ("ok", problems)
        except BaseException as e:  # noqa: BLE001 - everything must be reported to the parent
            reply = ("checker-raised", "".join(traceback.format_exception(e))[-4000:])
        sys.stderr.flush()
        err.seek(0)
        text = err.read()[-4000:].decode("utf-8", "replace")
        conn.send((*reply, text))


class Worker:
    """A reusable child process for cases; replaced after a crash or a time-out."""

    def __init__(self) -> None:
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        fd, self._stderr_name = tempfile.mkstemp(prefix="windgate-faults-", suffix=".stderr")
        os.close(fd)

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker_main, args=(child, self._stderr_name), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def stop(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._proc.kill()
            self._proc.join(5)
            self._proc = None

    def close(self) -> None:
        """Stops the child and removes its stderr file."""
        self.stop()
        with contextlib.suppress(OSError):
            os.unlink(self._stderr_name)

    def _stderr_tail(self) -> str:
        with open(self._stderr_name, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")

    def run(self, name: str, case: dict, timeout: float = TIME_LIMIT_S) -> list[Problem]:
        """Runs ``name(case)`` in the child; a crash, a time-out or a panic message is a problem."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        start = _time.monotonic()
        self._conn.send((name, case))
        if not self._conn.poll(timeout):
            self.stop()
            return [
                Problem(f"no answer within {timeout:.0f} s (hang or runaway computation)", _known_crash(case))
            ]
        try:
            status, payload, stderr = self._conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            self._proc.join(5)
            code = self._proc.exitcode
            tail = self._stderr_tail()
            self._proc = None
            what = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            if code == 134 or "memory allocation of" in tail:
                what += " (abort: failed allocation or panic in a thread)"
            return [
                Problem(
                    f"child process died after {_time.monotonic() - start:.1f} s: {what}; stderr tail:\n"
                    f"{_clip(tail, 1200)}",
                    _known_crash(case, tail),
                )
            ]
        problems = list(payload) if status == "ok" else [Problem(f"the checker itself raised:\n{payload}")]
        if "panicked at" in stderr:
            problems.append(
                Problem(f"a Rust panic was printed:\n{_clip(stderr, 1200)}", _known_panic(case, stderr))
            )
        return problems


def _clip(text: str, n: int) -> str:
    lines = [ln for ln in text.splitlines() if not ln.startswith("  ")]
    text = "\n".join(lines)
    return text if len(text) <= n else text[:n] + " ..."


def _known_crash(case: dict, stderr: str = "") -> str | None:
    if case.get("known_crash"):
        return case["known_crash"]
    params = case.get("params") or {}
    if _huge_params(params):
        return "2"
    threads = params.get("threads")
    if case.get("function") in ("band_join", "BandJoiner") and isinstance(threads, int) and threads > 254:
        return "12"
    return None


def _known_panic(case: dict, stderr: str) -> str | None:
    if "bound before emitting" in stderr:
        return "1"
    return None


def _huge_params(params: dict) -> bool:
    """Window shapes whose pane count or window count per row is astronomically large (known fault 2)."""
    vals = {k: params.get(k) for k in ("size", "slide", "sources")}
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in vals.values()):
        return False
    size, slide, sources = vals["size"], vals["slide"], vals["sources"]
    if sources is not None and sources > 2**20:
        return True
    if size is None or size <= 0:
        return False
    slide = size if slide is None else slide
    return slide > 0 and size // math.gcd(size, slide) > 2**20


# --------------------------------------------------------------------------------------------------------
# Helpers shared by the checks (run in the child)


def _windgate_error(e: BaseException) -> bool:
    from windgate.errors import WindgateError

    return isinstance(e, WindgateError)


def _describe_error(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__name__}: {_clip(str(e), 600)}"


def classify_error(e: BaseException, case: dict) -> Problem | None:
    """``None`` when ``e`` is an acceptable outcome (a plain WindgateError), else the problem it shows."""
    from windgate.errors import OperatorPoisonedError

    msg = str(e)
    if isinstance(e, OperatorPoisonedError) and ("internal error" in msg or "panicked" in msg):
        known = "1" if "bound before emitting" in msg else None
        return Problem(f"internal error: {_describe_error(e)}", known)
    if _windgate_error(e):
        if msg.count("the operator failed earlier") > 1:
            return Problem(f"nested poisoned message: {_describe_error(e)}", "8")
        return None
    known = None
    if isinstance(e, (TypeError, OverflowError, ValueError)) and case.get("wrong_types"):
        known = "9"
    if isinstance(e, RuntimeError) and "Already borrowed" in msg:
        known = "7"
    return Problem(f"non-windgate exception: {_describe_error(e)}", known)


def _must_succeed_problem(e: BaseException, case: dict) -> Problem:
    msg = str(e)
    known = None
    if "Dictionary(" in msg and "must match schema types" in msg:
        known = "4"
    return Problem(f"a valid call raised {_describe_error(e)}", known)


def _time_ints(col: Any) -> list[int | None]:
    """A time-like column (int, timestamp, date) as Python ints in its own unit."""
    import pyarrow as pa

    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if pa.types.is_timestamp(col.type) or pa.types.is_date64(col.type):
        col = col.cast(pa.int64())
    elif pa.types.is_date32(col.type):
        col = col.cast(pa.int32())
    return col.to_pylist()


def _plain_values(col: Any) -> list[Any]:
    """Column values for comparison: timestamps and dates as ints, dictionaries decoded."""
    import pyarrow as pa

    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return _time_ints(col)
    return col.to_pylist()


def _same(a: Any, b: Any, ulps: int = 0) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if a == b:
            return True
        if ulps and math.isfinite(a) and math.isfinite(b):
            return abs(a - b) <= ulps * math.ulp(max(abs(a), abs(b)))
        return False
    return a == b


def _round_float(x: Fraction, f32: bool) -> float:
    try:
        v = float(x)
    except OverflowError:
        v = math.inf if x > 0 else -math.inf
    if f32:
        import numpy as np

        v = float(np.float32(v))
    return v


def _float_special(xs: list[float]) -> float | None:
    """NaN/inf result of a sum over xs (IEEE rules), or None when all are finite."""
    if any(math.isnan(x) for x in xs):
        return math.nan
    pos = any(x == math.inf for x in xs)
    neg = any(x == -math.inf for x in xs)
    if pos and neg:
        return math.nan
    if pos:
        return math.inf
    if neg:
        return -math.inf
    return None


class ExpectError(Exception):
    """The brute force says the call must fail (an int64 overflow, a window beyond the int64 range)."""


class NoOracle(Exception):
    """The brute force cannot decide this case (too many windows per row, ...)."""


def _agg_value(func: str, members: list[tuple[tuple, Any]], is_float: bool, f32: bool) -> tuple[Any, int]:
    """The value of ``func`` over ``members`` ((order key, value) pairs); the second item is the ulp slack
    allowed when comparing."""
    vals = [(k, v) for k, v in members if v is not None]
    xs = [v for _, v in vals]
    if func == "count":
        return len(xs), 0
    if not xs:
        return None, 0
    if func == "first":
        return min(vals, key=lambda kv: kv[0])[1], 0
    if func == "last":
        return max(vals, key=lambda kv: kv[0])[1], 0
    if func in ("min", "max"):
        if is_float:
            nans = [x for x in xs if math.isnan(x)]
            finite = [x for x in xs if not math.isnan(x)]
            if func == "max":
                return (math.nan if nans else max(finite)), 0
            return (min(finite) if finite else math.nan), 0
        return (min(xs) if func == "min" else max(xs)), 0
    if isinstance(xs[0], bool):
        xs = [int(x) for x in xs]
    if func == "sum":
        if is_float:
            special = _float_special(xs)
            return (special if special is not None else _round_float(sum(map(Fraction, xs)), f32)), 0
        s = sum(xs)
        if not INT64_MIN <= s <= INT64_MAX:
            raise ExpectError(f"int64 sum overflow ({s})")
        if sum(abs(x) for x in xs) > INT64_MAX:
            raise NoOracle("an intermediate int64 sum may overflow")
        return s, 0
    if func == "mean":
        if is_float:
            special = _float_special(xs)
            if special is not None:
                return special, 0
        return _round_float(sum(map(Fraction, xs)) / len(xs), f32), 0
    if func in ("var", "std"):
        if len(xs) < 2:
            return None, 0
        if is_float and not all(math.isfinite(x) for x in xs):
            return math.nan, 0
        fx = [Fraction(x) for x in xs]
        mean = sum(fx) / len(fx)
        var = sum((x - mean) ** 2 for x in fx) / (len(fx) - 1)
        v = _round_float(var, f32)
        # var is within an ulp of the exact value (README), std an ulp more for the square root.
        if func == "var":
            return v, 1
        if not math.isfinite(v) or f32 or v == 0:
            return (math.sqrt(v) if math.isfinite(v) else v), 3
        # std is the root of var, which is within an ulp: below the smallest normal double that ulp is
        # large next to var, and the root carries it (README).
        root = math.sqrt(v)
        spread = max(root - math.sqrt(math.nextafter(v, 0)), math.sqrt(math.nextafter(v, math.inf)) - root)
        return root, 3 + math.ceil(spread / math.ulp(root))
    raise ValueError(func)


MULTI_STRATEGIES = {"mq", "mqlf", "tumlsc", "tumlmc", "wiml"}
NUMERIC_FUNCS = {"sum", "mean", "var", "std"}
ORDER_FUNCS = {"min", "max", "first", "last"}


def _kind(t: Any) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return "dict"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "time"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    return "other"


def func_supported(func: str, t: Any) -> bool:
    """Whether the README promises ``func`` on a column of type ``t`` (so an error would be a fault)."""
    k = _kind(t)
    if func == "count":
        return True
    if func in NUMERIC_FUNCS:
        return k in ("int", "float")
    if func in ORDER_FUNCS:
        return k in ("int", "float", "time")
    return False


def brute_aggregate(
    sources: list[Any],
    *,
    time: str,
    size: int,
    slide: int,
    offset: int,
    by: str | None,
    aggs: list,
    rows_cap=4000,
) -> tuple[list[dict], dict[str, int]]:
    """Expected rows of ``window_aggregate(sources, ...)`` (time-sorted sources merged in the total order
    ``(ts, source, position)``) as dicts of plain values, and the ulp slack per output column."""
    from brute import windows_of

    if size // slide > 64:
        raise NoOracle("too many windows per row for the brute force")
    rows: list[tuple[int, int, int, dict]] = []
    float_cols: dict[str, tuple[bool, bool]] = {}
    for si, src in enumerate(sources):
        ts = _time_ints(src.column(time))
        cols = {name: _plain_values(src.column(name)) for name, _ in aggs if name != "*"}
        if by:
            cols[by] = _plain_values(src.column(by))
        for name, _ in aggs:
            if name != "*":
                t = src.schema.field(name).type
                float_cols[name] = (_kind(t) == "float", False)
        for i, t in enumerate(ts):
            if t is None:
                continue
            rows.append((t, si, i, {c: v[i] for c, v in cols.items()}))
    if len(rows) > rows_cap:
        raise NoOracle("too many rows for the brute force")
    groups: dict[tuple, list] = {}
    for t, si, i, rec in rows:
        # The engine's domain (WindowSpec::check_range): the slide-grid point at or below t, less one window,
        # stays inside int64, so that its unchecked pane arithmetic cannot overflow.
        if ((t - offset % slide) // slide) * slide - size + offset % slide < INT64_MIN:
            raise ExpectError(f"time {t} is within a window of the int64 minimum")
        for start in windows_of(t, size, slide, offset):
            if start < INT64_MIN or start + size > INT64_MAX:
                raise ExpectError(f"window [{start}, {start + size}) leaves the int64 range")
            groups.setdefault((start, rec[by] if by else None), []).append(((t, si, i), rec))
    out, slack = [], {}
    for (start, key), members in sorted(groups.items(), key=lambda kv: (kv[0][0], _null_first(kv[0][1]))):
        rec: dict[str, Any] = {}
        if by:
            rec[by] = key
        rec["window_start"] = start
        rec["window_end"] = start + size
        for name, funcs in aggs:
            for f in funcs:
                if name == "*":
                    rec["count"] = len(members)
                    continue
                is_float, f32 = float_cols[name]
                value, ulps = _agg_value(f, [(k, r[name]) for k, r in members], is_float, f32)
                rec[f"{f}_{name}"] = value
                slack[f"{f}_{name}"] = max(slack.get(f"{f}_{name}", 0), ulps)
        out.append(rec)
    return out, slack


def _f32_columns(schema: Any) -> frozenset:
    import pyarrow as pa

    return frozenset(f.name for f in schema if f.type == pa.float32())


def _null_first(v: Any) -> tuple:
    return (0,) if v is None else (1, v)


def table_rows(table: Any) -> list[dict]:
    """Rows of an output table with plain values (timestamps and dates as ints)."""
    cols = {name: _plain_values(table.column(i)) for i, name in enumerate(table.column_names)}
    return [{c: v[i] for c, v in cols.items()} for i in range(table.num_rows)]


def compare_rows(
    got: list[dict], expected: list[dict], slack: dict[str, int], what: str, f32: frozenset = frozenset()
) -> Problem | None:
    """``got`` equals ``expected`` row by row; the exact results of columns in ``f32`` (float32 outputs) are
    rounded to float32 first."""
    if len(got) != len(expected):
        return Problem(
            f"{what}: {len(got)} rows, the brute force has {len(expected)}\n"
            f"  got      {_clip(repr(got[:6]), 700)}\n  expected {_clip(repr(expected[:6]), 700)}"
        )
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if set(g) != set(e):
            return Problem(f"{what}: columns {sorted(g)}, expected {sorted(e)}")
        for c in e:
            ev = e[c]
            if c in f32 and isinstance(ev, float):
                import numpy as np

                ev = float(np.float32(ev))
            if not _same(g[c], ev, slack.get(c, 0)):
                near = " (_off_by_ulps <= 4)" if _same(g[c], ev, 4) else ""
                return Problem(
                    f"{what}: row {i} column {c!r} is {g[c]!r}, expected {e[c]!r}{near}\n  row {g}\n  exp {e}"
                )
    return None


def _duplicates(schema: Any) -> set[str]:
    seen, dup = set(), set()
    for n in schema.names:
        (dup if n in seen else seen).add(n)
    return dup


def make_input(table: Any, form: str, chunks: list[int]) -> Any:
    """``table`` cut into batches of ``chunks`` rows (the rest in one), as a Table, reader or batch."""
    import pyarrow as pa

    batches, pos = [], 0
    for n in chunks:
        batches.append(table.slice(pos, n).combine_chunks().to_batches() or [_empty_batch(table.schema)])
        pos += n
    if pos < table.num_rows or not batches:
        batches.append(table.slice(pos).combine_chunks().to_batches() or [_empty_batch(table.schema)])
    flat = [b for bs in batches for b in bs]
    if form == "reader":
        return pa.RecordBatchReader.from_batches(table.schema, flat)
    if form == "batch":
        return (
            pa.Table.from_batches(flat, table.schema).combine_chunks().to_batches()[0]
            if table.num_rows
            else (_empty_batch(table.schema))
        )
    return pa.Table.from_batches(flat, table.schema)


def _empty_batch(schema: Any) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _batches(table: Any, chunks: list[int]) -> list[Any]:
    out, pos = [], 0
    for n in chunks:
        part = table.slice(pos, n)
        out.append(part.combine_chunks().to_batches()[0] if part.num_rows else _empty_batch(table.schema))
        pos += n
    if pos < table.num_rows:
        out.append(table.slice(pos).combine_chunks().to_batches()[0])
    return out


# --------------------------------------------------------------------------------------------------------
# Window aggregation


def _agg_expectation(case: dict, sources: list[Any]) -> tuple[str, Any]:
    """("rows", (rows, slack)), ("error", reason), ("any", reason: no oracle) for an aggregation case."""
    p = case["params"]
    table = sources[0]
    if not case.get("valid", False):
        return "any", "parameters outside the promised domain"
    names = {p["time"], *([p["by"]] if p.get("by") else []), *(c for c, _ in p["aggs"] if c != "*")}
    dups = _duplicates(table.schema) & names
    if dups:
        return "error", f"duplicate column name(s) {sorted(dups)} referenced"
    for c, funcs in p["aggs"]:
        if c != "*" and not all(func_supported(f, table.schema.field(c).type) for f in funcs):
            return "any", f"function not promised on {table.schema.field(c).type}"
    for c, funcs in p["aggs"]:
        if c != "*" and set(funcs) - {"count"} and any(_beyond_int64(src.column(c)) for src in sources):
            # Beyond the README's limit (integers within int64): refused with a named error, or, where the row
            # is dropped before its value is read (a null time), not read at all.
            return "any", f"column {c!r} holds an integer beyond int64"
    nulls = any(src.column(p["time"]).null_count for src in sources)
    if nulls and p.get("null_time", "error") == "error":
        return "error", "null in the time column"
    multi = p.get("strategy") in MULTI_STRATEGIES
    if (len(sources) > 1 or multi) and any(not _sorted(_time_ints(s.column(p["time"]))) for s in sources):
        return "any", "an unsorted source of several"
    try:
        if p.get("lateness") is not None:
            _check_no_late(sources, p)
        return "rows", brute_aggregate(
            sources,
            time=p["time"],
            size=p["size"],
            slide=p.get("slide") or p["size"],
            offset=p.get("offset", 0),
            by=p.get("by"),
            aggs=p["aggs"],
            rows_cap=case.get("rows_cap", 4000),
        )
    except ExpectError as e:
        return "error", str(e)
    except NoOracle as e:
        return "any", str(e)


def _beyond_int64(col: Any) -> bool:
    """Whether an unsigned integer column holds a value above the int64 range."""
    import pyarrow as pa

    t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if not pa.types.is_uint64(t):
        return False
    values = col.cast(t) if pa.types.is_dictionary(col.type) else col
    return any(v is not None and v > INT64_MAX for v in values.to_pylist())


def _sorted(xs: list) -> bool:
    xs = [x for x in xs if x is not None]
    return all(a <= b for a, b in zip(xs, xs[1:], strict=False))


def _call_kwargs(case: dict) -> dict:
    p = dict(case["params"])
    kw = {k: v for k, v in p.items() if k not in ("aggs", "brute_size")}
    kw["aggs"] = case.get("raw_aggs", {c: list(f) for c, f in p["aggs"]})
    if case.get("span") is not None:
        for k in ("size", "slide", "offset", "lateness"):
            if isinstance(kw.get(k), int):
                kw[k] = f"{kw[k]}{case['span']}"
    kw = as_durations(kw, case["table"].schema, ("size", "slide", "offset", "lateness"))
    kw.update(case.get("extra_kwargs", {}))
    return kw


def as_durations(kw: dict, schema: Any, names: tuple[str, ...]) -> dict:
    """The int time parameters ``names`` of ``kw`` as duration strings in the unit of the time column (in
    ``schema``) when it is a timestamp or date column, where a nonzero plain int is an error (docs/time.md):
    the cases draw ints, meant in the column's unit."""
    import pyarrow as pa

    time = kw.get("time")
    if not isinstance(time, str) or schema.names.count(time) != 1:
        return kw  # the operator names the missing or ambiguous column
    t = schema.field(time).type
    if pa.types.is_timestamp(t):
        suffix = t.unit
    elif pa.types.is_date32(t):
        suffix = "d"
    elif pa.types.is_date64(t):
        suffix = "ms"
    else:
        return kw
    out = dict(kw)
    for k in names:
        v = out.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v != 0:
            out[k] = f"{v}{suffix}"
    return out


def check_aggregate(case: dict) -> list[Problem]:
    """``window_aggregate`` over the case's table (cut into batches; a Table, reader or batch, or split over
    sources) returns the brute force's rows or raises a WindgateError; a valid call must succeed."""
    import windgate

    table = case["table"]
    sources = case.get("sources") or [table]
    data = [make_input(s, case.get("form", "table"), case.get("chunks", [])) for s in sources]
    kw = _call_kwargs(case)
    verdict, detail = _agg_expectation(case, sources)
    call = lambda: windgate.window_aggregate(data if len(data) > 1 else data[0], **kw)  # noqa: E731
    out, problems = _attempt(call, case, must_succeed=verdict == "rows")
    if problems is not None:
        return problems
    if verdict == "error":
        known = "5" if detail.startswith("duplicate") else ("6" if "var" in detail else None)
        return [Problem(f"returned {out.num_rows} rows where an error was expected ({detail})", known)]
    if verdict == "rows":
        rows, slack = detail
        problem = compare_rows(table_rows(out), rows, slack, "window_aggregate", _f32_columns(out.schema))
        if problem:
            problem.known = _known_mismatch(problem.text)
            return [problem]
    return []


def _attempt(call: Any, case: dict, must_succeed: bool = False) -> tuple[Any, list[Problem] | None]:
    """Runs ``call()``: ``(its result, None)``, or ``(None, problems)`` when it raised: the problem its
    exception shows (not a WindgateError, a panic text), or, with ``must_succeed``, that it raised at all."""
    try:
        return call(), None
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001
        problem = classify_error(e, case)
        if problem:
            return None, [problem]
        return None, [_must_succeed_problem(e, case)] if must_succeed else []


def _known_mismatch(text: str, got: Any = None, expected: Any = None) -> str | None:
    if ("'var_" in text or "'std_" in text) and "is nan, expected inf" in text:
        return "6"
    if ("'var_" in text or "'std_" in text) and "_off_by_ulps" in text:
        return "13"
    return None


def _stream_once(make: Any, pushes: list[tuple[Any, int]], push_kw: str) -> tuple[list, list]:
    """Feeds ``pushes`` ((batch, source)) to a fresh operator; returns per-push outcomes and the flush."""
    op = make()
    outs = []
    for batch, src in pushes:
        try:
            outs.append(("ok", op.push(batch, **{push_kw: src})))
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            outs.append(("err", e))
    try:
        flushed = ("ok", op.flush())
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        flushed = ("err", e)
    return outs, [flushed, op]


def _rb_rows(batches: list[Any]) -> list[dict]:
    import pyarrow as pa

    rows: list[dict] = []
    for b in batches:
        if b is None:
            continue
        rows.extend(table_rows(pa.Table.from_batches([b])))
    return rows


def check_stream(case: dict) -> list[Problem]:
    """A streaming operator (WindowAggregator, BandJoiner, a preference query) fed the case's pushes, some of
    them bad: every call returns or raises a WindgateError; a rejected push leaves the operator as if it had
    never been pushed (the same per-push output as a fresh operator fed only the accepted pushes); the
    concatenated output equals the brute force over the accepted rows when the case has an oracle."""
    import windgate

    op_kind = case["op"]
    kw = _call_kwargs(case) if op_kind == "aggregate" else dict(case["params"])
    push_kw = "side" if op_kind == "join" else "source"
    if op_kind == "aggregate":
        kw.pop("sources", None)

        def make() -> Any:
            return windgate.WindowAggregator(**kw, sources=case.get("n_sources", 1))

    elif op_kind == "join":
        kw["on"] = _predicates(case.get("on", []))

        def make() -> Any:
            return windgate.BandJoiner(**kw)

    else:
        cls = {"skyline": windgate.SkylineQuery, "topk": windgate.TopKQuery}[op_kind]

        def make() -> Any:
            return _PrefAdapter(cls(**kw))

    streamed, problems = _attempt(lambda: _stream_once(make, case["pushes"], push_kw), case)
    if problems is not None:
        return problems
    outs, (flushed, _op) = streamed
    problems: list[Problem] = []
    poisoned_ok = False
    for i, (status, value) in enumerate([*outs, flushed]):
        if status == "err":
            problem = classify_error(value, case)
            if problem:
                problem.text = f"call {i} ({'flush' if i == len(outs) else 'push'}): {problem.text}"
                problems.append(problem)
            if type(value).__name__ == "WindgateOverflowError":
                poisoned_ok = True
    if problems:
        return problems
    if poisoned_ok:
        return []
    accepted = [case["pushes"][i] for i, (s, _) in enumerate(outs) if s == "ok"]
    if len(accepted) < len(outs):
        outs2, (flushed2, _) = _stream_once(make, accepted, push_kw)
        got = [v for s, v in outs if s == "ok"] + [flushed[1] if flushed[0] == "ok" else flushed[1]]
        ref = [v if s == "ok" else v for s, v in outs2] + [flushed2[1]]
        for j, (g, r) in enumerate(zip(got, ref, strict=True)):
            if isinstance(r, BaseException) or isinstance(g, BaseException):
                same = type(g) is type(r)
            else:
                same = compare_rows(_rb_rows([g]), _rb_rows([r]), {}, "") is None
            if not same:
                rejected = [i for i, (s, _) in enumerate(outs) if s == "err"]
                first = str(outs[rejected[0]][1])
                return [
                    Problem(
                        f"partial consumption: after the rejected push(es) {rejected} "
                        f"({_describe_error(outs[rejected[0]][1])}), accepted call {j} returned "
                        f"{_short(g)} but a fresh operator fed only the accepted batches returned "
                        f"{_short(r)}",
                        "4" if "Dictionary(" in first else None,
                    )
                ]
    if flushed[0] == "err":
        return []
    oracle = case.get("oracle")
    if oracle is None:
        return []
    got_rows = _rb_rows([v for s, v in outs if s == "ok"] + [flushed[1]])
    try:
        expected, slack = _stream_oracle(
            case, [case["pushes"][i] for i, (s, _) in enumerate(outs) if s == "ok"]
        )
    except (NoOracle, ExpectError):
        return []
    problem = compare_rows(got_rows, expected, slack, f"{op_kind} stream")
    if problem:
        problem.known = _known_mismatch(problem.text)
        return [problem]
    return []


def _short(v: Any) -> str:
    if isinstance(v, BaseException):
        return _describe_error(v)
    return _clip(repr(_rb_rows([v])[:4]), 400)


class _PrefAdapter:
    def __init__(self, q: Any) -> None:
        self.q = q

    def push(self, batch: Any, source: int = 0) -> Any:
        return self.q.push(batch)

    def flush(self) -> Any:
        return self.q.flush()


def _stream_oracle(case: dict, accepted: list[tuple[Any, Any]]) -> tuple[list[dict], dict]:
    import pyarrow as pa

    oracle = case["oracle"]
    if oracle == "aggregate":
        n = case.get("n_sources", 1)
        schema = case["table"].schema
        per_source: list[list[Any]] = [[] for _ in range(n)]
        for b, s in accepted:
            if b.schema != schema:
                raise NoOracle("an accepted batch of another schema")
            per_source[s].append(b)
        sources = [pa.Table.from_batches(bs, schema) for bs in per_source]
        p = case["params"]
        if any(s.column(p["time"]).null_count for s in sources) and p.get("null_time", "error") == "error":
            raise NoOracle("null time accepted")
        verdict, detail = _agg_expectation(case, sources)
        if verdict != "rows":
            raise NoOracle(str(detail))
        return detail
    if oracle == "join":
        lefts = [b for b, s in accepted if s == "left"]
        rights = [b for b, s in accepted if s == "right"]
        ls, rs = case["left"].schema, case["right"].schema
        if any(b.schema != ls for b in lefts) or any(b.schema != rs for b in rights):
            raise NoOracle("an accepted batch of another schema")
        return brute_join(pa.Table.from_batches(lefts, ls), pa.Table.from_batches(rights, rs), case), {}
    raise NoOracle(oracle)


def _check_no_late(sources: list[Any], p: dict) -> None:
    """The brute force only covers streams without late rows (a row is late when it is more than
    ``lateness`` behind the largest time before it)."""
    k = p["lateness"]
    if not isinstance(k, int):
        raise NoOracle("adaptive lateness")
    for s in sources:
        m = None
        for t in _time_ints(s.column(p["time"])):
            if t is None:
                continue
            if m is not None and t < m - k:
                raise NoOracle("late rows")
            m = t if m is None else max(m, t)


# --------------------------------------------------------------------------------------------------------
# Band join


def _predicates(on: list[tuple]) -> list[Any]:
    import windgate

    return [windgate.band(a, b, eps) if kind == "band" else windgate.eq(a, b) for kind, a, b, eps in on]


def brute_join(left: Any, right: Any, case: dict) -> list[dict]:
    """Nested loops over the interval semantics: ``|l.ts - r.ts| <= window`` and every predicate; ordered by
    ``(ts, trigger position, partner position)`` in the merged order ``(time, left before right,
    arrival)``."""
    p = case["params"]
    tcol = p["time"] if isinstance(p["time"], str) else p["time"][0]
    w = p["window"]
    if left.num_rows * right.num_rows > 250_000:
        raise NoOracle("too many pairs for the brute force")
    lt, rt = _time_ints(left.column(tcol)), _time_ints(right.column(tcol))
    lrows, rrows = table_rows(left), table_rows(right)
    out = []
    for i, a in enumerate(lt):
        if a is None:
            continue
        for j, b in enumerate(rt):
            if b is None or abs(a - b) > w:
                continue
            if not all(_pred(kind, lrows[i][x], rrows[j][y], eps) for kind, x, y, eps in case.get("on", [])):
                continue
            kl, kr = (a, 0, i), (b, 1, j)
            trig, part = (kl, kr) if kl > kr else (kr, kl)
            rec = {f"left_{c}": v for c, v in lrows[i].items()}
            rec.update({f"right_{c}": v for c, v in rrows[j].items()})
            rec["ts"] = max(a, b)
            out.append(((max(a, b), trig, part), rec))
    out.sort(key=lambda kv: kv[0])
    return [rec for _, rec in out]


def _pred(kind: str, x: Any, y: Any, eps: float | None) -> bool:
    if x is None or y is None:
        return False
    if kind == "eq":
        if isinstance(x, float) and (math.isnan(x) or math.isnan(y)):
            return False
        return x == y
    fx, fy = float(x), float(y)
    if math.isnan(fx) or math.isnan(fy):
        return False
    return abs(fx - fy) <= eps


def check_join(case: dict) -> list[Problem]:
    """``band_join`` returns the nested-loop brute force's pairs in its order or raises a WindgateError."""
    import windgate

    left = make_input(case["left"], case.get("form", "table"), case.get("chunks", []))
    right = make_input(case["right"], case.get("form", "table"), case.get("chunks", []))
    kw = as_durations(dict(case["params"]), case["left"].schema, ("window", "lower", "upper", "lateness"))
    kw["on"] = _predicates(case.get("on", []))
    call = lambda: windgate.band_join(left, right, **kw)  # noqa: E731
    out, problems = _attempt(call, case, must_succeed=bool(case.get("valid")))
    if problems is not None:
        return problems
    if not case.get("valid"):
        return []
    try:
        expected = brute_join(case["left"], case["right"], case)
    except NoOracle:
        return []
    problem = compare_rows(table_rows(out), expected, {}, "band_join")
    return [problem] if problem else []


# --------------------------------------------------------------------------------------------------------
# Preference queries (no brute force in brute.py: compared with strategy="reference")


def check_preference(case: dict) -> list[Problem]:
    """skyline/top_dominant/topk return the rows of their ``strategy="reference"`` engine or raise a
    WindgateError (the same class as the reference's when it raises too)."""
    import windgate

    fn = getattr(windgate, case["query"])
    kw = as_durations(dict(case["params"]), case["table"].schema, ("size", "slide", "offset", "lateness"))
    data = make_input(case["table"], case.get("form", "table"), case.get("chunks", []))
    out, problems = _attempt(lambda: fn(data, **kw), case)
    if problems is not None:
        return problems
    if not case.get("valid") or case["table"].num_rows > 400:
        return []
    ref_kw = {**kw, "strategy": "reference", "threads": 1}
    try:
        ref = fn(case["table"], **ref_kw)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        problem = classify_error(e, case)
        if problem:
            return [problem]
        return [
            Problem(f"returned {out.num_rows} rows where the reference engine raised {_describe_error(e)}")
        ]
    problem = compare_rows(table_rows(out), table_rows(ref), {}, f"{case['query']} vs its reference engine")
    return [problem] if problem else []


# --------------------------------------------------------------------------------------------------------
# Arbitrary calls (parameter fuzzing and the regression scenarios)


def check_call(case: dict) -> list[Problem]:
    """``case["call"]`` (a function of this module) returns a list of problems; a non-WindgateError escaping
    it is classified like any other."""
    try:
        return globals()[case["call"]](case)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt) and not case.get("interrupt_ok"):
            return [Problem("KeyboardInterrupt escaped")]
        if isinstance(e, KeyboardInterrupt):
            raise
        problem = classify_error(e, case)
        return [problem] if problem else []


def call_param_fuzz(case: dict) -> list[Problem]:
    """Calls the named public function with the case's keyword arguments: any outcome but a WindgateError
    or a result is a problem (the results themselves are checked by the other checks)."""
    import windgate

    fn = case["function"]
    data = case["table"]
    kw = dict(case["params"])
    if fn in ("band_join",):
        kw["on"] = _predicates(case.get("on", []))
        windgate.band_join(data, data, **kw)
    elif fn == "WindowAggregator":
        src = kw.pop("push_source", 0)
        op = windgate.WindowAggregator(**kw)
        op.push(data, source=src)
        op.flush()
    elif fn == "BandJoiner":
        side = kw.pop("push_side", "left")
        kw["on"] = _predicates(case.get("on", []))
        op = windgate.BandJoiner(**kw)
        op.push(data, side=side)
        op.flush()
    else:
        getattr(windgate, fn)(data, **kw)
    return []


def run_local(name: str, case: dict) -> list[Problem]:
    """Runs a check in this process (for debugging a case printed by a failing test)."""
    return globals()[name](case)


def dumps(case: dict) -> bytes:
    return pickle.dumps(case)


# --------------------------------------------------------------------------------------------------------
# Regression scenarios for the known faults (run in the child through ``check_call``; each returns problems)


def _expect_windgate_error(fn: Any, what: str, names: tuple[str, ...] = ()) -> list[Problem]:
    """``fn()`` returns or raises a WindgateError (not poisoned, not internal) naming one of ``names``."""
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        if not _windgate_error(e):
            return [Problem(f"{what}: raised {_describe_error(e)}, not a WindgateError")]
        if type(e).__name__ == "OperatorPoisonedError":
            return [Problem(f"{what}: poisoned: {_describe_error(e)}")]
        if names and not any(n in str(e) for n in names):
            return [Problem(f"{what}: the message does not name {names}: {_describe_error(e)}")]
        return []
    return [] if not names else [Problem(f"{what}: returned instead of raising an error naming {names}")]


def reg_close_source_before_push(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    t = pa.table({"ts": pa.array([1, 2, 15], pa.int64())})
    op = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, sources=2)
    problems = []
    try:
        op.close_source(1)
        got = [op.push(t, source=0), op.flush()]
    except BaseException as e:  # noqa: BLE001
        return [Problem(f"close_source(1) before any push, then push/flush: {_describe_error(e)}")]
    rows = _rb_rows(got)
    want = table_rows(windgate.window_aggregate(t, time="ts", size=10, aggs={"*": "count"}))
    if rows != want:
        problems.append(Problem(f"after close_source(1): {rows}, expected {want}"))
    empty = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}).flush()
    if not isinstance(empty, pa.RecordBatch) or empty.num_rows:
        problems.append(Problem(f"flush() of an operator that saw no rows returned {empty!r}"))
    return problems


def reg_huge_sources(case: dict) -> list[Problem]:
    import windgate

    return _expect_windgate_error(
        lambda: windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, sources=2**40),
        "WindowAggregator(sources=2**40)",
        ("sources",),
    )


def reg_huge_size(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    t = pa.table({"ts": pa.array([1, 2, 3], pa.int64()), "v": [1.0, 2.0, 3.0]})
    return _expect_windgate_error(
        lambda: windgate.window_aggregate(t, time="ts", size=2**40, slide=1, aggs={"*": "count"}),
        "window_aggregate(size=2**40, slide=1)",
        ("size", "slide"),
    )


def reg_huge_skyline(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    t = pa.table({"ts": pa.array([1, 2, 3], pa.int64()), "a": [1.0, 2.0, 3.0], "b": [3.0, 2.0, 1.0]})
    return _expect_windgate_error(
        lambda: windgate.skyline(t, time="ts", size=2**62, slide=1, dims=["a", "b"]),
        "skyline(size=2**62, slide=1)",
        ("size", "slide"),
    )


def reg_lateness0_keys_bounded(case: dict) -> list[Problem]:
    import numpy as np
    import pyarrow as pa

    import windgate

    op = windgate.WindowAggregator(time="ts", size=10, by="k", aggs={"*": "count"}, lateness=0)
    step = 10_000
    for i in range(20):
        r = np.arange(i * step, (i + 1) * step)
        op.push(pa.table({"ts": r, "k": r}))
        keys = op.stats["keys"]
        if keys > 2 * step:
            return [
                Problem(f"stats['keys'] = {keys} after {(i + 1) * step} never-repeating keys with lateness=0")
            ]
    return []


def reg_dictionary_by(case: dict) -> list[Problem]:
    import pandas as pd
    import pyarrow as pa

    import windgate

    plain = pa.table({"ts": [1, 2, 3, 12], "k": ["a", "b", "a", "b"], "v": [1.0, 2.0, 3.0, 4.0]})
    kw = dict(time="ts", size=10, by="k", aggs={"*": "count", "v": ["sum"]})
    want = table_rows(windgate.window_aggregate(plain, **kw))
    inputs = {
        "dictionary_encode()": plain.set_column(1, "k", plain.column("k").dictionary_encode()),
        "pandas Categorical": pd.DataFrame(
            {"ts": [1, 2, 3, 12], "k": pd.Categorical(["a", "b", "a", "b"]), "v": [1.0, 2.0, 3.0, 4.0]}
        ),
    }
    problems = []
    for name, data in inputs.items():
        try:
            got = table_rows(windgate.window_aggregate(data, **kw))
        except BaseException as e:  # noqa: BLE001
            problems.append(Problem(f"by column from {name}: {_describe_error(e)}"))
            continue
        if got != want:
            problems.append(Problem(f"by column from {name}: {got}, expected {want}"))
    return problems


def reg_duplicate_names(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    t = pa.Table.from_arrays(
        [pa.array([1, 2]), pa.array([1.0, 2.0]), pa.array([3.0, 4.0])], names=["ts", "v", "v"]
    )
    return _expect_windgate_error(
        lambda: windgate.window_aggregate(t, time="ts", size=10, aggs={"v": "sum"}),
        "duplicate column 'v'",
        ("v",),
    )


def reg_var_overflow(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    t = pa.table({"ts": [1, 2], "v": pa.array([1e200, -1e200], pa.float64())})
    out = windgate.window_aggregate(t, time="ts", size=10, aggs={"v": ["var", "std"]}).to_pylist()[0]
    if out["var_v"] != math.inf or out["std_v"] != math.inf:
        return [Problem(f"var/std of [1e200, -1e200] = {out['var_v']}, {out['std_v']}; expected inf, inf")]
    return []


def reg_two_threads(case: dict) -> list[Problem]:
    import threading

    import numpy as np
    import pyarrow as pa

    import windgate

    op = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=0)
    batches = [pa.table({"ts": np.arange(i * 1_000_000, (i + 1) * 1_000_000)}) for i in range(6)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(mine: list) -> None:
        barrier.wait()
        for b in mine:
            try:
                op.push(b)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

    threads = [threading.Thread(target=run, args=(batches[i::2],)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    bad = [e for e in errors if not _windgate_error(e)]
    return [Problem(f"one operator from two threads: {_describe_error(bad[0])}")] if bad else []


def reg_poison_not_nested(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    op = windgate.WindowAggregator(time="ts", size=10, aggs={"v": "sum"}, lateness=0)
    msgs = []
    for i, b in enumerate(
        [pa.table({"ts": [0, 1], "v": pa.array([2**62, 2**62])})]
        + [pa.table({"ts": [100 + 10 * i], "v": pa.array([1])}) for i in range(4)]
    ):
        try:
            op.push(b)
        except BaseException as e:  # noqa: BLE001
            if not _windgate_error(e):
                return [Problem(f"push {i}: {_describe_error(e)}")]
            msgs.append(str(e))
    if any(m.count("failed earlier") > 1 for m in msgs) or len({len(m) for m in msgs[1:]}) > 1:
        return [Problem(f"poisoned messages grow: {[len(m) for m in msgs]}; last: {msgs[-1][:300]}")]
    return []


def reg_wrong_types(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    t = pa.table({"ts": pa.array([1, 2, 3], pa.int64()), "v": [1.0, 2.0, 3.0]})
    base = dict(time="ts", size=10, aggs={"*": "count"})
    calls = {
        "time": lambda: windgate.window_aggregate(t, **{**base, "time": 0}),
        "aggs": lambda: windgate.window_aggregate(t, **{**base, "aggs": {"*": 5}}),
        "farm": lambda: windgate.window_aggregate(t, **{**base, "farm": "as_pid"}),
        "source": lambda: windgate.WindowAggregator(**base).push(t, source=10**20),
        "k": lambda: windgate.topk(t, time="ts", size=10, score="v", k=2**70),
        "threads": lambda: windgate.window_aggregate(t, **{**base, "threads": "2"}),
    }
    problems = []
    for name, fn in calls.items():
        problems += _expect_windgate_error(fn, f"wrongly typed {name}", (name,))
    return problems


def reg_band_join_200k(case: dict) -> list[Problem]:
    import numpy as np
    import pyarrow as pa

    import windgate

    t = pa.table({"ts": np.arange(200_000)})
    n = windgate.band_join(t, t, time="ts", window=1, lateness=0).num_rows
    return (
        []
        if n == 599_998
        else [Problem(f"band_join(window=1, lateness=0) of 200k rows: {n} rows, expected 599998")]
    )


def reg_keyboard_interrupt(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    schema = pa.schema([("ts", pa.int64())])

    def gen() -> Any:
        yield pa.record_batch({"ts": [1, 2]}, schema=schema)
        raise KeyboardInterrupt

    reader = pa.RecordBatchReader.from_batches(schema, gen())
    try:
        windgate.window_aggregate(reader, time="ts", size=10, aggs={"*": "count"})
    except KeyboardInterrupt:
        return []
    except BaseException as e:  # noqa: BLE001
        return [Problem(f"a reader whose generator raises KeyboardInterrupt: {_describe_error(e)}")]
    return [Problem("a reader whose generator raises KeyboardInterrupt: the call returned")]


def reg_band_join_huge_threads(case: dict) -> list[Problem]:
    import pyarrow as pa

    import windgate

    t = pa.table({"ts": pa.array([0, 1, 5], pa.int64())})
    return _expect_windgate_error(
        lambda: windgate.band_join(t, t, time="ts", window=3, threads=2**31),
        "band_join(threads=2**31)",
        ("threads",),
    )


def reg_var_rounded_once(case: dict) -> list[Problem]:
    """var is within an ulp of the exact sample variance (the README's promise: computed from exact sums,
    not rounded once) and has the same bits for every row order."""
    import pyarrow as pa

    import windgate

    xs = [20, 115, 6, 69, 13, -18]
    fx = [Fraction(x) for x in xs]
    mean = sum(fx) / len(fx)
    exact = float(sum((x - mean) ** 2 for x in fx) / (len(fx) - 1))
    problems = []
    for t in (pa.float64(), pa.int64()):
        results = set()
        for order in (xs, xs[::-1], sorted(xs)):
            tab = pa.table({"ts": [0] * len(order), "v": pa.array(order, t)})
            out = windgate.window_aggregate(tab, time="ts", size=10, aggs={"v": "var"})
            results.add(out["var_v"][0].as_py())
        got = results.pop()
        if results:
            problems.append(Problem(f"var of {xs} as {t} depends on the row order"))
        if abs(got - exact) > math.ulp(exact):
            problems.append(Problem(f"var of {xs} as {t}: {got!r}, more than an ulp from {exact!r}"))
    return problems
