"""The twelve multiway-aggregation queries (the paper's Table 2) of
Cederman et al., *Efficient data streaming multiway aggregation through concurrent algorithmic designs and
new abstract data types*, runnable over several sources with every strategy, locally and through
:mod:`windgate.spark`.

Each query is one sliding-window group-by over one of two data sets, split into time-sorted sources:

======  ==========  =======  =====  ============  ==================  ====================================
query   data set    size     slide  windows/row   key                 function
======  ==========  =======  =====  ============  ==================  ====================================
k-OS    smartgrid   30 s     3 s    10            plug_id (243)       first()  (``first`` of ``value``)
k-OI    smartgrid   30 s     3 s    10            plug_id (243)       count()
K-OS    soundcloud  30       3      10            song (40,000)       first()  (``first`` of ``id``)
K-OI    soundcloud  30       3      10            song (40,000)       count()
w-OS    smartgrid   20 s     2 s    10            plug_id             first()
w-OI    smartgrid   20 s     2 s    10            plug_id             avg(consumption) (``mean`` of ``load``)
W-OS    smartgrid   40 s     2 s    20            plug_id             first()
W-OI    smartgrid   40 s     2 s    20            plug_id             avg(consumption)
f-OS    soundcloud  20       2      10            song                first-mail()
f-OI    soundcloud  20       2      10            song                count-mail()
F-OS    soundcloud  20       2      10            song                first-mail/IP()
F-OI    soundcloud  20       2      10            song                count-mail/IP()
======  ==========  =======  =====  ============  ==================  ====================================

OS queries are order-sensitive (their answer depends on the total order ``(ts, source, seq)``), OI queries are
not. The data sets (:func:`generate`):

* ``smartgrid``: :func:`windgate.datasets.smartgrid_sources` with 243 plugs (27 households of 9: the paper's
  243 meters) reporting once per second (486 rows/s: each reading is a ``work`` and a ``load`` row), so one
  tick is a second and a 30 s window holds 30 readings per meter; plug ``p`` is on source ``p % sources``.
* ``soundcloud``: :func:`windgate.datasets.soundcloud_sources`, 40,000 Zipf-skewed songs, integer ticks,
  comments round-robin over the sources.

How the functions map onto windgate's aggregates (``first``/``last`` take numeric columns, and functions
ignore nulls, so each regex variant is a derived column computed once per row with :mod:`pyarrow.compute`
before the rows reach the operator; :func:`prepare` adds them):

* ``first()`` is the ``first`` of ``value`` (smartgrid) or of ``id`` (soundcloud: which comment came first).
* ``avg(consumption)`` is the ``mean`` of ``load`` = ``value`` on load rows (``property == 1``, watts), null
  on the cumulative ``work`` rows, so the mean is over the load readings only.
* ``count-mail()`` is the ``sum`` of ``is_mail`` (int8: 1 when ``comment`` matches
  :data:`~windgate.datasets.EMAIL_REGEX`, else 0); ``count-mail/IP()`` the ``sum`` of ``is_mail_ip`` (an
  e-mail or :data:`~windgate.datasets.IP_REGEX`). A window with no match has 0, not null.
* ``first-mail()`` is the ``first`` of ``mail_id`` (``id`` when the comment matches, else null: ``first``
  skips nulls, so it is the id of the window's first matching comment, null when none matches);
  ``first-mail/IP()`` the same with ``mail_ip_id``.

The paper runs the regex inside the aggregate function; here it runs once per row, vectorised, in the
caller's thread, and the operator sees an integer column. The query's answer is the same.

>>> from windgate import queries
>>> srcs = queries.generate("smartgrid", 20_000, sources=3)
>>> out = queries.run_query("k-OI", srcs, strategy="pane")
>>> out.column_names
['plug_id', 'window_start', 'window_end', 'count']
>>> out.equals(queries.run_query("k-OI", srcs, strategy="reference"))
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .datasets import EMAIL_REGEX, IP_REGEX, smartgrid_sources, soundcloud_sources
from .errors import ColumnNotFoundError, InvalidParameterError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "DATASETS",
    "DERIVED",
    "QUERIES",
    "Query",
    "generate",
    "prepare",
    "run_query",
    "spark_query",
    "union",
]

#: The generator arguments that give each data set the paper's shape.
DATASETS: dict[str, dict[str, Any]] = {
    "smartgrid": {"households": 27, "plugs_per_household": 9, "rate": 486.0},
    "soundcloud": {"songs": 40_000},
}

#: Derived columns: name -> (data set, the input columns it reads, what it is).
DERIVED: dict[str, tuple[str, tuple[str, ...], str]] = {
    "load": ("smartgrid", ("property", "value"), "value on load rows (property 1), else null"),
    "is_mail": ("soundcloud", ("comment",), "1 if comment matches EMAIL_REGEX, else 0 (int8)"),
    "is_mail_ip": ("soundcloud", ("comment",), "1 if comment matches EMAIL_REGEX or IP_REGEX, else 0"),
    "mail_id": ("soundcloud", ("comment", "id"), "id if comment matches EMAIL_REGEX, else null"),
    "mail_ip_id": (
        "soundcloud",
        ("comment", "id"),
        "id if comment matches EMAIL_REGEX or IP_REGEX, else null",
    ),
}

_TICK = {"smartgrid": "s", "soundcloud": ""}  # smartgrid's ts is a timestamp: one tick is a second


@dataclass(frozen=True)
class Query:
    """One query of Table 2: ``window_aggregate(sources, time, size, slide, by, aggs)`` on its data set."""

    name: str
    description: str
    dataset: str
    size_ticks: int
    slide_ticks: int
    by: str
    aggs: Mapping[str, str] = field(default_factory=dict)
    function: str = ""
    time: str = "ts"

    @property
    def size(self) -> int | str:
        """The window size as ``window_aggregate`` takes it (``"30s"`` on smartgrid, ``30`` on soundcloud)."""
        return f"{self.size_ticks}{_TICK[self.dataset]}" if _TICK[self.dataset] else self.size_ticks

    @property
    def slide(self) -> int | str:
        return f"{self.slide_ticks}{_TICK[self.dataset]}" if _TICK[self.dataset] else self.slide_ticks

    @property
    def windows_per_row(self) -> int:
        return self.size_ticks // self.slide_ticks

    @property
    def order_sensitive(self) -> bool:
        return self.name.endswith("-OS")

    @property
    def derived(self) -> list[str]:
        """The derived columns (:data:`DERIVED`) the query aggregates."""
        return [c for c in self.aggs if c in DERIVED]

    @property
    def columns(self) -> list[str]:
        """The columns the operator reads: time, key, aggregated columns (derived ones included)."""
        return [self.time, self.by, *(c for c in self.aggs if c != "*")]

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``window_aggregate`` / ``WindowAggregator`` for this query."""
        return {
            "time": self.time,
            "size": self.size,
            "slide": self.slide,
            "by": self.by,
            "aggs": dict(self.aggs),
        }


