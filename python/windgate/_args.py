"""Normalising Python arguments before they reach the extension."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

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


def window_kwargs(
    *,
    time: str,
    size: Span,
    slide: Span | None,
    offset: Span,
    by: str | list[str] | tuple[str, ...] | None,
    lateness: Span | None,
    on_late: str,
    null_time: str,
    threads: int | None,
    strategy: str,
    farm: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The keyword arguments every windowed operator of the extension takes (window aggregation and the
    preference queries), normalised."""
    return {
        "time": name(time, "time"),
        "size": span(size, "size"),
        "slide": span(slide, "slide"),
        "offset": span(offset, "offset"),
        "by": by_columns(by),
        "lateness": span(lateness, "lateness"),
        "on_late": choice(on_late, "on_late"),
        "null_time": choice(null_time, "null_time"),
        "threads": optional_integer(threads, "threads"),
        "strategy": choice(strategy, "strategy"),
        "farm": options_dict(farm, "farm"),
    }


def operator_kwargs(
    *,
    aggs: Mapping[str, str | list[str] | tuple[str, ...]],
    **window: Any,
) -> dict[str, Any]:
    """The keyword arguments of ``_native.window_aggregate`` / ``_native.WindowAggregator``, normalised:
    those of :func:`window_kwargs` plus ``aggs``."""
    return {**window_kwargs(**window), "aggs": agg_list(aggs)}


def two_phase(input: Any, output: Any, row_offset: Any) -> dict[str, Any]:
    """The partial-state keywords (``input``, ``output``, ``row_offset``), checked."""
    return {
        "input": choice(input, "input"),
        "output": choice(output, "output"),
        "row_offset": integer(row_offset, "row_offset", minimum=0),
    }
