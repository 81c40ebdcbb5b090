"""The one declaration of each operator's keyword options: names, defaults, and how each is normalised.

Every public entry point (the local functions, the streaming classes and the ``windgate.spark`` helpers)
spells its keywords out in its signature, for readers and IDEs; their names, defaults and normalisation are
declared once here (:data:`WINDOW_AGGREGATE`, :data:`BAND_JOIN`, :data:`PREFERENCE`), the wrappers forward
their ``locals()`` through :meth:`OperatorOptions.forward`, and ``tests/test_package_structure.py`` checks
every signature, the extension's stub (``_native.pyi``) and the README against the declaration. A new
option is one line here plus the keyword in each signature that takes it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import _specs
from .errors import InvalidParameterError

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
        "time": Option(REQUIRED, _specs.name),
        "size": Option(REQUIRED, _specs.span),
        "slide": Option(None, _specs.span),
        "offset": Option(0, _specs.span),
        **extra,
        "lateness": Option(None, _specs.span),
        "on_late": Option("drop", _specs.choice),
        "null_time": Option("error", _specs.choice),
        "threads": Option(None, _specs.optional_integer),
        "strategy": Option("auto", _specs.choice),
        "farm": Option(None, _specs.options_dict),
    }


#: Keywords of the Spark helpers' windowed operators that stay in Python (plan choices).
_SPARK_WINDOWED = {"range_size": Option(None), "plan": Option("auto")}
#: Keywords of the Spark helpers that only a streaming DataFrame reads (``lateness`` and ``on_late`` are
#: the operators' own options).
_SPARK_STREAMING = ("lateness", "on_late", "shards")
#: The update mode's keywords: streaming DataFrames only in Spark.
UPDATES = ("allowed_lateness", "emit", "interval")

_WINDOW_HEAD = ("time", "size", "slide", "offset")
#: Window aggregation's head: the window, or instead of ``size`` the inactivity gap of session windows or the
#: rows of count windows, and the zone whose local days windows of whole days follow.
_AGG_HEAD = (*_WINDOW_HEAD, "gap", "rows", "rows_slide", "tz")
_RUN = ("lateness", "on_late", "null_time", "threads", "strategy", "farm")
_SPARK_RUN = ("null_time", "threads", "strategy", "farm")


def _check_window_or_gap(raw: Mapping[str, Any]) -> None:
    """``size``/``slide`` (sliding and tumbling windows), ``gap`` (session windows) or ``rows`` (count
    windows): exactly one kind."""
    if raw.get("rows") is not None:
        given = [n for n in ("size", "slide", "gap") if raw.get(n) is not None]
        if given:
            raise InvalidParameterError(
                f"rows: count windows (rows=) take no {' or '.join(given)}=: give either rows or "
                f"{'/'.join(given)}"
            )
        return
    if raw.get("rows_slide") is not None:
        raise InvalidParameterError("rows_slide: rows_slide= is the slide of count windows: give rows= too")
    if raw.get("gap") is None:
        if raw.get("size") is None:
            raise InvalidParameterError("size: expected the window length (or gap= for session windows)")
        return
    given = [n for n in ("size", "slide") if raw.get(n) is not None]
    if given:
        raise InvalidParameterError(
            f"gap: session windows (gap=) take no {' or '.join(given)}= (sliding windows): give "
            f"either gap or {'/'.join(given)}"
        )


def _rows(value: Any, param: str) -> int | None:
    """``rows``/``rows_slide``: a positive int up to 2**48, or ``None``."""
    return None if value is None else _specs.integer(value, param, minimum=1, maximum=1 << 48)


WINDOW_AGGREGATE = OperatorOptions(
    options={
        **_window(
            {
                "gap": Option(None, _specs.span),
                "rows": Option(None, _rows),
                "rows_slide": Option(None, _rows),
                "tz": Option(None, _specs.zone),
                "by": Option(None, _specs.columns),
                "aggs": Option(REQUIRED, lambda v, p: _specs.agg_list(v)),
            }
        ),
        "size": Option(None, _specs.span),
        "sources": Option(1, _specs.integer),
        "credits": Option(1 << 20, _specs.optional_integer),
        "order_by": Option(None, _specs.optional_name),
        "input": Option("rows", _specs.choice),
        "output": Option("windows", _specs.choice),
        "row_offset": Option(0, _specs.row_offset),
        "allowed_lateness": Option(None, _specs.span),
        "emit": Option("final", _specs.choice),
        "interval": Option(None, _specs.span),
        "ordered": Option(False),
        **_SPARK_WINDOWED,
        "spark": Option(None),
        "sorted_merge": Option(None),
        "shards": Option(None),
    },
    entry_points={
        "windgate.window_aggregate": (
            *_AGG_HEAD,
            "by",
            "aggs",
            *_RUN,
            "order_by",
            "input",
            "output",
            "row_offset",
            "allowed_lateness",
            "emit",
            "interval",
        ),
        "windgate.WindowAggregator": (
            *_AGG_HEAD,
            "by",
            "aggs",
            *_RUN,
            "sources",
            "credits",
            "order_by",
            "input",
            "output",
            "row_offset",
            "allowed_lateness",
            "emit",
            "interval",
        ),
        "windgate.spark.window_aggregate": (
            *_AGG_HEAD,
            "by",
            "aggs",
            *_SPARK_RUN,
            "ordered",
            "range_size",
            "plan",
            "spark",
            "sorted_merge",
            *_SPARK_STREAMING,
            *UPDATES,
        ),
    },
    shared=(*_AGG_HEAD, "by", "aggs", *_RUN),
    natives={
        "window_aggregate": (("windgate.window_aggregate",), ("in_memory",)),
        "WindowAggregator": (("windgate.WindowAggregator",), ()),
    },
    check=_check_window_or_gap,
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
        options={
            **_window({**own, "by": Option(None, _specs.columns)}),
            **_SPARK_WINDOWED,
            "shards": Option(None),
        },
        entry_points={
            f"windgate.{query}": (*head, *_RUN),
            f"windgate.{cls}": (*head, *_RUN),
            f"windgate.spark.{query}": (*head, *_SPARK_RUN, *_SPARK_WINDOWED, *_SPARK_STREAMING),
        },
        shared=(*head, *_RUN),
        natives=_PREFERENCE_NATIVES,
    )


_DIMS = {"dims": Option(REQUIRED, _specs.dims)}
#: The preference queries by the extension's ``query=`` name.
PREFERENCE: Mapping[str, OperatorOptions] = {
    "skyline": _preference("skyline", "SkylineQuery", {**_DIMS, "prefer": Option("min", _specs.prefer)}),
    "top_dominant": _preference(
        "top_dominant",
        "TopDominantQuery",
        {**_DIMS, "delta": Option(REQUIRED, _specs.count), "prefer": Option("min", _specs.prefer)},
    ),
    "topk": _preference(
        "topk",
        "TopKQuery",
        {
            "score": Option(REQUIRED, _specs.score),
            "k": Option(REQUIRED, _specs.count),
            "descending": Option(True, _specs.flag),
        },
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
        "time": Option(REQUIRED, _specs.time_pair),
        "window": Option(None, _specs.span),
        "lower": Option(None, _specs.span),
        "upper": Option(None, _specs.span),
        "how": Option("inner", _specs.how),
        "on": Option((), _specs.predicates),
        "threads": Option(None, _specs.optional_integer),
        "lateness": Option(None, _specs.span),
        "on_late": Option("drop", _specs.choice),
        "semantics": Option("interval", _specs.choice),
        "index": Option(True, _specs.flag),
        "strategy": Option("auto", _specs.choice),
        "credits": Option(2**20, lambda v, p: _specs.optional_integer(v, p, minimum=1)),
        "bucket": Option(None),
        "partitions": Option(None),
        "shards": Option(None),
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
            "lateness",
            "on_late",
            "shards",
        ),
    },
    shared=(*_JOIN_HEAD, *_JOIN_RUN),
    natives={
        "band_join": (("windgate.band_join",), ()),
        "BandJoiner": (("windgate.BandJoiner",), ()),
    },
    check=_specs.check_bounds,
)

#: Every operator's declaration, for the tests.
OPERATORS: Mapping[str, OperatorOptions] = {
    "window_aggregate": WINDOW_AGGREGATE,
    "band_join": BAND_JOIN,
    **PREFERENCE,
}
