"""Continuous preference queries over sliding windows: skyline, top-delta dominant and top-k, as in
Mencagli, Torquati, Danelutto, De Matteis, *Parallel Continuous Preference Queries over Out-of-Order and
Bursty Data Streams* (2017).

Each window's answer is computed per group by the paper's pane-based decomposition (a pane-level
query (PLQ) reduces each pane, a window-level query (WLQ) merges the panes of a window), on one
thread or on the paper's PLQ/WLQ farm (see "Data path" in docs/architecture.md). Every strategy and thread
count returns the same rows in the same order.

Preferences are per dimension: ``"min"`` (smaller is better, the default) or ``"max"``. A row ``a`` dominates
``b`` when it is at least as good in every dimension and strictly better in one; identical rows never dominate
each other, so duplicates of a skyline row are all kept. ``-0.0`` equals ``0.0``; a NaN or null in a
dimension or score column is an error naming the column.

>>> import pyarrow as pa, windgate
>>> t = pa.table({"ts": [0, 1, 2, 3], "price": [5.0, 3.0, 4.0, 1.0], "dist": [1.0, 2.0, 1.0, 4.0]})
>>> windgate.skyline(t, time="ts", size=4, dims=["price", "dist"]).column("ts").to_pylist()
[1, 2, 3]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import pyarrow as pa

from . import _native, _options, _specs
from ._checkpoint import Checkpointed
from .errors import SnapshotMismatchError

__all__ = ["skyline", "top_dominant", "topk", "SkylineQuery", "TopDominantQuery", "TopKQuery"]

Prefer = str | Sequence[str]


def skyline(
    data: Any,
    *,
    time: str,
    size: _specs.Span,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    dims: str | Sequence[str],
    prefer: Prefer = "min",
    by: str | list[str] | None = None,
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The skyline (Pareto front) of each sliding window, per group.

    A row is in a window's skyline when no other row of the window (and group) dominates it: at least as good
    in every dimension of ``dims`` and strictly better in one. Duplicates do not dominate each other.

    Args:
        data: a pyarrow Table, RecordBatch or RecordBatchReader, or anything with ``__arrow_c_stream__``
            (polars, pandas, duckdb).
        time: the time column: an integer column (any unit) or a timestamp/date column.
        size: window length: an int in the time column's unit, or a duration string (``"10s"``) or
            ``timedelta`` for timestamp columns.
        slide: distance between window starts (default: ``size``, tumbling windows). At most ``size``.
        offset: shift of the window grid: window ``j`` covers ``[j*slide + offset, j*slide + offset + size)``.
        dims: the preference dimensions: numeric columns (integers or floats, no NaN or null).
        prefer: ``"min"`` (smaller is better), ``"max"``, or a list with one of them per dimension.
        by: group column(s): each group has its own skyline. Null is a group of its own.
        lateness: ``None`` (exact over all rows whatever their order), a bound K (rows more than K behind the
            largest time seen are late), or ``"adaptive"`` (an adaptive lateness bound, K-slack, as in
            Mencagli et al. 2017).
        on_late: ``"drop"`` (dropped and counted) or ``"error"``.
        null_time: ``"error"`` or ``"drop"`` for rows whose time is null.
        threads: worker threads (``None``: all cores).
        strategy: ``"auto"`` (the farm with more than one thread, else ``"pane"``), ``"pane"`` (panes on one
            thread), ``"farm"`` (the paper's PLQ/WLQ farm), ``"recompute"`` (every window from its rows, the
            paper's Fig. 14 baseline) or ``"reference"`` (the definition over all pairs; slow, for tests).
            Every strategy returns the same rows in the same order.
        farm: the farm's knobs, which change who computes what but never the result: ``scheduler``
            (``"as_pid"``, ``"pb_rr"``, ``"tb_rr"``), ``window_scheduler`` (``"win_fb"`` or ``"win_rr"``),
            ``split_threshold`` (rows per pane partition; default adaptive), ``setpoint`` (AS_PID's
            utilisation target) and ``sample_interval`` (seconds).

    Returns:
        A pyarrow Table: ``window_start``, ``window_end`` (the time column's type for timestamps, else int64),
        then every input column, unchanged; one row per skyline row of each window and group, ordered by
        ``(window_start, by...)`` (nulls first) and then by time and arrival order.

    Example:
        >>> import pyarrow as pa, windgate
        >>> t = pa.table({"ts": [0, 1, 2, 5], "price": [5.0, 3.0, 4.0, 1.0], "stars": [4, 4, 5, 1]})
        >>> out = windgate.skyline(t, time="ts", size=4, dims=["price", "stars"], prefer=["min", "max"])
        >>> out.column("window_start").to_pylist(), out.column("ts").to_pylist()
        ([0, 0, 4], [1, 2, 5])
    """
    kwargs = _options.preference_spec("skyline", locals(), "windgate.skyline")
    return _native.preference(_specs.arrow_source(data), **kwargs)


