"""windgate inside Spark Structured Streaming: the operators' snapshots kept in Spark's checkpointed state.

A streaming DataFrame given to :func:`windgate.spark.window_aggregate`, :func:`windgate.spark.skyline`,
:func:`windgate.spark.top_dominant` or :func:`windgate.spark.topk` comes here. The plan:

1. ``withWatermark(time, lateness)``: Spark's global event-time watermark (the largest time of the earlier
   micro-batches minus ``lateness``).
2. Each row gets a shard, ``pmod(xxhash64(by...), shards)`` (one shard without ``by``), and
   ``groupBy(shard).transformWithStateInPandas`` runs the processor ``windgate._spark_shard.WindgateShard``
   in append mode with event-time timers.
3. Per shard and micro-batch, the processor restores the shard's windgate operator from the bytes of its
   snapshot (a ``ValueState`` in Spark's state store, checkpointed with each micro-batch), moves the
   operator's watermark up to Spark's (a *clock row*, see below), pushes the shard's rows of the batch
   sorted by ``(time, order_by, the other columns)``, emits the windows that closed, and stores the new
   snapshot. A timer at the end of the shard's next open window calls it again when Spark's watermark passes
   it, so the windows of a shard that gets no more rows close too. Session windows (``gap=``) have no grid:
   an operator whose ``stats`` carry ``next_close`` (the watermark at which its next window closes) gets
   its timer there instead.

The clock row: the operator groups by the ``by`` columns plus a hidden ``__windgate_clock`` column (0 on
every input row). To move its watermark to Spark's watermark ``W``, the shard pushes one row of group
``__windgate_clock = 1`` at time ``W + lateness``; the operator's watermark becomes ``W`` (rows of the
shard more than ``lateness`` behind are late from then on, as in Spark), and the clock group's own output is
filtered out. Late rows are the operator's: dropped and counted in its ``stats`` (``on_late="drop"``), a
:class:`windgate.LateRowError` that fails the query (``on_late="error"``), or a second DataFrame
(``on_late="keep"``): the stateful operator's one output then carries windows and late rows together, and
the helper returns a :class:`windgate.WindowsAndLate` pair of DataFrames that select each from it.

Exactly once: Spark re-runs a failed micro-batch from the state of the last committed one with the same
input rows (its offset log); the shard's rows are sorted before they are pushed, so the re-run produces the
same operator state and the same output rows, and a file sink commits each micro-batch's files once. See
"Structured Streaming" in ``docs/spark.md``.

Example:
    >>> from windgate.spark import window_aggregate  # doctest: +SKIP
    >>> stream = spark.readStream.schema(schema).parquet("in/")  # doctest: +SKIP
    >>> out = window_aggregate(stream, time="ts", size="60s", slide="10s", by="plug", lateness="30s",
    ...                        aggs={"*": "count", "kwh": "sum"})  # doctest: +SKIP
    >>> q = (out.writeStream.format("parquet").option("path", "out/")
    ...      .option("checkpointLocation", "ckpt/").trigger(availableNow=True).start())  # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _native, _specs
from .errors import ColumnNotFoundError, ColumnTypeError, InvalidParameterError
from .spark_session import input_schema, output_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["windowed_stream", "state_sizes", "ROCKSDB"]

#: Spark's RocksDB state store provider, which ``transformWithStateInPandas`` needs.
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

_SHARD = "__windgate_shard"


def lateness_units(lateness: Any, unit: str, column: str = "time") -> int:
    span = _specs.span(lateness, "lateness")
    if span is None or span == "adaptive":
        raise InvalidParameterError(
            "lateness: a streaming DataFrame needs a fixed bound (a duration string or a timedelta on a "
            "timestamp column, an int on an integer column): Spark's watermark is built from it, got "
            f"{lateness!r}"
        )
    value = _specs.units(span, unit, "lateness", column)
    if value < 0:
        raise InvalidParameterError(f"lateness: expected a bound >= 0, got {lateness!r}")
    return value


def watermark_delay(units: int, unit: str) -> str:
    """The lateness as Spark's watermark delay string (Spark keeps watermarks in milliseconds)."""
    us = units * {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 0.001}[unit]
    return f"{math.ceil(us / 1000)} milliseconds"


