"""User arguments turned into the keyword dicts the extension takes, and the one declaration of each
operator's keyword options.

Every public entry point (the local functions, the streaming classes and the ``windgate.spark`` helpers)
spells its keywords out in its signature, for readers and IDEs; their names, defaults and normalisation are
declared once here (:data:`WINDOW_AGGREGATE`, :data:`BAND_JOIN`, :data:`PREFERENCE`), the wrappers forward
through :meth:`OperatorOptions.native`, and ``tests/test_package_structure.py`` checks every signature, the
extension's stub (``_native.pyi``) and the README against the declaration.
"""

from __future__ import annotations

import datetime as _dt
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _native
from .errors import ColumnTypeError, InvalidParameterError

Span = int | str | _dt.timedelta


def span(value: Span | None, param: str) -> int | str | None:
    """An int (time column units), a duration string, or a ``timedelta`` (turned into a duration string)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, _dt.timedelta):
        micros = value // _dt.timedelta(microseconds=1)
        if _dt.timedelta(microseconds=micros) != value:
            raise InvalidParameterError(f"{param}: timedelta {value!r} is finer than a microsecond")
        return f"{micros}us"
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        # ints and numpy integers are fine; floats and the rest are not.
        raise ColumnTypeError(
            f"{param}: expected an int, a duration string such as '10s', or a timedelta, "
            f"got {type(value).__name__}"
        )
    return integer(value, param, minimum=-INT64_MAX - 1)


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


def two_phase_choice(value: Any, param: str) -> str:
    """``input=``/``output=`` of the two-phase aggregation (the extension checks the value)."""
    return choice(value, param)


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

    def units(v: int | str | None, param: str) -> int | None:
        if v is None or isinstance(v, int):
            return v
        return _native.duration_units(v, unit, param)

    size = units(spec["size"], "size")
    slide = units(spec["slide"], "slide") or size
    offset = units(spec["offset"], "offset") or 0
    return size, slide, offset % slide


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


# ------------------------------------------------------------------------------ the option declarations

#: The default of an option that has none (the caller must give it).
REQUIRED: Any = inspect.Parameter.empty


@dataclass(frozen=True)
class Option:
    """One keyword option: its default (:data:`REQUIRED` when it has none) and its normalisation
    ``convert(value, name)``; ``convert=None`` for an option the Python wrapper consumes itself (Spark plan
    choices) rather than forwarding to the extension."""

    default: Any = REQUIRED
    convert: Callable[[Any, str], Any] | None = None


@dataclass(frozen=True)
class OperatorOptions:
    """The one declaration of an operator's keyword options.

    ``options`` holds every option's default and normalisation; ``entry_points`` names each public entry
    point's keywords in its signature's order; ``shared`` are the options that every entry point forwards to
    the extension (the Spark helpers pin ``lateness`` and ``on_late``, so they are listed though Spark
    does not take them); ``natives`` maps each extension entry point to the public one that calls it and
    the keywords only the wrapper computes (``in_memory``, ``query``); ``check`` sees the raw values
    before any is normalised (options that are only valid together).
    """

    options: Mapping[str, Option]
    entry_points: Mapping[str, tuple[str, ...]]
    shared: tuple[str, ...]
    natives: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    check: Callable[[Mapping[str, Any]], None] | None = None

    def signature(self, entry_point: str) -> list[tuple[str, Any]]:
        """``(name, default)`` of each keyword of ``entry_point``, in order."""
        return [(n, self.options[n].default) for n in self.entry_points[entry_point]]

    def native(self, values: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
        """The extension's keyword arguments for the options ``names``, normalised in that order; an
        option missing from ``values`` takes its declared default."""
        names = list(names)
        raw = {n: values.get(n, self.options[n].default) for n in names}
        if self.check is not None:
            self.check(raw)
        out = {}
        for n in names:
            convert = self.options[n].convert
            if convert is not None:
                out[n] = convert(raw[n], n)
        return out

    def forward(self, entry_point: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`native` for every keyword of ``entry_point`` (its ``locals()``) that reaches the
        extension."""
        return self.native(values, self.entry_points[entry_point])


def _window(extra: Mapping[str, Option]) -> dict[str, Option]:
    """The window options every windowed operator starts with, then ``extra``, then the run options."""
    return {
        "time": Option(REQUIRED, name),
        "size": Option(REQUIRED, span),
        "slide": Option(None, span),
        "offset": Option(0, span),
        **extra,
        "lateness": Option(None, span),
        "on_late": Option("drop", choice),
        "null_time": Option("error", choice),
        "threads": Option(None, optional_integer),
        "strategy": Option("auto", choice),
        "farm": Option(None, options_dict),
    }


#: Keywords of the Spark helpers' windowed operators that stay in Python (plan choices).
_SPARK_WINDOWED = {"range_size": Option(None), "plan": Option("auto")}

_WINDOW_HEAD = ("time", "size", "slide", "offset")
_RUN = ("lateness", "on_late", "null_time", "threads", "strategy", "farm")
_SPARK_RUN = ("null_time", "threads", "strategy", "farm")

