"""Ordered pipelines: built-in columnar operators chained and run on all cores, with a sequential result.

A :class:`Pipeline` is a linear chain of operators over Arrow batches (as in
Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory Multicores*): stateless ones
(``filter``, ``project``, ``pairs``) run on any number of workers, partitioned ones (``sessionize``,
``window_count``, ``last_n_before``, ``regression``) on up to one worker per partition of their keys, stateful
ones (``topk``, ``running_mean``) on one worker at a time; a reorder buffer puts every operator's output back
in input order. The result is a function of the row sequence only: the same rows in the same order for any
thread count, scheduler, reorder scheme, partitioning scheme and cut of the input into batches, and equal to
``run(..., sequential=True)``.

Windows and sessions close by *stream time*: the running maximum of the operator's time column minus
``lateness``. Rows must arrive in time order within ``lateness`` (per key for ``sessionize`` and
``last_n_before``); a row that is too late is an error, never silently dropped or revised.

>>> import pyarrow as pa
>>> from windgate import Pipeline, col
>>> clicks = pa.table({"ts": [0, 60, 120, 4000, 4100], "user": [1, 1, 2, 1, 2], "item": [10, 11, 10, 12, 11]})
>>> p = (Pipeline()
...      .filter(col("item") != 12)
...      .sessionize(key="user", time="ts", gap=3600, values="item")
...      .pairs("item", names=("a", "b")))
>>> p.run(clicks, threads=2).to_pylist()
[{'user': 1, 'session_start': 0, 'session_end': 60, 'rows': 2, 'a': 10, 'b': 11}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from . import _native, _specs
from .errors import ColumnTypeError

__all__ = ["Pipeline", "col", "Col", "Expr"]

#: The scheduling heuristics :meth:`Pipeline.run` takes.
SCHEDULERS = ("ct", "ct_input", "lp", "qst", "et")


class Expr:
    """An expression in windgate's spec form (nested tuples). Build with :func:`col`; combine predicates
    with ``&``, ``|``, ``~`` and values with ``+``, ``-``, ``*``; ``spec`` is what the operators receive."""

    __slots__ = ("spec",)

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    def __and__(self, other: Expr) -> Expr:
        return Expr(("and", self.spec, _spec(other, "&")))

    def __or__(self, other: Expr) -> Expr:
        return Expr(("or", self.spec, _spec(other, "|")))

    def __invert__(self) -> Expr:
        return Expr(("not", self.spec))

    def _arith(self, op: str, left: Any, right: Any) -> Expr:
        return Expr((op, _spec(left, op), _spec(right, op)))

    def __mul__(self, other: Any) -> Expr:
        return self._arith("*", self, other)

    def __rmul__(self, other: Any) -> Expr:
        return self._arith("*", other, self)

    def __add__(self, other: Any) -> Expr:
        return self._arith("+", self, other)

    def __radd__(self, other: Any) -> Expr:
        return self._arith("+", other, self)

    def __sub__(self, other: Any) -> Expr:
        return self._arith("-", self, other)

    def __rsub__(self, other: Any) -> Expr:
        return self._arith("-", other, self)

    def __bool__(self) -> bool:
        raise TypeError("a windgate expression has no truth value; combine predicates with &, | and ~")

    def __repr__(self) -> str:
        return f"Expr({self.spec!r})"


class Col(Expr):
    """A column: compare it with a literal (``col("x") >= 3``), test it (``.is_null()``, ``.isin([...])``)
    or compute with it (``col("q") * col("p")``, for :meth:`Pipeline.project`)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def _cmp(self, op: str, value: Any) -> Expr:
        if isinstance(value, Expr):
            raise ColumnTypeError(
                f"col({self.name!r}) {op} ...: a predicate compares a column with a literal, not with "
                "another column or expression"
            )
        return Expr((op, self.name, value))

    def __eq__(self, value: Any) -> Expr:  # type: ignore[override]
        return self._cmp("==", value)

    def __ne__(self, value: Any) -> Expr:  # type: ignore[override]
        return self._cmp("!=", value)

    def __lt__(self, value: Any) -> Expr:
        return self._cmp("<", value)

    def __le__(self, value: Any) -> Expr:
        return self._cmp("<=", value)

    def __gt__(self, value: Any) -> Expr:
        return self._cmp(">", value)

    def __ge__(self, value: Any) -> Expr:
        return self._cmp(">=", value)

    __hash__ = None  # type: ignore[assignment]

    def is_null(self) -> Expr:
        return Expr(("is_null", self.name))

    def is_not_null(self) -> Expr:
        return Expr(("is_not_null", self.name))

    def isin(self, values: Sequence[Any]) -> Expr:
        return Expr(("isin", self.name, list(values)))

    def __repr__(self) -> str:
        return f"col({self.name!r})"


