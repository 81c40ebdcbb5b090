"""The stateful processor of :mod:`windgate.spark_streaming`: one shard's windgate operator, kept as the
bytes of its snapshot in a ``ValueState`` of Spark's state store (imported only where pyspark is)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.streaming import StatefulProcessor

#: The ``ValueState`` holding each shard's operator snapshot (``format("statestore")`` reads it by name).
STATE_NAME = "windgate"
#: The hidden group column of the clock rows (0 on every input row).
CLOCK = "__windgate_clock"
_STATE_SCHEMA = "snapshot binary, max_time long"
#: Time units per millisecond.
_PER_MS = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}


class WindgateShard(StatefulProcessor):
    """Per shard and call: restore the operator, move its watermark to Spark's, push the sorted rows, emit
    the closed windows (the clock group's filtered out), store the snapshot, set the next timer."""

    def __init__(
        self,
        cls: str,
        op_kwargs: dict[str, Any],
        schema: pa.Schema,
        spec: Mapping[str, Any],
        order_by: str | None,
        combined: pa.Schema | None = None,
    ) -> None:
        self.cls = cls
        self.op_kwargs = op_kwargs
        self.schema = schema
        self.spec = dict(spec)
        self.order_by = order_by
        #: ``on_late="keep"``: windows and late rows in one output (see :func:`combined_schema`).
        self.combined = combined

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.state = handle.getValueState(STATE_NAME, _STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802, N803
        op, max_time = self._load()
        table = self._sorted(rows)
        outs = [self._advance(op, timerValues.getCurrentWatermarkInMs())]
        if table.num_rows:
            outs.append(op.push(table))
            top = pc.max(table.column(self.spec["time"]).cast(pa.int64())).as_py()
            if top is not None:
                max_time = top if max_time is None else max(max_time, top)
        yield from self._finish(op, max_time, outs)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802, N803
        if not self.state.exists():
            return
        op, max_time = self._load()
        outs = [self._advance(op, timerValues.getCurrentWatermarkInMs())]
        yield from self._finish(op, max_time, outs)

    def close(self) -> None:
        pass

    def _load(self) -> tuple[Any, int | None]:
        import windgate

        cls = getattr(windgate, self.cls)
        if self.state.exists():
            data, max_time = self.state.get()
            return cls.restore(bytes(data)), max_time
        return cls(**self.op_kwargs), None

    def _sorted(self, rows: Iterator[Any]) -> pa.Table:
        """The shard's rows of the micro-batch, sorted by ``(time, order_by, the other columns)``: the
        order Spark's shuffle delivers them in is not reproducible, this one is."""
        names = self.schema.names[:-1]
        plain = self.schema.remove(len(names))
        parts = [
            pa.Table.from_pandas(pdf[names], schema=plain, preserve_index=False) for pdf in rows if len(pdf)
        ]
        if not parts:
            return self.schema.empty_table()
        table = pa.concat_tables(parts)
        table = table.append_column(CLOCK, pa.array(np.zeros(table.num_rows, np.int8)))
        first = [self.spec["time"], *([self.order_by] if self.order_by else [])]
        rest = [n for n in names if n not in first and _sortable(plain.field(n).type)]
        return table.sort_by([(c, "ascending") for c in [*first, *rest]])

    def _advance(self, op: Any, watermark_ms: int | None) -> Any:
        """Moves the operator's watermark up to Spark's with one clock row."""
        if watermark_ms is None or watermark_ms <= 0:
            return None
        spark_wm = math.floor(watermark_ms * _PER_MS[self.spec["unit"]])
        current = op.stats.get("watermark")
        if current is not None and current >= spark_wm:
            return None
        return op.push(clock_row(self.schema, self.spec["time"], spark_wm + self.spec["lateness"]))

    def _finish(self, op: Any, max_time: int | None, outs: list[Any]) -> Iterator[Any]:
        # The late rows are taken before the snapshot, so the state never holds them twice.
        late = op.late_rows() if self.combined is not None else None
        self.state.update((op.snapshot(), max_time))
        self._set_timer(op, max_time)
        for out in outs:
            if out is None or not out.num_rows:
                continue
            mine = out.filter(pc.equal(out.column(CLOCK), 0)).drop_columns([CLOCK])
            if mine.num_rows and self.combined is not None:
                mine = combine(self.combined, mine, late=False)
            if mine.num_rows:
                yield mine.to_pandas()
        if late is not None and late.num_rows:
            # Clock rows are never late (each is at Spark's watermark plus the lateness).
            rows = pa.Table.from_batches([late]).drop_columns([CLOCK])
            yield combine(self.combined, rows, late=True).to_pandas()

    def _set_timer(self, op: Any, max_time: int | None) -> None:
        """One timer, at the shard's next close, while a window holding its rows is open."""
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        if max_time is None:
            return
        stats = op.stats
        at = self._next_close(stats, max_time) if "next_close" in stats else self._grid_close(stats, max_time)
        if at is not None:
            self.handle.registerTimer(max(1, math.ceil(at / _PER_MS[self.spec["unit"]])))

    def _next_close(self, stats: Mapping[str, Any], max_time: int) -> int | None:
        """An operator that names its next close (``stats["next_close"]``, session windows): there, while
        a window may hold a row of the shard. ``reach`` (session windows: ``gap``) bounds how far after
        its largest row a window ends; the clock group's windows are open too, so this bound, not
        ``next_close`` alone, says when the shard is done."""
        wm, reach = stats.get("watermark"), self.spec.get("reach")
        if wm is not None and reach is not None and max_time + reach < wm:
            return None  # every window holding a row of this shard has closed
        return stats.get("next_close")

    def _grid_close(self, stats: Mapping[str, Any], max_time: int) -> int | None:
        """Sliding and tumbling windows: the end of the next window on the grid."""
        s = self.spec
        size, slide, offset = s["size"], s["slide"], s["offset"]
        wm = stats.get("watermark")
        last_end = (max_time - offset) // slide * slide + offset + size
        if self.op_kwargs.get("tz") is not None:
            # Local days (``tz=``; whole weeks from Mondays) end within a slide and 16 h of the UTC grid's
            # ends, on a quarter hour: wake every quarter hour of event time until the last can have closed.
            quarter = round(900_000 * _PER_MS[s["unit"]])
            last_end += slide + 64 * quarter
            size, slide, offset = quarter, quarter, 0
        if wm is not None and last_end <= wm:
            return None  # every window holding a row of this shard has closed
        base = max_time - size if wm is None else wm
        return ((base - offset - size) // slide + 1) * slide + offset + size


#: ``on_late="keep"``: the column that tells late rows (true) from windows (false) in the combined output.
LATE = "__windgate_late"


def combined_schema(windows: pa.Schema, late: pa.Schema) -> pa.Schema:
    """The one output of a streaming operator with ``on_late="keep"`` (Spark's stateful operators have one
    output): :data:`LATE`, the window columns, then the late rows' columns as ``__late_<i>``, all nullable; a
    row is either a window (the late columns null) or a late row (the window columns null)."""
    fields = [pa.field(LATE, pa.bool_(), nullable=False)]
    fields += [f.with_nullable(True) for f in windows]
    fields += [pa.field(f"__late_{i}", f.type) for i, f in enumerate(late)]
    return pa.schema(fields)


def combine(schema: pa.Schema, part: pa.Table, *, late: bool) -> pa.Table:
    """Windows (``late=False``) or late rows as rows of the combined ``schema``."""
    n = part.num_rows
    columns, names = [pa.array([late] * n, pa.bool_())], schema.names
    own = iter(part.columns)
    for f in schema.remove(0):
        mine = f.name.startswith("__late_") == late
        columns.append(next(own) if mine else pa.nulls(n, f.type))
    return pa.Table.from_arrays(columns, names=names).cast(schema)


def _sortable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t))


def clock_row(schema: pa.Schema, time: str, at: int) -> pa.Table:
    """One row of the clock group at ``at``: zeros where a number is needed (a preference query's dims)."""
    cols = []
    for f in schema:
        if f.name == time:
            cols.append(pa.array([at], pa.int64()).cast(f.type))
        elif f.name == CLOCK:
            cols.append(pa.array([1], pa.int8()))
        elif pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type):
            cols.append(pa.array([0], pa.int64()).cast(f.type))
        else:
            cols.append(pa.nulls(1, f.type))
    return pa.Table.from_arrays(cols, schema=schema)