WINDOW_AGGREGATE = OperatorOptions(
    options={
        **_window({"by": Option(None, columns), "aggs": Option(REQUIRED, lambda v, p: agg_list(v))}),
        "sources": Option(1, integer),
        "credits": Option(1 << 20, optional_integer),
        "order_by": Option(None, optional_name),
        "input": Option("rows", two_phase_choice),
        "output": Option("windows", two_phase_choice),
        "row_offset": Option(0, row_offset),
        "ordered": Option(False),
        **_SPARK_WINDOWED,
        "spark": Option(None),
        "sorted_merge": Option(None),
    },
    entry_points={
        "windgate.window_aggregate": (
            *_WINDOW_HEAD,
            "by",
            "aggs",
            *_RUN,
            "order_by",
            "input",
            "output",
            "row_offset",
        ),
        "windgate.WindowAggregator": (
            *_WINDOW_HEAD,
            "by",
            "aggs",
            *_RUN,
            "sources",
            "credits",
            "order_by",
            "input",
            "output",
            "row_offset",
        ),
        "windgate.spark.window_aggregate": (
            *_WINDOW_HEAD,
            "by",
            "aggs",
            *_SPARK_RUN,
            "ordered",
            "range_size",
            "plan",
            "spark",
            "sorted_merge",
        ),
    },
    shared=(*_WINDOW_HEAD, "by", "aggs", *_RUN),
    natives={
        "window_aggregate": (("windgate.window_aggregate",), ("in_memory",)),
        "WindowAggregator": (("windgate.WindowAggregator",), ()),
    },
)

_PREFERENCE_NATIVES = {
    "preference": (
        ("windgate.skyline", "windgate.top_dominant", "windgate.topk"),
        ("query",),
    ),
    "PreferenceQuery": (
        ("windgate.SkylineQuery", "windgate.TopDominantQuery", "windgate.TopKQuery"),
        ("query",),
    ),
}


def _preference(query: str, cls: str, own: Mapping[str, Option]) -> OperatorOptions:
    """A preference query's options: the window, the query's own (``own``), ``by``, the run options."""
    head = (*_WINDOW_HEAD, *own, "by")
    return OperatorOptions(
        options={**_window({**own, "by": Option(None, columns)}), **_SPARK_WINDOWED},
        entry_points={
            f"windgate.{query}": (*head, *_RUN),
            f"windgate.{cls}": (*head, *_RUN),
            f"windgate.spark.{query}": (*head, *_SPARK_RUN, *_SPARK_WINDOWED),
        },
        shared=(*head, *_RUN),
        natives=_PREFERENCE_NATIVES,
    )


_DIMS = {"dims": Option(REQUIRED, dims)}
#: The preference queries by the extension's ``query=`` name.
PREFERENCE: Mapping[str, OperatorOptions] = {
    "skyline": _preference("skyline", "SkylineQuery", {**_DIMS, "prefer": Option("min", prefer)}),
    "top_dominant": _preference(
        "top_dominant",
        "TopDominantQuery",
        {**_DIMS, "delta": Option(REQUIRED, count), "prefer": Option("min", prefer)},
    ),
    "topk": _preference(
        "topk",
        "TopKQuery",
        {"score": Option(REQUIRED, score), "k": Option(REQUIRED, count), "descending": Option(True, flag)},
    ),
}


def preference_spec(query: str, values: Mapping[str, Any], entry_point: str | None = None) -> dict[str, Any]:
    """The keyword arguments of ``_native.preference`` / ``_native.PreferenceQuery`` for ``query``: the
    keywords of ``entry_point`` found in ``values`` (``None``: the shared ones, as the Spark helpers
    forward them), normalised."""
    options = PREFERENCE[query]
    names = options.shared if entry_point is None else options.entry_points[entry_point]
    return {"query": query, **options.native(values, names)}


_JOIN_HEAD = ("time", "window", "lower", "upper", "how", "on")
_JOIN_RUN = ("threads", "lateness", "on_late", "semantics", "index", "strategy")

BAND_JOIN = OperatorOptions(
    options={
        "time": Option(REQUIRED, time_pair),
        "window": Option(None, span),
        "lower": Option(None, span),
        "upper": Option(None, span),
        "how": Option("inner", how),
        "on": Option((), predicates),
        "threads": Option(None, optional_integer),
        "lateness": Option(None, span),
        "on_late": Option("drop", choice),
        "semantics": Option("interval", choice),
        "index": Option(True, flag),
        "strategy": Option("auto", choice),
        "credits": Option(2**20, lambda v, p: optional_integer(v, p, minimum=1)),
        "bucket": Option(None),
        "partitions": Option(None),
    },
    entry_points={
        "windgate.band_join": (*_JOIN_HEAD, *_JOIN_RUN),
        "windgate.BandJoiner": (*_JOIN_HEAD, *_JOIN_RUN, "credits"),
        "windgate.spark.band_join": (
            *_JOIN_HEAD,
            "bucket",
            "partitions",
            "threads",
            "index",
            "semantics",
        ),
    },
    shared=(*_JOIN_HEAD, *_JOIN_RUN),
    natives={
        "band_join": (("windgate.band_join",), ()),
        "BandJoiner": (("windgate.BandJoiner",), ()),
    },
    check=check_bounds,
)

#: Every operator's declaration, for the tests.
OPERATORS: Mapping[str, OperatorOptions] = {
    "window_aggregate": WINDOW_AGGREGATE,
    "band_join": BAND_JOIN,
    **PREFERENCE,
}