def top_dominant(
    data: Any,
    *,
    time: str,
    size: _specs.Span,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    dims: str | Sequence[str],
    delta: int,
    prefer: Prefer = "min",
    by: str | list[str] | None = None,
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The top-delta dominant skyline rows of each sliding window, per group (Mencagli et al. 2017).

    ``kappa`` of a row ``t`` is the largest number of dimensions in which some other row, strictly better
    than ``t`` in at least one dimension, is at least as good as ``t`` (0 if no row is strictly better
    anywhere): ``t`` is ``kappa``-dominated, and ``kappa == len(dims)`` means dominated. The query keeps the
    ``delta`` skyline rows of lowest ``kappa``, ties by time and arrival order.

    Args:
        data, time, size, slide, offset, dims, prefer, by, lateness, on_late, null_time, threads, strategy,
            farm: as in :func:`skyline`.
        delta: how many rows to keep per window and group (an int >= 0).

    Returns:
        A pyarrow Table: ``window_start``, ``window_end``, every input column, then ``kappa`` (int32); the
        kept rows of each window and group in time and arrival order, windows and groups ordered as in
        :func:`skyline`.

    Example:
        >>> import pyarrow as pa, windgate
        >>> t = pa.table({"ts": [0, 1, 2, 3], "x": [1, 2, 1, 0], "y": [1, 2, 3, 0], "z": [5, 1, 3, 9]})
        >>> out = windgate.top_dominant(t, time="ts", size=10, dims=["x", "y", "z"], delta=2)
        >>> out.select(["ts", "kappa"]).to_pylist()
        [{'ts': 0, 'kappa': 2}, {'ts': 3, 'kappa': 1}]
    """
    kwargs = _options.preference_spec("top_dominant", locals(), "windgate.top_dominant")
    return _native.preference(_specs.arrow_source(data), **kwargs)


def topk(
    data: Any,
    *,
    time: str,
    size: _specs.Span,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    score: str,
    k: int,
    descending: bool = True,
    by: str | list[str] | None = None,
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The ``k`` best rows by a score column of each sliding window, per group.

    Args:
        data, time, size, slide, offset, by, lateness, on_late, null_time, threads, strategy, farm: as in
            :func:`skyline`.
        score: the score column: numeric, no NaN or null.
        k: how many rows to keep per window and group (an int >= 0).
        descending: ``True`` (a higher score is better) or ``False`` (lower is better).

    Returns:
        A pyarrow Table: ``window_start``, ``window_end``, then every input column; each window and group's
        rows best score first, equal scores by time and arrival order; windows and groups ordered as in
        :func:`skyline`.

    Example:
        >>> import pyarrow as pa, windgate
        >>> t = pa.table({"ts": [0, 1, 2, 3], "v": [2.0, 9.0, 9.0, 4.0]})
        >>> windgate.topk(t, time="ts", size=10, score="v", k=3).column("ts").to_pylist()
        [1, 2, 3]
        >>> windgate.topk(t, time="ts", size=10, score="v", k=2, descending=False).column("v").to_pylist()
        [2.0, 4.0]
    """
    kwargs = _options.preference_spec("topk", locals(), "windgate.topk")
    return _native.preference(_specs.arrow_source(data), **kwargs)


Q = TypeVar("Q", bound="_PreferenceQuery")


class _PreferenceQuery(Checkpointed):
    """push/flush/stats/schema over ``_native.PreferenceQuery``, with checkpoints.

    The three classes share one native class; ``_query`` names the query a class runs, and :meth:`restore`
    refuses a snapshot of another query.
    """

    _native_class: ClassVar[Any] = _native.PreferenceQuery
    _query: ClassVar[str]

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._build(_options.preference_spec(self._query, values, self._entry))

    @classmethod
    def restore(cls: type[Q], data: bytes, **overrides: Any) -> Q:
        """An operator continuing from ``data`` (the bytes of :meth:`snapshot`), with the rows and order the
        uninterrupted operator would have produced; windows already emitted do not come out again.

        ``overrides`` may set ``threads``, ``strategy`` and ``farm``; any other keyword must equal the
        snapshot's, and the snapshot must be of this class's query, else
        :class:`windgate.errors.SnapshotMismatchError` names the parameter. Damaged bytes raise
        :class:`windgate.errors.SnapshotError`.
        """
        if isinstance(data, (bytes, bytearray, memoryview)):
            info = _native.snapshot_info(bytes(data))
            query = json.loads(info["params"]).get("query") if info["operator"] == "preference" else None
            if query is not None and query != cls._query:
                raise SnapshotMismatchError(
                    f"query: the snapshot is of a {query} query, not of a {cls._query} query; restore it "
                    f"with the class that took it"
                )
        return super().restore(data, **overrides)

    def push(self, batch: Any) -> pa.RecordBatch:
        """Pushes a batch (or a table or stream, batch by batch).

        Returns the rows of the windows that became final (a possibly empty ``pyarrow.RecordBatch``).
        """
        return self._call(self._inner.push, _specs.arrow_source(batch, "batch"))

    def flush(self) -> pa.RecordBatch:
        """End of stream: returns the rows of every window still open. The query takes no more batches."""
        return self._call(self._inner.flush)

    @property
    def stats(self) -> dict[str, Any]:
        """Counters: ``batches_in``, ``rows_in``, ``late_rows``, ``null_time_rows``, ``rows_out``,
        ``windows_out``, ``watermark`` (in time-column units) and ``watermark_time`` (ISO 8601 text in the
        column's zone on a timestamp column), ``slack``, ``threads``, ``strategy``; with the farm also
        ``plq_busy_s`` and ``wlq_busy_s`` (busy seconds per worker), ``punctuations``, ``panes_closed``,
        ``panes_split``, ``split_factor``, ``theta_b``, ``alpha``, ``utilisation`` and ``window_tasks``."""
        return self._call(lambda: self._inner.stats)

    @property
    def schema(self) -> pa.Schema | None:
        """The output schema, once the first batch has been pushed."""
        return self._inner.schema


class SkylineQuery(_PreferenceQuery):
    """Streaming skyline: push batches as they arrive, get each window's skyline once the window is final.

    Takes the keyword arguments of :func:`skyline`. A window is final when the watermark (the largest time
    seen minus ``lateness``) passes its end; with ``lateness=None`` nothing is final until :meth:`flush`.
    Pushes return the same rows for any thread count, strategy and batch split, and all pushes together
    return what :func:`skyline` returns on the same rows.

    Example:
        >>> import pyarrow as pa, windgate
        >>> q = windgate.SkylineQuery(time="ts", size=10, dims=["x", "y"], lateness=0)
        >>> batch = pa.record_batch({"ts": [1, 2, 12], "x": [1.0, 2.0, 5.0], "y": [2.0, 3.0, 5.0]})
        >>> q.push(batch).to_pydict()  # window [0, 10) is final: (1, 2) dominates (2, 3)
        {'window_start': [0], 'window_end': [10], 'ts': [1], 'x': [1.0], 'y': [2.0]}
        >>> q.flush().column("ts").to_pylist()
        [12]
        >>> q.stats["rows_in"], q.stats["late_rows"]
        (3, 0)

    A query survives failure: :meth:`snapshot` writes its whole state (open windows, watermark, counters) as
    bytes, :meth:`restore` continues from them (with any ``threads`` or ``strategy``), and pickling goes
    through the same bytes. Windows already emitted never come out again.

        >>> q = windgate.SkylineQuery(time="ts", size=10, dims=["x", "y"], lateness=0)
        >>> q.push(pa.record_batch({"ts": [1, 2], "x": [1.0, 0.0], "y": [2.0, 3.0]})).num_rows
        0
        >>> data = q.snapshot()
        >>> r = windgate.SkylineQuery.restore(data, threads=2)
        >>> r.push(pa.record_batch({"ts": [12], "x": [5.0], "y": [5.0]})).column("ts").to_pylist()
        [1, 2]
        >>> import pickle
        >>> pickle.loads(pickle.dumps(r)).flush().column("ts").to_pylist()
        [12]
    """

    _query = "skyline"
    _declaration = _options.PREFERENCE["skyline"]
    _entry = "windgate.SkylineQuery"

    def __init__(
        self,
        *,
        time: str,
        size: _specs.Span,
        slide: _specs.Span | None = None,
        offset: _specs.Span = 0,
        dims: str | Sequence[str],
        prefer: Prefer = "min",
        by: str | list[str] | None = None,
        lateness: _specs.Span | None = None,
        on_late: str = "drop",
        null_time: str = "error",
        threads: int | None = None,
        strategy: str = "auto",
        farm: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(locals())


class TopDominantQuery(_PreferenceQuery):
    """Streaming top-delta dominant query: the keyword arguments of :func:`top_dominant`, used like
    :class:`SkylineQuery`.

    Example:
        >>> import pyarrow as pa, windgate
        >>> q = windgate.TopDominantQuery(time="ts", size=10, dims=["x", "y"], delta=1, lateness=5)
        >>> q.push(pa.record_batch({"ts": [1, 2, 3], "x": [1.0, 2.0, 0.0], "y": [2.0, 0.0, 3.0]})).num_rows
        0
        >>> q.flush().to_pydict()
        {'window_start': [0], 'window_end': [10], 'ts': [1], 'x': [1.0], 'y': [2.0], 'kappa': [1]}
    """

    _query = "top_dominant"
    _declaration = _options.PREFERENCE["top_dominant"]
    _entry = "windgate.TopDominantQuery"

    def __init__(
        self,
        *,
        time: str,
        size: _specs.Span,
        slide: _specs.Span | None = None,
        offset: _specs.Span = 0,
        dims: str | Sequence[str],
        delta: int,
        prefer: Prefer = "min",
        by: str | list[str] | None = None,
        lateness: _specs.Span | None = None,
        on_late: str = "drop",
        null_time: str = "error",
        threads: int | None = None,
        strategy: str = "auto",
        farm: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(locals())


class TopKQuery(_PreferenceQuery):
    """Streaming top-k: the keyword arguments of :func:`topk`, used like :class:`SkylineQuery`.

    Example:
        >>> import pyarrow as pa, windgate
        >>> q = windgate.TopKQuery(time="ts", size=10, by="k", score="v", k=1, lateness=0)
        >>> q.push(pa.record_batch({"ts": [1, 2, 3, 10], "k": [0, 1, 0, 0], "v": [3, 1, 5, 0]})).to_pydict()
        {'window_start': [0, 0], 'window_end': [10, 10], 'ts': [3, 2], 'k': [0, 1], 'v': [5, 1]}
        >>> q.flush().column("ts").to_pylist()
        [10]
    """

    _query = "topk"
    _declaration = _options.PREFERENCE["topk"]
    _entry = "windgate.TopKQuery"

    def __init__(
        self,
        *,
        time: str,
        size: _specs.Span,
        slide: _specs.Span | None = None,
        offset: _specs.Span = 0,
        score: str,
        k: int,
        descending: bool = True,
        by: str | list[str] | None = None,
        lateness: _specs.Span | None = None,
        on_late: str = "drop",
        null_time: str = "error",
        threads: int | None = None,
        strategy: str = "auto",
        farm: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(locals())
