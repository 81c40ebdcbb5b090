"""Sliding-window band joins: ScaleJoin (Gulisano et al.) behind ``band_join`` and ``BandJoiner``.

>>> import pyarrow as pa, windgate
>>> left = pa.table({"ts": [1, 5, 9], "x": [10, 20, 30]})
>>> right = pa.table({"ts": [2, 6], "a": [11, 40]})
>>> out = windgate.band_join(left, right, time="ts", window=3, on=[windgate.band("x", "a", 2)])
>>> out.to_pydict()
{'left_ts': [1], 'left_x': [10], 'right_ts': [2], 'right_a': [11], 'ts': [2]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from . import _native, _options, _specs
from ._checkpoint import Checkpointed
from ._specs import Band, Eq
from .errors import ColumnTypeError

__all__ = ["band_join", "BandJoiner", "band", "eq", "Band", "Eq"]


def band(left: str, right: str, eps: float) -> Band:
    """A band predicate: the pair matches when ``|left - right| <= eps`` (compared as float64).

    Example:
        >>> import windgate
        >>> windgate.band("x", "a", 10)
        Band(left='x', right='a', eps=10.0)
    """
    if not isinstance(left, str) or not isinstance(right, str):
        raise ColumnTypeError(f"band: expected two column names, got {left!r} and {right!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise ColumnTypeError(f"band: eps must be a number, got {type(eps).__name__}")
    return Band(left, right, float(eps))


def eq(left: str, right: str) -> Eq:
    """An equality predicate: ``left == right``; a null equals nothing (SQL).

    Example:
        >>> import windgate
        >>> windgate.eq("meter", "meter")
        Eq(left='meter', right='meter')
    """
    if not isinstance(left, str) or not isinstance(right, str):
        raise ColumnTypeError(f"eq: expected two column names, got {left!r} and {right!r}")
    return Eq(left, right)


def band_join(
    left: Any,
    right: Any,
    *,
    time: str | Sequence[str],
    window: _specs.Span | None = None,
    lower: _specs.Span | None = None,
    upper: _specs.Span | None = None,
    how: str = "inner",
    on: Band | Eq | Sequence[Band | Eq] = (),
    threads: int | None = None,
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    semantics: str = "interval",
    index: bool = True,
    strategy: str = "auto",
) -> pa.Table:
    """Sliding-window join of two streams on band and equality predicates (ScaleJoin, Gulisano et al.).

    Every left row is paired with every right row within ``window`` of it in time (or, with ``lower`` and
    ``upper``, with every right row at ``l.ts + lower <= r.ts <= l.ts + upper``) for which all predicates
    hold; ``how="left"`` also returns every left row without a partner, once, with nulls in the right
    columns. The answer and its order are the same for any thread count and batch split.

    Args:
        left, right: pyarrow Tables/RecordBatches/readers or anything with ``__arrow_c_stream__``.
        time: the time column of both sides, or a ``(left, right)`` pair; same type on both sides.
        window: the time band ``|l.ts - r.ts| <= window``: an int in the time column's unit, a duration string
            (``"5s"``) or a ``timedelta``. Give either ``window`` or ``lower`` and ``upper``.
        lower, upper: asymmetric bounds ``l.ts + lower <= r.ts <= l.ts + upper`` (Flink's
            ``between(lower, upper)``, Spark's ``r.ts BETWEEN l.ts + lower AND l.ts + upper``): ints, duration
            strings or timedeltas, negative ones too (``lower="-30s", upper="0s"``: right rows up to 30 s
            before the left row). ``window=w`` is ``lower=-w, upper=w``; ``lower > upper`` is an error. Each
            side keeps its rows only as long as a future row of the other side can reach them.
        how: ``"inner"`` (the pairs) or ``"left"``: also every left row without a matching right row, with
            nulls in the right columns (all nullable then) and its own time as ``ts``. Such a row goes out
            when no future right row can match it: once a row later than ``l.ts + upper`` was processed
            (merged order below), just before that row's pairs, or at the end of the input; rows closed
            together in merged order. A row dropped as late (``on_late="drop"``) is not returned.
        on: predicates, all of which must hold: :func:`band` and :func:`eq`. Nulls and NaN match nothing.
        threads: processing threads, at most 254 (``None``: all cores).
        lateness: ``None`` (exact whatever the order of each side), a bound K on each side's disorder, or
            ``"adaptive"``. Rows later than K are dropped (``on_late="drop"``, counted) or an error.
        on_late: ``"drop"`` or ``"error"``.
        semantics: ``"interval"`` (``|l.ts - r.ts| <= window``) or ``"scalejoin"`` (the paper's three-step
            procedure exactly: a tuple is compared with the opposite window as that side's own arrivals purged
            it, so pairs further apart than ``window`` can match; symmetric bounds only, and with
            ``how="left"`` a left row is closed once a *left* row later than ``l.ts + window`` was processed).
        index: per-thread index on the first band column (and the equality columns): compares candidates only.
        strategy: ``"auto"`` (``"scalejoin"`` with more than one thread, else ``"serial"``), ``"scalejoin"``,
            ``"serial"`` or ``"reference"`` (the nested-loop oracle). All return the same rows in the same
            order.

    Returns:
        A pyarrow Table: the left columns prefixed ``left_``, the right ones ``right_``, then ``ts``, the
        later of the pair's two times; ordered by ``(ts, trigger, partner)``: the later row's position in the
        merged order ``(time, left before right, arrival)``, then the earlier row's. Unmatched left rows
        (``how="left"``) come just before the pairs of the row that closed them (see ``how``).

    Example:
        >>> import pyarrow as pa, windgate
        >>> l = pa.table({"ts": [0, 10], "meter": [1, 2], "kwh": [1.0, 5.0]})
        >>> r = pa.table({"ts": [3, 12], "meter": [1, 2], "kwh": [1.5, 9.0]})
        >>> out = windgate.band_join(l, r, time="ts", window=5,
        ...                          on=[windgate.eq("meter", "meter"), windgate.band("kwh", "kwh", 1)])
        >>> out.select(["left_ts", "right_ts", "ts"]).to_pylist()
        [{'left_ts': 0, 'right_ts': 3, 'ts': 3}]

        Clicks (left) with the impressions of the same user up to 30 s before them, and clicks without one:

        >>> import datetime as dt
        >>> t = lambda s: dt.datetime(2024, 1, 1, 12, 0, s)
        >>> clicks = pa.table({"ts": [t(40), t(50)], "user": [1, 2]})
        >>> views = pa.table({"ts": [t(5), t(20), t(45)], "user": [1, 1, 2]})
        >>> out = windgate.band_join(clicks, views, time="ts", lower="-30s", upper="0s", how="left",
        ...                          on=windgate.eq("user", "user"))
        >>> [(r["left_ts"].second, r["right_ts"] and r["right_ts"].second) for r in out.to_pylist()]
        [(40, 20), (50, 45)]
        >>> out = windgate.band_join(clicks, views, time="ts", lower="-4s", upper="0s", how="left",
        ...                          on=windgate.eq("user", "user"))
        >>> [(r["left_ts"].second, r["right_ts"] and r["right_ts"].second) for r in out.to_pylist()]
        [(40, None), (50, None)]
    """
    kwargs = _options.BAND_JOIN.forward("windgate.band_join", locals())
    return _native.band_join(_specs.arrow_source(left, "left"), _specs.arrow_source(right, "right"), **kwargs)


class BandJoiner(Checkpointed):
    """Streaming band join: push batches of either side, get the pairs as soon as they are final.

    Takes the keyword arguments of :func:`band_join` (``window`` or ``lower``/``upper``, ``how``). A row is
    processed once both sides have moved past it: each side's watermark is its largest time minus
    ``lateness``. With ``lateness=None`` nothing is final before :meth:`flush` (exact whatever the order).
    Each push returns the same rows for any thread count.

    Args:
        credits: rows a side may have pending (past its own watermark, but not ready because the other side
            has not moved past them) before its pushes are refused with :class:`windgate.BackpressureError`
            naming the side to feed; the refused batch is not consumed, so push the other side (or flush) and
            push it again. Default ``2**20``; ``None``: unbounded. A side with nothing pending may push a
            batch of any size, and the side that holds the other back is never refused.

    Memory: the joiner keeps, per side, the rows within ``window`` of the rows being joined (each thread
    stores its share), the input batches holding them (a batch is let go once every row of it is out of the
    window), the rows within ``lateness`` of the side's largest time (waiting for its watermark) and the
    pending rows (at most ``credits``, plus one batch). That is bounded by the window, the lateness and the
    credits, not by the stream's length. With ``lateness=None`` every row waits for :meth:`flush`, so the
    joiner holds the whole input; ``stats`` reports ``retained_rows``, ``window_rows``, ``buffered_rows``
    and ``pending_rows``.

    A push that fails (a late row with ``on_late="error"``, a refused push) leaves the joiner as it was; a
    push interrupted by Ctrl-C leaves it unusable (create a new one).

    Example:
        >>> import pyarrow as pa, windgate
        >>> j = windgate.BandJoiner(time="ts", window=2, on=[], lateness=0)
        >>> j.push(pa.record_batch({"ts": [1, 4]}), side="left").num_rows
        0
        >>> j.push(pa.record_batch({"ts": [2, 9]}), side="right").to_pydict()
        {'left_ts': [1], 'right_ts': [2], 'ts': [2]}
        >>> j.flush().to_pydict()  # left 4 waited for the right side to pass it
        {'left_ts': [4], 'right_ts': [2], 'ts': [4]}
        >>> j.stats["pairs_out"]
        2

    Checkpoints: :meth:`snapshot` returns the joiner's whole state as bytes (the rows each side still needs,
    watermarks, counters); :meth:`restore` continues from them with exactly the rows the uninterrupted
    joiner would return, with any ``threads``, ``strategy``, ``index`` or ``credits`` (every other keyword
    must be the snapshot's). Pickling goes through the same bytes:

        >>> import pickle
        >>> j = windgate.BandJoiner(time="ts", window=2, lateness=0)
        >>> _ = j.push(pa.record_batch({"ts": [1, 4]}), side="left")
        >>> data = j.snapshot()
        >>> k = windgate.BandJoiner.restore(data, threads=2)
        >>> k.push(pa.record_batch({"ts": [2, 9]}), side="right").to_pydict()
        {'left_ts': [1], 'right_ts': [2], 'ts': [2]}
        >>> pickle.loads(pickle.dumps(j)).flush().to_pydict()  # the copy has not seen the right rows
        {}
        >>> k.flush().to_pydict()
        {'left_ts': [4], 'right_ts': [2], 'ts': [4]}
    """

    _native_class = _native.BandJoiner
    _declaration = _options.BAND_JOIN
    _entry = "windgate.BandJoiner"
    _runtime = ("threads", "strategy", "index", "credits")

    def __init__(
        self,
        *,
        time: str | Sequence[str],
        window: _specs.Span | None = None,
        lower: _specs.Span | None = None,
        upper: _specs.Span | None = None,
        how: str = "inner",
        on: Band | Eq | Sequence[Band | Eq] = (),
        threads: int | None = None,
        lateness: _specs.Span | None = None,
        on_late: str = "drop",
        semantics: str = "interval",
        index: bool = True,
        strategy: str = "auto",
        credits: int | None = 2**20,
    ) -> None:
        self._build(_options.BAND_JOIN.forward("windgate.BandJoiner", locals()))

    def push(self, batch: Any, side: str = "left") -> pa.RecordBatch:
        """Pushes a batch (or a table or stream, as one batch) of ``side`` (``"left"`` or ``"right"``).

        Returns the pairs that became final (a possibly empty ``pyarrow.RecordBatch``). Raises
        :class:`windgate.BackpressureError` when ``side`` has ``credits`` rows pending (see the class
        docstring); nothing is consumed then.
        """
        side = _specs.choice(side, "side")
        return self._call(self._inner.push, _specs.arrow_source(batch, "batch"), side)

    def flush(self) -> pa.RecordBatch:
        """End of both inputs: every remaining pair. The joiner takes no more batches after it."""
        return self._call(self._inner.flush)

    @property
    def stats(self) -> dict[str, Any]:
        """Counters: ``rows_in_left``/``rows_in_right``, ``late_rows`` (and per side), ``pairs_out``,
        ``unmatched_rows`` (left rows returned without a partner, ``how="left"``),
        ``comparisons`` (window tuples scanned, as ScaleJoin counts them) and ``comparisons_per_thread``,
        ``pairs_per_thread``, ``buffered_rows`` (waiting for a watermark or the other side),
        ``pending_rows`` (and per side: what ``credits`` bounds), ``retained_rows`` (and per side: rows of
        the input batches kept for output rows), ``window_rows`` (rows stored in the windows),
        ``backpressured`` (refused pushes), ``watermark_left``/``watermark_right`` (in time-column units) and
        ``watermark_time_left``/``watermark_time_right`` (the same as text: ISO 8601 in the column's zone on a
        timestamp column, e.g. ``"2024-06-01T12:02:59.810Z"``), ``threads``,
        ``strategy``, ``semantics``, ``index``."""
        return self._call(lambda: self._inner.stats)

    @property
    def schema(self) -> pa.Schema | None:
        """The output schema, once both sides have pushed a batch."""
        return self._inner.schema