_EC, _SC = "smartgrid", "soundcloud"
_FIRST_EC, _FIRST_SC, _COUNT = {"value": "first"}, {"id": "first"}, {"*": "count"}
_LOAD = {"load": "mean"}
_TABLE2 = (
    # name, description, data set, size, slide (ticks), key, aggs, the paper's function
    ("k-OS", "first reading per meter, 243 keys", _EC, 30, 3, "plug_id", _FIRST_EC, "first()"),
    ("k-OI", "readings per meter, 243 keys", _EC, 30, 3, "plug_id", _COUNT, "count()"),
    ("K-OS", "first comment per song, 40,000 keys", _SC, 30, 3, "song", _FIRST_SC, "first()"),
    ("K-OI", "comments per song, 40,000 keys", _SC, 30, 3, "song", _COUNT, "count()"),
    ("w-OS", "first reading per meter, 10 windows a row", _EC, 20, 2, "plug_id", _FIRST_EC, "first()"),
    ("w-OI", "mean load per meter, 10 windows a row", _EC, 20, 2, "plug_id", _LOAD, "avg(consumption)"),
    ("W-OS", "first reading per meter, 20 windows a row", _EC, 40, 2, "plug_id", _FIRST_EC, "first()"),
    ("W-OI", "mean load per meter, 20 windows a row", _EC, 40, 2, "plug_id", _LOAD, "avg(consumption)"),
    ("f-OS", "first comment with an e-mail", _SC, 20, 2, "song", {"mail_id": "first"}, "first-mail()"),
    ("f-OI", "comments with an e-mail", _SC, 20, 2, "song", {"is_mail": "sum"}, "count-mail()"),
    (
        "F-OS",
        "first comment with an e-mail or IP",
        _SC,
        20,
        2,
        "song",
        {"mail_ip_id": "first"},
        "first-mail/IP()",
    ),
    ("F-OI", "comments with an e-mail or IP", _SC, 20, 2, "song", {"is_mail_ip": "sum"}, "count-mail/IP()"),
)

