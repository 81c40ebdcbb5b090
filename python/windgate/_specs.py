"""User arguments turned into the values the extension takes: spans, column names, counts, aggregate
lists, join predicates, time units. Each function checks one kind of argument and names the parameter in
its error (a :class:`windgate.errors.ColumnTypeError` or :class:`windgate.errors.InvalidParameterError`).

Which operator takes which options, with which defaults, is declared in :mod:`windgate._options`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _native
from .errors import ColumnTypeError, InvalidParameterError

Span = int | str | _dt.timedelta
"""A length of time: a duration string (``"5m"``), a ``datetime.timedelta``, a numpy ``timedelta64`` or a
pandas ``Timedelta`` on a timestamp or date time column; an int (in the column's own unit) on an integer time
column. A nonzero int on a timestamp column is an error (its meaning would depend on the column's unit)."""

#: Nanoseconds per duration unit, largest first (the units :func:`format_duration` writes).
_UNITS_NS = (
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
)


def format_duration(ns: int) -> str:
    """``ns`` nanoseconds as the duration string a user would write: ``"-1h"``, ``"1h30m"``, ``"250ms"``
    (the extension's ``windgate_core::time::format_duration``)."""
    if ns == 0:
        return "0s"
    out, rest = ("-" if ns < 0 else ""), abs(ns)
    for name, factor in _UNITS_NS:
        if rest >= factor:
            out += f"{rest // factor}{name}"
            rest %= factor
    return out


def _timedelta_ns(value: Any, param: str) -> int | None:
    """A ``timedelta``, numpy ``timedelta64`` or pandas ``Timedelta`` in nanoseconds; ``None`` for anything
    else."""
    kind = type(value)
    if kind.__name__ == "timedelta64" and kind.__module__ == "numpy":
        import numpy as np

        if np.isnat(value):
            raise InvalidParameterError(f"{param}: expected a duration, got {value!r}")
        if np.datetime_data(value.dtype)[0] in ("Y", "M", "generic"):
            raise InvalidParameterError(
                f"{param}: {value!r} has no fixed length in nanoseconds; pass e.g. '30d' or '1h'"
            )
        return int(value.astype("timedelta64[ns]").astype("int64"))
    if isinstance(value, _dt.timedelta):
        ns = getattr(value, "value", None)  # pandas Timedelta: exact nanoseconds
        if isinstance(ns, int) and kind.__module__.startswith("pandas"):
            return ns
        return (value // _dt.timedelta(microseconds=1)) * 1000
    return None


def span(value: Span | None, param: str) -> int | str | None:
    """A duration string as given, a ``timedelta`` / numpy ``timedelta64`` / pandas ``Timedelta`` as the
    duration string that reads like it (``timedelta(hours=-1)`` -> ``"-1h"``), or an int (for an integer time
    column: the extension rejects a nonzero int on a timestamp column, where it knows the unit)."""
    if value is None or isinstance(value, str):
        return value
    ns = _timedelta_ns(value, param)
    if ns is not None:
        return format_duration(ns)
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        # ints and numpy integers are fine; floats and the rest are not.
        raise ColumnTypeError(
            f"{param}: expected an int, a duration string such as '10s', or a timedelta (an int only on an "
            f"integer time column), got {type(value).__name__}"
        )
    return integer(value, param, minimum=-INT64_MAX - 1)


def units(value: Span | None, unit: str, param: str, column: str = "time") -> int | None:
    """A normalised span (:func:`span`) in the units of a time column of ``unit`` (see :func:`time_unit`),
    read by the extension with the operators' rules (a nonzero int on a timestamp column is an error naming
    ``column``): what the Spark helpers compute window and range bounds in."""
    if value is None:
        return None
    return _native.duration_units(value, unit, param, column)


INT64_MAX = 2**63 - 1


def integer(value: Any, param: str, *, minimum: int | None = None, maximum: int = INT64_MAX) -> int:
    """An int parameter (numpy integers too; not bool or float), checked against its range, with errors that
    name ``param``."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ColumnTypeError(f"{param}: expected an int, got {type(value).__name__} {value!r}")
    n = int(value.__index__())
    if minimum is not None and n < minimum:
        raise InvalidParameterError(f"{param}: expected an int >= {minimum}, got {n}")
    if n > maximum or n < -INT64_MAX - 1:
        bound = "a 64-bit int" if maximum == INT64_MAX else f"an int <= {maximum}"
        raise InvalidParameterError(f"{param}: expected {bound}, got {n}")
    return n


def optional_integer(value: Any, param: str, *, minimum: int | None = None) -> int | None:
    """:func:`integer`, or ``None``."""
    return None if value is None else integer(value, param, minimum=minimum)


def name(value: Any, param: str) -> str:
    """A column name."""
    if not isinstance(value, str):
        raise ColumnTypeError(
            f"{param}: expected a column name (a str), got {type(value).__name__} {value!r}"
        )
    return value


def optional_name(value: Any, param: str) -> str | None:
    return None if value is None else name(value, param)


def zone(value: Any, param: str) -> str | None:
    """A time zone: an IANA name or fixed offset (the extension checks it), a ``zoneinfo.ZoneInfo``, or
    ``None``."""
    if value is None or isinstance(value, str):
        return value
    key = getattr(value, "key", None)  # zoneinfo.ZoneInfo
    if isinstance(key, str):
        return key
    raise InvalidParameterError(
        f'{param}: expected a time zone name such as "Europe/Berlin" or None, '
        f"got {type(value).__name__} {value!r}"
    )


def choice(value: Any, param: str) -> str:
    """A keyword such as ``on_late="drop"`` (the extension checks the value)."""
    if not isinstance(value, str):
        raise ColumnTypeError(f"{param}: expected a str, got {type(value).__name__} {value!r}")
    return value


def options_dict(value: Any, param: str) -> dict[str, Any] | None:
    """A dict of options such as ``farm={"scheduler": "as"}``, or ``None``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ColumnTypeError(
            f"{param}: expected a dict of options such as {{'scheduler': 'as_pid'}}, "
            f"got {type(value).__name__}"
        )
    return dict(value)


def columns(value: str | list[str] | tuple[str, ...] | None, param: str) -> list[str]:
    """A column name or a list of names (``None``: none) as a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        names = None
    if names is None or not all(isinstance(c, str) for c in names):
        raise ColumnTypeError(f"{param}: expected a column name or a list of column names, got {value!r}")
    return names


def by_columns(by: str | list[str] | tuple[str, ...] | None) -> list[str]:
    return columns(by, "by")


def agg_list(aggs: Mapping[str, str | list[str] | tuple[str, ...]]) -> list[tuple[str, list[str]]]:
    """``{"*": "count", "kwh": ["sum", "max"]}`` -> ``[("*", ["count"]), ("kwh", ["sum", "max"])]``."""
    if not isinstance(aggs, Mapping):
        raise ColumnTypeError(
            f"aggs: expected a dict mapping columns to function names, e.g. {{'*': 'count'}}, "
            f"got {type(aggs).__name__}"
        )
    out = []
    for column, funcs in aggs.items():
        if not isinstance(column, str):
            raise ColumnTypeError(f"aggs: column names must be strings, got {column!r}")
        if isinstance(funcs, str):
            names = [funcs]
        elif isinstance(funcs, (list, tuple)):
            names = list(funcs)
        else:
            names = [funcs]
        if not names or not all(isinstance(f, str) for f in names):
            raise ColumnTypeError(f"aggs: functions of column {column!r} must be names, got {funcs!r}")
        out.append((column, names))
    return out


def arrow_source(data: Any, param: str = "data") -> Any:
    """Anything the extension can import: Arrow PyCapsule objects directly; pandas through pyarrow."""
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
        return data
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        import pyarrow as pa

        return pa.Table.from_pandas(data, preserve_index=False)
    raise ColumnTypeError(
        f"{param}: expected a pyarrow Table/RecordBatch/RecordBatchReader or an object with "
        f"__arrow_c_stream__ (polars, pandas, duckdb), got {type(data).__name__}"
    )


def sources(data: Any) -> list[Any]:
    """One source or a list of sources."""
    if isinstance(data, (list, tuple)):
        if not data:
            raise InvalidParameterError("data: expected at least one source, got an empty list")
        return [arrow_source(d, f"data[{i}]") for i, d in enumerate(data)]
    return [arrow_source(data)]


def in_memory(sources: list[Any]) -> bool:
    """Whether every source is already in memory (a pyarrow Table or RecordBatch, a polars or pandas data
    frame): reading it whole costs nothing, and lets the batch functions close windows before the end."""
    import pyarrow as pa

    def held(d: Any) -> bool:
        return isinstance(d, (pa.Table, pa.RecordBatch)) or type(d).__module__.startswith("polars.")

    return all(held(d) for d in sources)


def row_offset(value: Any, param: str) -> int:
    """The arrival number of the first row: an int >= 0."""
    return integer(value, param, minimum=0)


# ------------------------------------------------------------------------------ preference queries


def prefer(value: str | Sequence[str], param: str = "prefer") -> list[str]:
    """``"min"``/``"max"`` or one per dimension, as a list (the extension checks the names and length)."""
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        names = None
    if not names or not all(isinstance(p, str) for p in names):
        raise ColumnTypeError(
            f'{param}: expected "min", "max" or a list with one of them per dimension, got {value!r}'
        )
    return names


def count(value: int, param: str) -> int:
    """A row count (``delta``, ``k``): an int >= 0."""
    return integer(value, param, minimum=0)


def dims(value: str | Sequence[str], param: str = "dims") -> list[str]:
    """The preference dimensions: a column name or a list of names."""
    if value is None:
        raise ColumnTypeError(f"{param}: expected a column name or a list of column names, got None")
    return columns(value, param)


def score(value: str, param: str = "score") -> str:
    """The score column of a top-k query: one column name."""
    if not isinstance(value, str):
        raise ColumnTypeError(f"{param}: expected the name of one numeric column, got {value!r}")
    return value


def flag(value: Any, param: str) -> bool:
    """A yes/no option (``descending``, ``index``), taken for its truth value."""
    return bool(value)


# ------------------------------------------------------------------------------ band joins


@dataclass(frozen=True)
class Band:
    """``|left - right| <= eps`` (see :func:`windgate.band`)."""

    left: str
    right: str
    eps: float


@dataclass(frozen=True)
class Eq:
    """``left == right`` (see :func:`windgate.eq`)."""

    left: str
    right: str


Predicates = Band | Eq | Sequence[Band | Eq]


def time_pair(time: str | Sequence[str], param: str = "time") -> tuple[str, str]:
    """The time column of both sides of a join, or a ``(left, right)`` pair of names."""
    if isinstance(time, str):
        return (time, time)
    if isinstance(time, (list, tuple)) and len(time) == 2 and all(isinstance(t, str) for t in time):
        return (time[0], time[1])
    raise ColumnTypeError(f"{param}: expected a column name or a (left, right) pair of names, got {time!r}")


def predicates(on: Predicates, param: str = "on") -> list[tuple[str, str, str, float | None]]:
    """:func:`windgate.band` / :func:`windgate.eq` predicates as the extension's ``(kind, left, right,
    eps)`` tuples."""
    items = [on] if isinstance(on, (Band, Eq)) else list(on)
    out: list[tuple[str, str, str, float | None]] = []
    for p in items:
        if isinstance(p, Band):
            out.append(("band", p.left, p.right, p.eps))
        elif isinstance(p, Eq):
            out.append(("eq", p.left, p.right, None))
        else:
            raise InvalidParameterError(
                f"{param}: expected windgate.band(...) or windgate.eq(...) predicates, got {p!r}"
            )
    return out


def check_bounds(values: Mapping[str, Any]) -> None:
    """``window``, or ``lower`` and ``upper``, given (each is then a span, negative ones too)."""
    window, lower, upper = values["window"], values["lower"], values["upper"]
    if window is not None and (lower is not None or upper is not None):
        raise InvalidParameterError("window: give either window= (symmetric) or lower= and upper=, not both")
    if window is None and lower is None and upper is None:
        raise InvalidParameterError(
            "window: expected window= (|l.ts - r.ts| <= window) or lower= and upper= "
            "(l.ts + lower <= r.ts <= l.ts + upper)"
        )
    if window is None and upper is None:
        raise InvalidParameterError("upper: lower= needs upper= too")
    if window is None and lower is None:
        raise InvalidParameterError("lower: upper= needs lower= too")


def how(value: Any, param: str = "how") -> str:
    """The join type: ``"inner"`` or ``"left"``."""
    if value not in ("inner", "left"):
        raise InvalidParameterError(f'{param}: expected "inner" or "left", got {value!r}')
    return value


# ------------------------------------------------------------------------------ time units


def time_unit(t: Any) -> str:
    """The unit of a time column's Arrow type, as the extension's ``duration_units`` names it: a timestamp's
    unit, ``"day"`` for date32, ``"plain"`` for integers."""
    import pyarrow as pa

    if pa.types.is_timestamp(t):
        return t.unit
    if pa.types.is_date32(t):
        return "day"
    if pa.types.is_integer(t):
        return "plain"
    raise ColumnTypeError(f"time: the time column must be a timestamp, date or integer column, got {t}")


def window_units(spec: Mapping[str, Any], unit: str) -> tuple[int, int, int]:
    """A normalised spec's ``size``, ``slide`` (default ``size``) and ``offset`` (reduced modulo the
    slide) in time-column units."""

    column = spec.get("time") or "time"
    size = units(spec["size"], unit, "size", column)
    slide = units(spec["slide"], unit, "slide", column) or size
    # The offset may be negative or beyond the slide: the windows are the same as with it modulo the slide
    # (as in the extension's WindowSpec; see docs/time.md).
    offset = units(spec["offset"], unit, "offset", column) or 0
    return size, slide, offset % slide


#: The duration suffix of each time unit (see :func:`time_unit`).
_SUFFIX = {"s": "s", "ms": "ms", "us": "us", "ns": "ns", "day": "d"}


def units_span(value: int | None, unit: str) -> int | str | None:
    """A length in time-column units as the extension takes it back: the int on an integer column, a
    duration string in the column's unit on a timestamp or date column (where a plain int is an error)."""
    if value is None or unit == "plain" or value == 0:
        return value
    return f"{value}{_SUFFIX[unit]}"


def spark_time_units(time: str, unit: str):
    """A Spark column expression of the time column ``time`` in its ``unit`` (see :func:`time_unit`), as a
    long: what the extension's window arithmetic counts in."""
    from pyspark.sql import functions as F

    if unit == "us":
        return F.unix_micros(F.col(time))
    if unit == "day":
        return F.unix_date(F.col(time))
    if unit == "plain":
        return F.col(time).cast("long")
    raise ColumnTypeError(f"time: unsupported Spark time unit {unit}")