def col(name: str) -> Col:
    """A column of the pipeline's data, for predicates and expressions.

    >>> (col("store") <= 10) & col("category").isin([1, 2])
    Expr(('and', ('<=', 'store', 10), ('isin', 'category', [1, 2])))
    """
    if not isinstance(name, str) or not name:
        raise ColumnTypeError(f"col: expected a column name, got {name!r}")
    return Col(name)


def _spec(value: Any, where: str) -> Any:
    """An operand in spec form: expressions give their spec, literals stay."""
    if isinstance(value, Expr):
        return value.spec
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise ColumnTypeError(f"{where}: expected an expression or a literal, got {type(value).__name__}")


def _predicate(value: Any, param: str) -> Any:
    if isinstance(value, Col):
        raise ColumnTypeError(f"{param}: col({value.name!r}) is a column, not a predicate (compare it)")
    if isinstance(value, Expr):
        return value.spec
    if isinstance(value, (tuple, list)):
        return value
    raise ColumnTypeError(
        f"{param}: expected a predicate such as col('x') > 3 or ('>', 'x', 3), got {type(value).__name__}"
    )


class Pipeline:
    """A chain of built-in columnar operators (immutable: every builder method returns a new pipeline).

    Operators, in the order added:

    * :meth:`filter`, :meth:`project`, :meth:`pairs`: stateless;
    * :meth:`sessionize`, :meth:`window_count`, :meth:`last_n_before`, :meth:`regression`: partitioned by
      key (``partitions`` spreads keys over workers and never changes the result);
    * :meth:`topk`, :meth:`running_mean`: stateful.

    >>> import pyarrow as pa
    >>> sales = pa.table({"ts": [0, 10, 3600, 3610, 7300], "item": [1, 2, 1, 1, 2]})
    >>> p = Pipeline().window_count(keys="item", time="ts", size=3600).topk(k=1, score="count", keys="item",
    ...                                                                       window="window_start")
    >>> [(r["window_start"], r["item"], r["count"]) for r in p.run(sales).to_pylist()]
    [(0, 1, 1), (3600, 1, 2), (7200, 2, 1)]
    >>> p.stats["ops"][0]["kind"], p.stats["rows_in"]
    ('partitioned', 5)
    """

    def __init__(self, ops: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> None:
        self._ops: tuple[tuple[str, dict[str, Any]], ...] = tuple((str(k), dict(v)) for k, v in ops)
        self._stats: dict[str, Any] | None = None

    @property
    def ops(self) -> list[tuple[str, dict[str, Any]]]:
        """The operators in spec form, ``[(kind, params), ...]``."""
        return [(k, dict(v)) for k, v in self._ops]

    @property
    def stats(self) -> dict[str, Any] | None:
        """The last run's report (``None`` before a run): ``rows_in``, ``rows_out``, ``elapsed_s``,
        ``rows_per_s``, ``latency_s`` (mean marker latency between the 20th and 80th percentile), ``threads``,
        ``scheduler``, ``reorder``, ``partitioning``, ``executor``, and per operator (``ops``) ``name``,
        ``kind``, ``partitions``, ``inputs``/``outputs`` (chunks), ``busy_s``, ``allotments``,
        ``max_workers``, ``refused`` (reorder-buffer retries), ``cost_s`` and ``selectivity``."""
        return self._stats

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return "Pipeline(" + " -> ".join(k for k, _ in self._ops) + ")"

    def _with(self, kind: str, **params: Any) -> Pipeline:
        kept = {k: v for k, v in params.items() if v is not None}
        return Pipeline([*self._ops, (kind, kept)])

    # ------------------------------------------------------------------------------------------ operators

    def filter(self, predicate: Expr | tuple) -> Pipeline:
        """Keeps the rows where ``predicate`` is true (SQL three-valued logic: null is not true).

        ``predicate``: ``col("x") > 3``, ``col("e").isin(["a", "b"])``, ``col("u").is_not_null()``, combined
        with ``&``, ``|``, ``~``; or the tuple form ``("and", (">", "x", 3), ("is_null", "y"))``.
        """
        return self._with("filter", predicate=_predicate(predicate, "filter: predicate"))

    def project(self, columns: Sequence[str] | Mapping[str, str | Expr | tuple]) -> Pipeline:
        """Selects, renames and computes columns: ``["a", "b"]`` or ``{"a": "a", "total": col("q") *
        col("p")}`` (``+ - *`` on int64, checked for overflow, or float64)."""
        if isinstance(columns, Mapping):
            spec: Any = {name: _spec(e, f"project: columns[{name!r}]") for name, e in columns.items()}
        else:
            spec = _specs.columns(columns, "project: columns")
        return self._with("project", columns=spec)

    def pairs(self, column: str, *, names: tuple[str, str] | None = None) -> Pipeline:
        """Replaces the list column ``column`` by every unordered pair of its distinct non-null values
        ``(a, b)`` with ``a < b``, one row per pair, in ascending order; ``names`` default
        ``(column + "_a", column + "_b")``."""
        return self._with("pairs", column=column, names=list(names) if names is not None else None)

    def sessionize(
        self,
        *,
        key: str | Sequence[str],
        time: str,
        gap: _specs.Span,
        values: str | None = None,
        counts: Mapping[str, Expr | tuple] | None = None,
        lateness: _specs.Span | None = None,
        allow_unordered: bool = False,
        partitions: int | None = None,
    ) -> Pipeline:
        """One row per session of each key: a key's row joins its open session when its ``time`` is at most
        ``gap`` after the session's end, else starts a new one (``gap=0``: rows of equal time).

        Output: the key columns, ``session_start``, ``session_end``, ``rows``, one int64 column per entry of
        ``counts`` (rows of the session where the predicate holds) and, with ``values``, the list of that
        column's values in arrival order (named like the column). Sessions are emitted when stream time minus
        ``lateness`` passes ``end + gap`` (in order of ``(session_end, key)``), the rest at the end. A row
        earlier than its key's previous row is a ``LateRowError`` unless ``allow_unordered=True`` (then it
        joins the key's open session).
        """
        return self._with(
            "sessionize",
            key=_specs.columns(key, "sessionize: key"),
            time=time,
            gap=_specs.span(gap, "sessionize: gap"),
            values=values,
            counts={n: _predicate(p, f"sessionize: counts[{n!r}]") for n, p in counts.items()}
            if counts
            else None,
            lateness=_specs.span(lateness, "sessionize: lateness"),
            allow_unordered=allow_unordered,
            partitions=partitions,
        )

    def window_count(
        self,
        *,
        keys: str | Sequence[str],
        time: str | None = None,
        size: _specs.Span | None = None,
        min_count: int = 1,
        top_k: int | None = None,
        lateness: _specs.Span | None = None,
        partitions: int | None = None,
    ) -> Pipeline:
        """Rows per key per tumbling window ``[floor(t / size) * size, + size)`` of ``time``; without
        ``time``/``size`` one window over the whole stream.

        Output: the key columns, ``window_start``, ``window_end`` (with ``size``), ``count``. A window is
        emitted once, complete, when stream time minus ``lateness`` reaches its end: all its counts
        together, ordered by key, after every earlier window (so a following :meth:`topk` sees each window
        whole). ``min_count`` drops smaller counts; ``top_k`` keeps only each window's ``k`` largest (ties by
        key), largest first. A row of an already closed window is a ``LateRowError``.
        """
        return self._with(
            "window_count",
            keys=_specs.columns(keys, "window_count: keys"),
            time=time,
            size=_specs.span(size, "window_count: size"),
            min_count=min_count,
            top_k=top_k,
            lateness=_specs.span(lateness, "window_count: lateness"),
            partitions=partitions,
        )

    def topk(
        self,
        *,
        k: int,
        score: str,
        keys: str | Sequence[str] | None = None,
        window: str | None = None,
        descending: bool = True,
    ) -> Pipeline:
        """Per value of ``window`` (which must not decrease; e.g. ``window_count``'s ``window_start``), the
        ``k`` rows with the largest ``score`` (smallest with ``descending=False``), ties by ``keys``
        ascending then arrival; best first, emitted when a later window starts and at the end. Without
        ``window``, one top-k over the whole stream. Null scores rank last; NaN is an error."""
        return self._with(
            "topk",
            k=k,
            score=score,
            keys=_specs.columns(keys, "topk: keys"),
            window=window,
            descending=descending,
        )

    def last_n_before(
        self,
        *,
        key: str | Sequence[str],
        time: str,
        value: str,
        trigger: Expr | tuple,
        n: int = 5,
        within: _specs.Span | None = None,
        candidate: Expr | tuple | None = None,
        output: str | None = None,
        partitions: int | None = None,
    ) -> Pipeline:
        """For every ``trigger`` row (a purchase), the ``value`` of its key's last ``n`` ``candidate`` rows
        (default: the non-trigger rows) that arrived before it within ``within`` time units, most recent
        first: one row each with the key, the trigger's ``time`` and ``value``, and the candidate's value in
        ``output`` (default ``value + "_before"``). Rows of a key must arrive in time order."""
        return self._with(
            "last_n_before",
            key=_specs.columns(key, "last_n_before: key"),
            time=time,
            value=value,
            trigger=_predicate(trigger, "last_n_before: trigger"),
            candidate=_predicate(candidate, "last_n_before: candidate") if candidate is not None else None,
            n=n,
            within=_specs.span(within, "last_n_before: within"),
            output=output,
            partitions=partitions,
        )

    def running_mean(self, column: str, *, output: str | None = None) -> Pipeline:
        """Appends the mean of ``column`` over every row so far (nulls ignored), as float64 in ``output``
        (default ``"mean_" + column``); the sum is exact, so the mean does not depend on batch cuts."""
        return self._with("running_mean", column=column, output=output)

    def regression(
        self,
        *,
        key: str | Sequence[str],
        time: str,
        value: str,
        bucket: _specs.Span,
        max_slope: float | None = None,
        lateness: _specs.Span | None = None,
        partitions: int | None = None,
    ) -> Pipeline:
        """A running least-squares line per key through the sums of ``value`` per ``bucket`` of ``time``
        (x = buckets since the key's first, y = the bucket's sum), re-fitted as each bucket closes: the key,
        ``window_start``, ``points``, ``slope``, ``intercept`` once the key has two points, only when
        ``slope <= max_slope`` if given. Integer values are fitted exactly (128-bit sums)."""
        return self._with(
            "regression",
            key=_specs.columns(key, "regression: key"),
            time=time,
            value=value,
            bucket=_specs.span(bucket, "regression: bucket"),
            max_slope=max_slope,
            lateness=_specs.span(lateness, "regression: lateness"),
            partitions=partitions,
        )

    # ------------------------------------------------------------------------------------------------ run

    def schema(self, input_schema: pa.Schema) -> pa.Schema:
        """The output schema for ``input_schema``; checks every operator's columns and types."""
        if not isinstance(input_schema, pa.Schema):
            got = type(input_schema).__name__
            raise ColumnTypeError(f"input_schema: expected a pyarrow.Schema, got {got}")
        return _native.pipeline_schema(self.ops, input_schema)

    def run(
        self,
        data: Any,
        *,
        threads: int | None = None,
        scheduler: str = "ct",
        reorder: str = "nonblocking",
        partitioning: str = "hybrid",
        sequential: bool = False,
        reorder_slots: int | None = None,
        time_slice: float | None = None,
        ct_window: float | None = None,
        qst_capacity: int | None = None,
        marker_every: int | None = None,
        max_pending: int | None = None,
        chunk_rows: int | None = None,
    ) -> pa.Table:
        """Runs the pipeline over ``data`` and returns the output rows; the report is in :attr:`stats`.

        Args:
            data: a pyarrow Table, RecordBatch or RecordBatchReader, or anything with ``__arrow_c_stream__``
                (polars, duckdb), in arrival order.
            threads: worker threads (``None``: all cores).
            scheduler: which operator a free worker takes (the paper's heuristics): ``"ct"`` (current
                throughput, the paper's best throughput), ``"ct_input"`` (CT normalised by input ratios),
                ``"lp"`` (last in pipeline, lowest latency), ``"qst"`` (queue-size throttling), ``"et"``
                (estimated time).
            reorder: ``"nonblocking"`` (the paper's reorder buffer) or ``"locked"`` (the lock-based baseline).
            partitioning: ``"hybrid"`` (any worker serves any partition in arrival order) or
                ``"partitioned"`` (partitions bound to workers; the baseline).
            sequential: run the sequential executor instead (the definition of the result).
            reorder_slots, time_slice, ct_window, qst_capacity, marker_every, max_pending: the runtime's
                constants (reorder buffer slots S, time slice and CT window in seconds, QST's capacity C,
                a latency marker every this many chunks, chunks admitted ahead of the workers).
            chunk_rows: input batches are cut into chunks of at most this many rows (default 8192).

        None of these options changes the result.
        """
        table, stats = _native.run_pipeline(
            _specs.arrow_source(data),
            self.ops,
            threads=threads,
            scheduler=scheduler,
            reorder=reorder,
            partitioning=partitioning,
            sequential=sequential,
            reorder_slots=reorder_slots,
            time_slice=time_slice,
            ct_window=ct_window,
            qst_capacity=qst_capacity,
            marker_every=marker_every,
            max_pending=max_pending,
            chunk_rows=chunk_rows,
        )
        self._stats = stats
        return table