#: The twelve queries by name (case matters: k = 243 keys, K = 40,000 keys; w = 10 and W = 20 windows per
#: row; f = e-mail, F = e-mail or IP). Descriptions of per-song queries are per song.
QUERIES: dict[str, Query] = {row[0]: Query(*row) for row in _TABLE2}


def _query(name: str | Query) -> Query:
    if isinstance(name, Query):
        return name
    try:
        return QUERIES[name]
    except (KeyError, TypeError):
        raise InvalidParameterError(
            f"query: expected one of {', '.join(QUERIES)}, got {name!r} (k and K differ)"
        ) from None


def generate(dataset: str, rows: int, *, sources: int, seed: int = 0, **kwargs: Any) -> list[pa.Table]:
    """``rows`` rows of ``dataset`` ("smartgrid" or "soundcloud", shaped as :data:`DATASETS` says, overridden
    by ``kwargs``) split into ``sources`` time-sorted sources."""
    if dataset not in DATASETS:
        raise InvalidParameterError(f"dataset: expected one of {', '.join(DATASETS)}, got {dataset!r}")
    make = smartgrid_sources if dataset == "smartgrid" else soundcloud_sources
    return make(rows, sources=sources, seed=seed, **{**DATASETS[dataset], **kwargs})


def _matches(comment: Any, with_ip: bool) -> Any:
    hit = pc.match_substring_regex(comment, EMAIL_REGEX)
    if with_ip:
        hit = pc.or_(hit, pc.match_substring_regex(comment, IP_REGEX))
    return hit


def prepare(query: str | Query, data: pa.Table | pa.RecordBatch) -> pa.Table | pa.RecordBatch:
    """The columns ``query`` reads (:attr:`Query.columns`), with its derived columns computed from ``data``
    (one source's table or batch). Raises :class:`~windgate.ColumnNotFoundError` naming the query and
    the data set when a column is missing."""
    q = _query(query)
    names = data.schema.names
    derived = q.derived
    needed = [c for c in q.columns if c not in derived]
    for c in derived:
        needed += DERIVED[c][1]
    if missing := [c for c in dict.fromkeys(needed) if c not in names]:
        raise ColumnNotFoundError(
            f"query {q.name} runs on {q.dataset} data (windgate generate {q.dataset}): column(s) "
            f"{', '.join(missing)} not in the input (columns: {', '.join(names)})"
        )
    arrays, fields = [], []
    for c in q.columns:
        if c == "load":
            value = data.column("value")
            col = pc.if_else(pc.equal(data.column("property"), 1), value, pa.scalar(None, value.type))
        elif c in ("is_mail", "is_mail_ip"):
            col = _matches(data.column("comment"), c == "is_mail_ip").cast(pa.int8())
        elif c in ("mail_id", "mail_ip_id"):
            ids = data.column("id")
            hit = _matches(data.column("comment"), c == "mail_ip_id")
            col = pc.if_else(hit, ids, pa.scalar(None, ids.type))
        else:
            col = data.column(c)
        arrays.append(col)
        fields.append(pa.field(c, col.type))
    schema = pa.schema(fields)
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
    return pa.Table.from_arrays(arrays, schema=schema)