def windowed_stream(
    df: DataFrame,
    *,
    cls: str,
    kwargs: dict[str, Any],
    batch: str,
    columns: list[str],
    by: list[str],
    shards: int | None,
    carry: bool = False,
) -> DataFrame:
    """The streaming plan of one windowed operator (see the module's docstring).

    ``cls`` is the class name in :mod:`windgate` (``"WindowAggregator"``, ``"SkylineQuery"``, ...) and
    ``kwargs`` its keyword arguments as the user gave them, with ``by`` as a list (the hidden clock column
    is added here); ``batch`` the name of the local function (run on an empty table for the output schema);
    ``columns`` the input columns the operator reads; ``carry``: every column of ``df`` goes through (the
    preference queries emit whole rows).
    """
    from pyspark.sql import functions as F

    from ._spark_shard import CLOCK as _CLOCK
    from ._spark_shard import WindgateShard, combined_schema

    arrow_in = input_schema(df, streaming=True)
    for col in columns:
        if col not in df.columns:
            raise ColumnNotFoundError(
                f"column '{col}' is not in the DataFrame (columns: {', '.join(df.columns)})"
            )
    if carry:
        columns = [*dict.fromkeys([*columns, *df.columns])]
    time = kwargs["time"]
    time_type = arrow_in.field(time).type
    if not pa.types.is_timestamp(time_type):
        raise ColumnTypeError(
            f"time: a streaming DataFrame needs a timestamp time column (Spark's watermark), got {time_type}"
        )
    unit = _specs.time_unit(time_type)
    lateness = lateness_units(kwargs.get("lateness"), unit, time)
    spark = df.sparkSession
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass", "")
    if provider != ROCKSDB:
        raise InvalidParameterError(
            "spark: a streaming windgate helper keeps its state with transformWithStateInPandas, which "
            f"needs the RocksDB state store: set spark.sql.streaming.stateStore.providerClass={ROCKSDB} "
            "before the session starts (windgate.spark.local_session does)"
        )
    if shards is None:
        shards = int(spark.conf.get("spark.sql.shuffle.partitions", "4")) if by else 1
    shards = _specs.integer(shards, "shards", minimum=1)
    if shards > 1 and not by:
        raise InvalidParameterError(f"shards: without by the state is one shard, got shards={shards}")

    fields = [arrow_in.field(c) for c in dict.fromkeys(columns)]
    schema = pa.schema([*fields, pa.field(_CLOCK, pa.int8())])
    op_kwargs = {**kwargs, "by": [*by, _CLOCK]}
    import windgate

    probe = getattr(windgate, batch)(schema.empty_table(), **op_kwargs)
    keep = isinstance(probe, windgate.WindowsAndLate)
    out_schema = (probe.windows if keep else probe).schema
    out_schema = out_schema.remove(out_schema.get_field_index(_CLOCK))
    combined = None
    if keep:
        late_schema = probe.late.schema.remove(probe.late.schema.get_field_index(_CLOCK))
        combined = combined_schema(out_schema, late_schema)
    spec = {"time": time, "time_type": time_type, "lateness": lateness, "unit": unit, **_timer(kwargs, unit)}

    # A computed time column carries no watermark metadata, so Spark does not drop late rows itself:
    # the operator judges and counts them.
    watermarked = df.select(*dict.fromkeys(columns)).withWatermark(time, watermark_delay(lateness, unit))
    shard = F.pmod(F.xxhash64(*by), F.lit(shards)) if by else F.lit(0).cast("long")
    rows = watermarked.withColumn(time, F.col(time) + F.expr("INTERVAL 0 SECONDS")).withColumn(_SHARD, shard)
    processor = WindgateShard(cls, op_kwargs, schema, spec, kwargs.get("order_by"), combined)
    out = rows.groupBy(_SHARD).transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=output_schema(combined or out_schema),
        outputMode="Append",
        timeMode="EventTime",
    )
    plan = (
        f"streaming: {cls} per shard ({shards} shard(s)) in transformWithStateInPandas, its snapshot in "
        f"the state store; watermark {time} - {kwargs.get('lateness')!r}"
    )
    if combined is None:
        out.windgate_plan = plan
        return out
    return _split(out, out_schema, late_schema, plan)


