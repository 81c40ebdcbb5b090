"""The stateful processor of :mod:`windgate.spark_join_stream`: one shard's :class:`windgate.BandJoiner`, kept
as the bytes of its snapshot in a ``ValueState`` of Spark's state store (imported only where pyspark is)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.streaming import StatefulProcessor

from ._spark_shard import _PER_MS, STATE_NAME, _sortable

#: The hidden equality column of both sides: 0 on every input row, 1 on the left clock rows, 2 on the right
#: ones (so clock rows match nothing).
CLOCK = "__windgate_clock"
#: The side column of the union (0: left, 1: right).
SIDE = "__windgate_side"
_STATE_SCHEMA = "snapshot binary, max_time long"


class JoinShard(StatefulProcessor):
    """Per shard and call: restore the joiner, move both sides' watermarks to Spark's (one clock row per
    side), push each side's rows sorted, emit the final pairs (clock rows filtered out), store the snapshot,
    set a timer for the rows still waiting."""

    def __init__(
        self,
        kwargs: dict[str, Any],
        sides: tuple[pa.Schema, pa.Schema],
        columns: tuple[list[str], list[str]],
        spec: Mapping[str, Any],
        arrow_out: pa.Schema,
        order: list[str],
    ) -> None:
        self.order = order  # the input columns, in order
        self.kwargs = kwargs
        self.sides = sides  # each side's schema, with CLOCK last
        self.columns = columns  # each side's column in the union, in the order of its schema
        self.spec = dict(spec)
        self.arrow_out = arrow_out

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.state = handle.getValueState(STATE_NAME, _STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803
        import pandas as pd

        joiner, max_time = self._load()
        outs = self._advance(joiner, timerValues.getCurrentWatermarkInMs())
        pdfs = [p for p in rows if len(p)]
        for p in pdfs:  # the columns may come by position (``_0``, ``_1``, ...)
            if SIDE not in p.columns and len(p.columns) == len(self.order):
                p.columns = self.order
        pdf = pd.concat(pdfs, ignore_index=True) if pdfs else None
        for side, name in ((0, "left"), (1, "right")):
            if pdf is None:
                break
            table = self._side(pdf[pdf[SIDE] == side], side)
            if not table.num_rows:
                continue
            outs.append(joiner.push(table, side=name))
            top = pc.max(table.column(self.spec["time"][side]).cast(pa.int64())).as_py()
            if top is not None:
                max_time = top if max_time is None else max(max_time, top)
        yield from self._finish(joiner, max_time, outs)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802, N803
        if not self.state.exists():
            return
        joiner, max_time = self._load()
        outs = self._advance(joiner, timerValues.getCurrentWatermarkInMs())
        yield from self._finish(joiner, max_time, outs)

    def close(self) -> None:
        pass

    def _load(self) -> tuple[Any, int | None]:
        import windgate

        if self.state.exists():
            data, max_time = self.state.get()
            return windgate.BandJoiner.restore(bytes(data), credits=None), max_time
        return windgate.BandJoiner(**self.kwargs, credits=None), None

    def _side(self, pdf: Any, side: int) -> pa.Table:
        """One side's rows of the micro-batch in its own schema, sorted by ``(time, the other columns)``."""
        schema = self.sides[side]
        plain = schema.remove(len(schema) - 1)
        if not len(pdf):
            return schema.empty_table()
        cols = pdf[self.columns[side]]
        cols.columns = plain.names
        table = pa.Table.from_pandas(cols, schema=plain, preserve_index=False)
        table = table.append_column(CLOCK, pa.array(np.zeros(table.num_rows, np.int8)))
        time = self.spec["time"][side]
        rest = [n for n in plain.names if n != time and _sortable(plain.field(n).type)]
        return table.sort_by([(c, "ascending") for c in [time, *rest]])

    def _advance(self, joiner: Any, watermark_ms: int | None) -> list[Any]:
        """Moves each side's watermark up to Spark's ``W``: a clock row at ``W + lateness`` per side."""
        if watermark_ms is None or watermark_ms <= 0:
            return []
        spark_wm = math.floor(watermark_ms * _PER_MS[self.spec["unit"]])
        stats = joiner.stats
        outs = []
        for side, name in ((0, "left"), (1, "right")):
            current = stats.get(f"watermark_{name}")
            if current is not None and current >= spark_wm:
                continue
            at = spark_wm + self.spec["lateness"]
            row = clock_row(self.sides[side], self.spec["time"][side], at, side + 1)
            outs.append(joiner.push(row, side=name))
        return outs

    def _finish(self, joiner: Any, max_time: int | None, outs: list[Any]) -> Iterator[Any]:
        self.state.update((joiner.snapshot(), max_time))
        self._set_timer(joiner, max_time)
        left_clock, right_clock = f"left_{CLOCK}", f"right_{CLOCK}"
        for out in outs:
            if out is None or not out.num_rows:
                continue
            out = pa.Table.from_batches([out]) if isinstance(out, pa.RecordBatch) else out
            mine = pc.and_(
                pc.equal(out.column(left_clock), 0),
                pc.fill_null(pc.equal(out.column(right_clock), 0), True),
            )
            out = out.filter(mine).drop_columns([left_clock, right_clock])
            if out.num_rows:
                yield (out if out.schema == self.arrow_out else out.cast(self.arrow_out)).to_pandas()

    def _set_timer(self, joiner: Any, max_time: int | None) -> None:
        """While a row of the shard is not final (both sides' watermarks must pass its largest time plus
        ``max(upper, 0)``: a left row of ``how="left"`` waits for a row past ``l.ts + upper``), one timer
        just past the lower of the two watermarks: it fires as soon as Spark's watermark moves past it, and
        the clock rows then move both sides up."""
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        if max_time is None:
            return
        stats = joiner.stats
        wms = [stats.get("watermark_left"), stats.get("watermark_right")]
        low = min((w for w in wms if w is not None), default=None)
        if low is not None and None not in wms and low >= max_time + max(self.spec["upper"], 0) + 1:
            return  # every row of the shard is final
        at_ms = 1 if low is None else math.floor(low / _PER_MS[self.spec["unit"]]) + 1
        self.handle.registerTimer(max(1, at_ms))


def clock_row(schema: pa.Schema, time: str, at: int, clock: int) -> pa.Table:
    """One clock row of a side at ``at``: zeros in numbers, empty strings, nulls elsewhere."""
    cols = []
    for f in schema:
        if f.name == time:
            cols.append(pa.array([at], pa.int64()).cast(f.type))
        elif f.name == CLOCK:
            cols.append(pa.array([clock], pa.int8()))
        elif pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type):
            cols.append(pa.array([0], pa.int64()).cast(f.type))
        elif pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            cols.append(pa.array([""], f.type))
        elif pa.types.is_boolean(f.type):
            cols.append(pa.array([False]))
        else:
            cols.append(pa.nulls(1, f.type))
    return pa.Table.from_arrays(cols, schema=schema)