def _source_list(sources: Any) -> list[Any]:
    if isinstance(sources, pa.Table | pa.RecordBatch):
        return [sources]
    sources = list(sources)
    if not sources:
        raise InvalidParameterError("sources: expected at least one source, got an empty list")
    return sources


def run_query(
    name: str | Query,
    sources: pa.Table | Sequence[pa.Table],
    *,
    strategy: str = "auto",
    threads: int | None = None,
) -> pa.Table:
    """Runs query ``name`` over ``sources`` (a table or a list of time-sorted tables of the query's data
    set) with :func:`windgate.window_aggregate`; every strategy returns the same table."""
    import windgate

    q = _query(name)
    prepared = [prepare(q, s) for s in _source_list(sources)]
    return windgate.window_aggregate(prepared, strategy=strategy, threads=threads, **q.kwargs())


def union(sources: pa.Table | Sequence[pa.Table], *, time: str = "ts", source: str = "source") -> pa.Table:
    """All rows of ``sources`` in one table, in windgate's total order ``(time, source, position in the
    source)``, with a ``source`` column (int32) saying where each row came from. One source of this table
    gives the same answer as the list of sources, ``first``/``last`` included, because ties in time then
    keep this order; :func:`spark_query` relies on it."""
    tables = _source_list(sources)
    parts = []
    for i, t in enumerate(tables):
        t = pa.table(t) if isinstance(t, pa.RecordBatch) else t
        if source in t.schema.names:
            raise InvalidParameterError(f"source: the sources already have a column {source!r}")
        n = t.num_rows
        parts.append(
            t.append_column(source, pa.array(np.full(n, i, np.int32))).append_column(
                "__seq", pa.array(np.arange(n, dtype=np.int64))
            )
        )
    merged = pa.concat_tables(parts)
    order = pc.sort_indices(
        merged, sort_keys=[(time, "ascending"), (source, "ascending"), ("__seq", "ascending")]
    )
    return merged.take(order).drop_columns(["__seq"]).combine_chunks()


def _spark_derived(c: str):
    from pyspark.sql import functions as F

    if c == "load":
        return F.when(F.col("property") == 1, F.col("value"))
    with_ip = c in ("is_mail_ip", "mail_ip_id")
    hit = F.col("comment").rlike(EMAIL_REGEX)
    if with_ip:
        hit = hit | F.col("comment").rlike(IP_REGEX)
    if c.startswith("is_"):
        return hit.cast("byte")
    return F.when(hit, F.col("id"))


def spark_query(
    name: str | Query,
    df: DataFrame,
    *,
    strategy: str = "auto",
    threads: int | None = None,
    ordered: bool = True,
) -> DataFrame:
    """Runs query ``name`` on a Spark DataFrame through :func:`windgate.spark.window_aggregate`.

    ``df`` holds the union of the sources in windgate's total order, e.g.
    ``spark.createDataFrame(queries.union(sources))``: the Spark helper breaks ties in time by the
    DataFrame's row order, so ``first`` then picks the row the local multi-source call picks (the order
    ``(ts, source, seq)``). For the order-insensitive queries any order gives the same rows. Derived columns
    that ``df`` lacks are computed with Spark's ``rlike``/``when`` (Java regex; the two patterns read the
    same in RE2). Timestamps come back as Spark's (microseconds); the rows equal :func:`run_query`'s.
    """
    from .spark import window_aggregate

    q = _query(name)
    for c in q.derived:
        if c not in df.columns:
            df = df.withColumn(c, _spark_derived(c))
    missing = [c for c in q.columns if c not in df.columns]
    if missing:
        raise ColumnNotFoundError(
            f"query {q.name} runs on {q.dataset} data: column(s) {', '.join(missing)} not in the DataFrame"
        )
    return window_aggregate(
        df.select(*q.columns), strategy=strategy, threads=threads, ordered=ordered, **q.kwargs()
    )