def _timer(kwargs: dict[str, Any], unit: str) -> dict[str, Any]:
    """What the shard's timer needs (see ``WindgateShard._set_timer``). Session windows (``gap``): the
    operator names its next close itself (``stats["next_close"]``), and a window holding a row at ``t``
    ends by ``t + gap`` (its ``reach``). Count windows (``rows``): the operator names its next close (just
    past its earliest row still waiting for the watermark), and a row at ``t`` is counted once the
    watermark passes ``t`` (reach 0). Sliding windows: the grid, ``size``, ``slide``, ``offset``."""
    time = kwargs["time"]
    if kwargs.get("rows") is not None:
        return {"reach": 0}
    gap = _specs.span(kwargs.get("gap"), "gap")
    if gap is not None:
        return {"reach": _specs.units(gap, unit, "gap", time)}
    window = {"time": time, **{n: _specs.span(kwargs.get(n), n) for n in ("size", "slide", "offset")}}
    size, slide, offset = _specs.window_units(window, unit)
    return {"size": size, "slide": slide, "offset": offset}


def _split(out: DataFrame, windows: pa.Schema, late: pa.Schema, plan: str) -> Any:
    """The windows and the late rows of a combined output (``on_late="keep"``) as two DataFrames."""
    from pyspark.sql import functions as F

    import windgate

    from ._spark_shard import LATE

    pair = windgate.WindowsAndLate(
        out.filter(~F.col(LATE)).select(*[F.col(f.name) for f in windows]),
        out.filter(F.col(LATE)).select(*[F.col(f"__late_{i}").alias(f.name) for i, f in enumerate(late)]),
    )
    for df in pair:
        df.windgate_plan = f"{plan}; on_late=keep: windows and late rows from one operator output"
    return pair


def state_sizes(spark: SparkSession, checkpoint: str) -> Any:
    """Each shard's state in a streaming query's checkpoint: a pandas DataFrame of ``shard``,
    ``snapshot_bytes`` and ``late_rows``, read with Spark's state data source (``format("statestore")``).

    Example:
        >>> state_sizes(spark, "ckpt/")  # doctest: +SKIP
           shard  snapshot_bytes  late_rows
        0      0           18734          0
    """
    import pandas as pd

    from ._spark_shard import STATE_NAME

    df = spark.read.format("statestore").option("stateVarName", STATE_NAME).load(checkpoint)
    rows = []
    for r in df.select("key", "value").collect():
        data = bytes(r["value"]["snapshot"])
        rows.append({"shard": int(r["key"][0]), "snapshot_bytes": len(data), **_late(data)})
    return pd.DataFrame(rows, columns=["shard", "snapshot_bytes", "late_rows"]).sort_values("shard")


#: The class that restores a snapshot, by the snapshot's operator name.
_RESTORE = {
    "window_aggregate": "WindowAggregator",
    "session_aggregate": "WindowAggregator",
    "band_join": "BandJoiner",
    "preference": None,
}


def _late(data: bytes) -> dict[str, int | None]:
    """The shard's late-row count, from its operator restored."""
    import windgate

    operator = _native.snapshot_info(data).get("operator")
    name = _RESTORE.get(operator)
    if name is None:
        return {"late_rows": None}
    return {"late_rows": getattr(windgate, name).restore(data).stats.get("late_rows")}
