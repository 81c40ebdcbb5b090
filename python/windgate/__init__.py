"""windgate: deterministic parallel sliding-window stream operators over Arrow, for Python and PySpark.

Arrow goes in, Arrow comes out, and the answer is the same every time: for any thread count, batch split or
arrival timing, every operator returns its single-threaded reference engine's rows in the same order.

>>> import pyarrow as pa, windgate
>>> t = pa.table({"ts": [1, 5, 12, 25], "k": ["a", "b", "a", "a"], "v": [1.0, 2.0, 3.0, 4.0]})
>>> out = windgate.window_aggregate(t, time="ts", size=10, by="k", aggs={"*": "count", "v": "sum"})
>>> out.to_pylist()[0]
{'k': 'a', 'window_start': 0, 'window_end': 10, 'count': 1, 'sum_v': 1.0}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import pyarrow as pa

from . import _native, _options, _specs
from ._checkpoint import Checkpointed
from .errors import (
    BackpressureError,
    ColumnNotFoundError,
    ColumnTypeError,
    InputError,
    InvalidParameterError,
    InvalidValueError,
    LateRowError,
    NullTimeError,
    OperatorPoisonedError,
    SchemaMismatchError,
    SnapshotError,
    SnapshotMismatchError,
    SparkEnvironmentError,
    WindgateError,
    WindgateOverflowError,
)
from .join import Band, BandJoiner, Eq, band, band_join, eq
from .pipeline import Pipeline, col
from .preference import SkylineQuery, TopDominantQuery, TopKQuery, skyline, top_dominant, topk

__version__: str = _native.__version__

__all__ = [
    "window_aggregate",
    "WindowAggregator",
    "WindowsAndLate",
    "band_join",
    "BandJoiner",
    "band",
    "eq",
    "Band",
    "Eq",
    "skyline",
    "top_dominant",
    "topk",
    "SkylineQuery",
    "TopDominantQuery",
    "TopKQuery",
    "Pipeline",
    "col",
    "WindgateError",
    "BackpressureError",
    "InvalidParameterError",
    "ColumnNotFoundError",
    "ColumnTypeError",
    "SchemaMismatchError",
    "LateRowError",
    "WindgateOverflowError",
    "NullTimeError",
    "InvalidValueError",
    "OperatorPoisonedError",
    "InputError",
    "SparkEnvironmentError",
    "SnapshotError",
    "SnapshotMismatchError",
    "__version__",
]

Aggs = Mapping[str, "str | list[str] | tuple[str, ...]"]


class WindowsAndLate(NamedTuple):
    """What :func:`window_aggregate` returns with ``on_late="keep"``: the windows (exactly the table
    ``on_late="drop"`` returns) and the late rows, each with every input column, then ``source`` (several
    sources only) and the ``watermark`` it met on arrival, in arrival order."""

    windows: pa.Table
    late: pa.Table


def window_aggregate(
    data: Any,
    *,
    time: str,
    size: _specs.Span | None = None,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    gap: _specs.Span | None = None,
    rows: int | None = None,
    rows_slide: int | None = None,
    tz: str | None = None,
    by: str | list[str] | None = None,
    aggs: Aggs,
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
    order_by: str | None = None,
    input: str = "rows",
    output: str = "windows",
    row_offset: int = 0,
    allowed_lateness: _specs.Span | None = None,
    emit: str = "final",
    interval: _specs.Span | None = None,
) -> pa.Table | WindowsAndLate:
    """Sliding-, tumbling- or session-window aggregation, per group, over a whole input.

    Windows are aligned like Spark's ``window()``: window ``j`` covers ``[j*slide + offset, j*slide + offset +
    size)``. A window is output for a group when it holds at least one row of that group.

    With ``gap`` instead of ``size``/``slide``, windows are sessions, as Spark's ``session_window(col, gap)``:
    per group, a row at time ``t`` opens ``[t, t + gap)``, and a row whose time is at most a session's end
    joins it, extending the end to its own ``t + gap`` (a row exactly at the end joins, as in Spark); so a
    session is ``[first row's time, last row's time + gap)``. A row arriving out of order (within
    ``lateness``) may bridge two sessions into one. Sessions come out ordered by ``(window_end,
    window_start, by...)``.

    With ``rows`` instead, windows are count windows, as Flink's ``countWindow(rows, rows_slide)``: per group,
    rows are counted in the total order (time, then ``order_by``, source and arrival), and at every
    ``rows_slide``-th row of the group a window fires over the group's last ``rows`` rows (fewer at the start:
    with ``rows=5, rows_slide=2`` the windows hold rows 1-2, 1-4, 2-6, 4-8, ...). The rows after a group's
    last firing never fire, not even at the end (as in Flink). Windows come out in the order of the rows that
    completed them, with ``window_first``, ``window_last`` (the times of the first and last row covered) and
    ``window_rows`` instead of ``window_start`` and ``window_end``.

    Args:
        data: a pyarrow Table, RecordBatch or RecordBatchReader, anything with ``__arrow_c_stream__`` (polars,
            pandas, duckdb), or a list of those (several sources, merged by time).
        time: the time column: int64 (any unit) or a timestamp/date column.
        size: window length: an int in the time column's unit, or a duration string (``"10s"``,
            ``"5 minutes"``) or ``timedelta`` for timestamp columns.
        slide: distance between window starts (default: ``size``, tumbling windows). At most ``size``.
        offset: shift of the window grid (Spark's ``startTime``).
        gap: session windows: the inactivity gap (an int in the time column's unit, a duration string or a
            ``timedelta``; positive), instead of ``size`` and ``slide``. Runs on the session engine
            (``strategy`` ``"auto"`` or ``"reference"``; one thread); ``input``/``output="partials"``
            and ``offset`` are for sliding windows only.
        rows: count windows: rows per window (a positive int), instead of ``size``, ``slide`` and ``gap``.
            Runs on the count-window engine (``strategy`` ``"auto"`` or ``"reference"``; one thread);
            ``offset``, ``input``/``output="partials"`` and the update mode are for time windows only. A
            row waits until the watermark passes its time (its place in the order is known then): the
            memory holds those rows and each group's last ``rows`` rows (as partial states). A window
            costs ``rows / gcd(rows, rows_slide)`` combines.
        rows_slide: count windows: rows between firings (default ``rows``: tumbling count windows); above
            ``rows``, the rows between windows are in none.
        tz: a time zone (``"Europe/Berlin"``, ``"+05:30"``, or a ``zoneinfo.ZoneInfo``) whose local days
            windows of whole days (``"1d"``, ``"1w"``; size and slide whole days) follow, across
            daylight-saving changes (days of 23 and 25 hours), as Polars' ``group_by_dynamic`` and DuckDB's
            ``time_bucket`` do; ``offset`` is then a time of day (``"6h"``: days from 06:00 local), and
            whole weeks start on Mondays. With ``tz``, ``size="1mo"`` (``"3mo"``, ...) gives calendar
            months from the first. Windows shorter than a day keep the UTC grid. The time column must be a
            timestamp with a zone. ``docs/time.md``, "Calendar windows in a time zone".
        by: group column(s). Null is a group of its own.
        aggs: output aggregates: ``{"*": "count", "kwh": ["sum", "max"]}``. Functions: ``count``, ``sum``,
            ``min``, ``max``, ``mean``, ``var``, ``std`` (sample), ``first``, ``last`` (by time, then
            ``order_by``, then source, then arrival). Nulls are ignored; all-null gives null. Float sums
            are exact and correctly rounded, so they do not depend on row order.
        lateness: ``None`` (exact over all rows whatever their order), a bound K (rows more than K behind the
            largest time seen are late), or ``"adaptive"`` (an adaptive lateness bound, K-slack, as in
            Mencagli et al. 2017).
        on_late: what happens to a late row (one below its source's watermark on arrival; only with
            ``lateness``): ``"drop"`` (dropped and counted in ``stats["late_rows"]``), ``"error"`` (the
            call raises :class:`windgate.errors.LateRowError`), or ``"keep"``: dropped from the windows as
            with ``"drop"``, and returned as well (see Returns).
        null_time: ``"error"`` or ``"drop"`` for rows whose time is null.
        threads: worker threads (``None``: all cores).
        strategy: ``"auto"`` (the fastest engine measured on 2 cores: ``"shard"`` for in-memory input of at
            least 2**20 rows and more than one thread, else ``"pane"``; the streaming operator picks the farm
            when its first push has at least 2**15 rows and windows have at most 100 panes),
            ``"pane"`` (single-threaded panes), ``"farm"`` (the parallel pane farm of Mencagli et al. 2017),
            ``"shard"`` (key-partitioned pane engines: each worker numbers and aggregates the keys hashing to
            it, the caller only shares batches and merges finished windows),
            ``"rrcpa"`` (the pane-based approach of Beicht's thesis on disjoint parallel sliding-window
            aggregation), ``"hsa"`` and ``"rra"`` (its line baselines), ``"hoa"`` and ``"rrca"`` (its ring
            baselines: hash-once and round-robin-cyclic), the multiway designs of Cederman et al. for several
            time-sorted sources (``"mq"``: locked queues merged by the output thread,
            ``"mqlf"``: the same with lock-free queues, ``"tumlsc"``: a T-Gate merging the sources,
            ``"tumlmc"``: a T-Gate read by ``threads`` key-partitioned updaters over a W-Hive, ``"wiml"``: the
            input threads update the W-Hive directly; an input thread per source; ``lateness`` must be
            ``None``) or ``"reference"`` (the plain oracle). Every strategy returns the same rows in the same
            order.
        farm: the pane farm's knobs, which change who computes what but never the result:
            ``scheduler`` (``"as_pid"`` default, ``"as"``, ``"pb_rr"``, ``"tb_rr"``), ``window_scheduler``
            (``"win_fb"`` default or ``"win_rr"``), ``split_threshold`` (rows per pane partition; default
            adaptive), ``setpoint`` (AS_PID's utilisation target, 0.9) and ``sample_interval`` (seconds, 1.0).
        order_by: an integer or timestamp column (no nulls) that orders rows of equal time for ``first`` and
            ``last`` before the source and arrival do: with a unique one, splitting the same rows over any
            number of sources, in any batches, gives the same result.
        input: ``"rows"`` (default) or ``"partials"``: the rows are partial states that an operator with
            ``output="partials"`` and the same window and ``aggs`` emitted elsewhere; they are merged (in any
            order, exactly) into windows. See "Two-phase aggregation" in the README.
        output: ``"windows"`` (default) or ``"partials"``: instead of windows, emit one row per (key, pane)
            with the pane's exact partial states (``by`` columns, the time column holding the pane's start,
            then ``<output name>__n``, ``__sum``, ... per aggregate). Runs on the pane engine.
        row_offset: arrival number of the first row (default 0). Rows aggregated in several places keep
            their place in the whole input's arrival order, which breaks ``first``/``last`` ties: give each
            place the number of rows before its part.
        allowed_lateness: update mode (needs ``lateness``): a fired window keeps taking late rows for this
            much longer and fires again with each, marked by an extra ``revision`` column (0 on the on-time
            firing); a late row counts in each of its windows whose end is above the watermark it met minus
            ``allowed_lateness``, and is dropped only when it has none (Flink's allowed lateness, Spark's
            update mode). ``docs/architecture.md``, "Update mode".
        emit: ``"final"`` (default: each window once) or ``"early"``: also, each time the watermark crosses a
            multiple of ``interval``, the open windows that took rows since their last firing fire their
            partial result, marked by an extra ``final`` column (false for early firings; the on-time row is
            the one ``"final"`` emits).
        interval: the period of ``emit="early"`` in event time.

    Returns:
        A pyarrow Table: the ``by`` columns, ``window_start``, ``window_end``, then ``count`` and
        ``<func>_<column>`` in the order given, ordered by ``(window_start, by...)`` with nulls first.
        With ``output="partials"``: the partial-state rows, ordered by ``(pane start, by...)``.
        In the update mode, ``revision`` (``allowed_lateness``) and ``final`` (``emit="early"``) follow the
        aggregates, and a call's rows are revisions of older windows, on-time windows, then early firings.
        With ``on_late="keep"``: a :class:`WindowsAndLate` pair ``(windows, late)``; ``windows`` is the table
        above, ``late`` the late rows with every input column, then ``source`` (several sources only) and the
        ``watermark`` each met, in arrival order.

    Example:
        >>> import pyarrow as pa, windgate
        >>> t = pa.table({"ts": [0, 4, 7, 11], "v": [1, 2, 3, 4]})
        >>> out = windgate.window_aggregate(t, time="ts", size=10, slide=5, aggs={"v": ["sum", "max"]})
        >>> out.column("window_start").to_pylist(), out.column("sum_v").to_pylist()
        ([-5, 0, 5, 10], [3, 6, 7, 4])

        Two-phase: partial states of two halves, merged, give the same windows.

        >>> q = dict(time="ts", size=10, slide=5, aggs={"v": ["sum", "max"]})
        >>> a = windgate.window_aggregate(t.slice(0, 2), output="partials", **q)
        >>> b = windgate.window_aggregate(t.slice(2), output="partials", row_offset=2, **q)
        >>> windgate.window_aggregate([pa.concat_tables([b, a])], input="partials", **q).equals(out)
        True

        Late rows as a side output: with a lateness of 2, the row at 3 arrives after 20 moved the watermark
        to 18.

        >>> s = pa.table({"ts": [1, 20, 3, 19], "v": [1, 2, 3, 4]})
        >>> windows, late = windgate.window_aggregate(
        ...     s, time="ts", size=10, aggs={"v": "sum"}, lateness=2, on_late="keep")
        >>> windows.to_pydict()
        {'window_start': [0, 10, 20], 'window_end': [10, 20, 30], 'sum_v': [1, 4, 2]}
        >>> late.to_pydict()
        {'ts': [3], 'v': [3], 'watermark': [18]}

        Allowed lateness: a window that fired takes a late row within 10 of the watermark and fires again.

        >>> agg = windgate.WindowAggregator(
        ...     time="ts", size=10, aggs={"v": "sum"}, lateness=2, allowed_lateness=10)
        >>> agg.push(pa.record_batch({"ts": [1, 20], "v": [1, 2]})).to_pydict()
        {'window_start': [0], 'window_end': [10], 'sum_v': [1], 'revision': [0]}
        >>> agg.push(pa.record_batch({"ts": [3], "v": [3]})).to_pydict()
        {'window_start': [0], 'window_end': [10], 'sum_v': [4], 'revision': [1]}

        Early results: open windows fire their partial sums each time the watermark crosses a multiple of 5.

        >>> agg = windgate.WindowAggregator(
        ...     time="ts", size=10, aggs={"v": "sum"}, lateness=0, emit="early", interval=5)
        >>> agg.push(pa.record_batch({"ts": [1, 6], "v": [1, 2]})).to_pydict()
        {'window_start': [0], 'window_end': [10], 'sum_v': [3], 'final': [False]}
        >>> agg.push(pa.record_batch({"ts": [12], "v": [4]})).to_pydict()
        {'window_start': [0, 10], 'window_end': [10, 20], 'sum_v': [3, 4], 'final': [True, False]}

        Session windows: rows closer than ``gap`` to each other form one session per group.

        >>> s = pa.table({"ts": [0, 3, 20, 8, 30], "k": ["a", "a", "a", "b", "a"]})
        >>> out = windgate.window_aggregate(s, time="ts", gap=5, by="k", aggs={"*": "count"})
        >>> out.column("k").to_pylist(), out.column("window_start").to_pylist()
        (['a', 'b', 'a', 'a'], [0, 8, 20, 30])
        >>> out.column("window_end").to_pylist(), out.column("count").to_pylist()
        ([8, 13, 25, 35], [2, 1, 1, 1])

        Count windows: per group, every 2 rows a window over the last 3 (the row at 9 never fires).

        >>> s = pa.table({"ts": [1, 2, 3, 4, 5, 6, 9], "v": [1, 2, 3, 4, 5, 6, 7]})
        >>> out = windgate.window_aggregate(s, time="ts", rows=3, rows_slide=2, aggs={"v": "sum"})
        >>> out.to_pydict()
        {'window_first': [1, 2, 4], 'window_last': [2, 4, 6], 'window_rows': [2, 3, 3], 'sum_v': [3, 9, 15]}
    """
    kwargs = _options.WINDOW_AGGREGATE.forward("windgate.window_aggregate", locals())
    sources = _specs.sources(data)
    out = _native.window_aggregate(sources, **kwargs, in_memory=_specs.in_memory(sources))
    return WindowsAndLate(*out) if isinstance(out, tuple) else out


class WindowAggregator(Checkpointed):
    """Streaming window aggregation: push batches as they arrive, get each window once it is final.

    Takes the keyword arguments of :func:`window_aggregate` plus ``sources`` (how many sources push into it).
    With ``gap=``, windows are sessions (see :func:`window_aggregate`); a session is final, and emitted,
    once the watermark passes its end (``stats["open_slots"]`` counts the open sessions,
    ``stats["next_close"]`` is the least watermark that closes one, ``None`` with none open). With
    ``rows=``, windows are count windows (see :func:`window_aggregate`): a row is counted once the watermark
    passes its time, and a window fires when its completing row is counted. A window is final when the
    watermark passes its end: the watermark is the largest time seen minus
    ``lateness`` (the minimum over sources). With ``lateness=None`` and one source, nothing is final until
    :meth:`flush`; with several sources and no lateness, each source must be sorted by time and windows close
    as soon as every source has moved past them. Memory is bounded by the open panes, not the stream's length.

    With several sources, ``credits`` bounds how many rows a source may have pending (pushed but not yet
    final because another source holds the watermark back; default about a million, ``None``: unbounded).
    A push beyond that raises :class:`windgate.errors.BackpressureError` *without consuming the batch*:
    push the lagging source (or close it) and push the batch again. So a stalled source cannot make the
    operator grow without limit.

    The operator's state can be saved between calls: :meth:`snapshot` returns bytes, :meth:`restore` builds
    an operator that continues exactly where it stood (any ``threads`` and ``strategy``), and pickling goes
    through the same bytes (see the README's "Streaming and checkpoints").

    Example:
        >>> import pickle
        >>> import pyarrow as pa, windgate
        >>> agg = windgate.WindowAggregator(time="ts", size=10, aggs={"*": "count"}, lateness=0)
        >>> agg.push(pa.record_batch({"ts": [1, 2, 11]})).to_pydict()
        {'window_start': [0], 'window_end': [10], 'count': [2]}
        >>> agg.stats["rows_in"], agg.stats["late_rows"]
        (3, 0)
        >>> again = windgate.WindowAggregator.restore(agg.snapshot(), threads=1)
        >>> again.push(pa.record_batch({"ts": [12, 25]})).to_pydict()
        {'window_start': [10], 'window_end': [20], 'count': [2]}
        >>> pickle.loads(pickle.dumps(again)).flush().to_pydict()
        {'window_start': [20], 'window_end': [30], 'count': [1]}

        Session windows of 10 units; a session closes once the watermark (largest time - lateness) passes
        its end:

        >>> sessions = windgate.WindowAggregator(time="ts", gap=10, aggs={"*": "count"}, lateness=0)
        >>> sessions.push(pa.record_batch({"ts": [1, 5, 30]})).to_pydict()
        {'window_start': [1], 'window_end': [15], 'count': [2]}
        >>> sessions.stats["next_close"]  # [30, 40) is final once the watermark passes 40
        41
        >>> sessions.flush().to_pydict()
        {'window_start': [30], 'window_end': [40], 'count': [1]}

        Tumbling count windows of 2 rows; a row is counted, in time order, once the watermark (largest time
        - 2) passes it:

        >>> counts = windgate.WindowAggregator(time="ts", rows=2, aggs={"*": "count"}, lateness=2)
        >>> counts.push(pa.record_batch({"ts": [1, 5, 3, 7]})).to_pydict()
        {'window_first': [1], 'window_last': [3], 'window_rows': [2], 'count': [2]}
        >>> pickle.loads(pickle.dumps(counts)).flush().to_pydict()
        {'window_first': [5], 'window_last': [7], 'window_rows': [2], 'count': [2]}
    """

    def __init__(
        self,
        *,
        time: str,
        size: _specs.Span | None = None,
        slide: _specs.Span | None = None,
        offset: _specs.Span = 0,
        gap: _specs.Span | None = None,
        rows: int | None = None,
        rows_slide: int | None = None,
        tz: str | None = None,
        by: str | list[str] | None = None,
        aggs: Aggs,
        lateness: _specs.Span | None = None,
        on_late: str = "drop",
        null_time: str = "error",
        threads: int | None = None,
        strategy: str = "auto",
        farm: Mapping[str, Any] | None = None,
        sources: int = 1,
        credits: int | None = 1 << 20,
        order_by: str | None = None,
        input: str = "rows",
        output: str = "windows",
        row_offset: int = 0,
        allowed_lateness: _specs.Span | None = None,
        emit: str = "final",
        interval: _specs.Span | None = None,
    ) -> None:
        self._build(_options.WINDOW_AGGREGATE.forward("windgate.WindowAggregator", locals()))

    _native_class = _native.WindowAggregator
    _declaration = _options.WINDOW_AGGREGATE
    _entry = "windgate.WindowAggregator"

    def push(self, batch: Any, source: int = 0) -> pa.RecordBatch:
        """Pushes a batch (or a table or stream, batch by batch) of ``source``.

        Returns the rows of the windows that became final (a possibly empty ``pyarrow.RecordBatch``). Raises
        :class:`windgate.errors.BackpressureError` (nothing consumed) when ``source`` is out of credits.
        """
        source = _specs.integer(source, "source")
        return self._call(self._inner.push, _specs.arrow_source(batch, "batch"), source)

    def close_source(self, source: int) -> pa.RecordBatch:
        """Marks ``source`` as finished so that it no longer holds windows back."""
        return self._call(self._inner.close_source, _specs.integer(source, "source"))

    def flush(self) -> pa.RecordBatch:
        """End of stream: returns every window still open. The operator takes no more batches after it."""
        return self._call(self._inner.flush)

    def late_rows(self) -> pa.RecordBatch | None:
        """With ``on_late="keep"``: every late row since the last call, in arrival order, with every input
        column, then ``source`` (several sources only) and the ``watermark`` it met on arrival (``None``
        before the first batch has shown the input's columns).

        Late rows are dropped from the windows as with ``on_late="drop"``; they wait here until taken, so take
        them as often as you push (a checkpoint carries the ones not yet taken).

        Example:
            >>> import pyarrow as pa, windgate
            >>> agg = windgate.WindowAggregator(
            ...     time="ts", size=10, aggs={"*": "count"}, lateness=2, on_late="keep")
            >>> agg.push(pa.record_batch({"ts": [1, 20, 3]})).to_pydict()
            {'window_start': [0], 'window_end': [10], 'count': [1]}
            >>> agg.late_rows().to_pydict()
            {'ts': [3], 'watermark': [18]}
            >>> agg.late_rows().num_rows
            0
        """
        return self._call(self._inner.late_rows)

    @property
    def stats(self) -> dict[str, Any]:
        """Counters: ``rows_in``, ``pending_rows`` and ``backpressured`` (credits), ``late_rows`` (and
        ``late_rows_pending``: kept by ``on_late="keep"``, not yet taken), ``null_time_rows``, ``rows_out``,
        ``windows_out``, ``open_panes``, ``keys``, ``watermark`` (in time-column units) and ``watermark_time``
        (the same as text: ISO 8601 in the column's zone on a timestamp column, e.g.
        ``"2024-06-01T12:02:59.810Z"``), ``slack``, ``threads``, ``strategy``; with the pane farm also
        ``plq_busy_s`` and ``wlq_busy_s`` (busy seconds per pane-level query (PLQ) and window-level
        query (WLQ) worker), ``punctuations``, ``panes_closed``,
        ``panes_split``, ``split_factor``, ``theta_b``, ``alpha`` and ``utilisation`` (the PLQ workers' mean
        utilisation)."""
        return self._call(lambda: self._inner.stats)

    @property
    def schema(self) -> pa.Schema | None:
        """The output schema, once the first batch has been pushed."""
        return self._inner.schema
