"""The band join of two streaming DataFrames (:func:`windgate.spark.band_join` with both sides streaming).

The plan, as for the windowed operators of :mod:`windgate.spark_streaming`:

1. Each side is projected into one schema, a side column (``0``/``1``), the side's time as one common
   column, the shard, then the left columns (null on right rows) and the right columns (null on left
   rows), and the two are unioned.
2. ``withWatermark(time, lateness)`` on the union: Spark's global watermark ``W`` (the largest time of both
   sides in the earlier micro-batches minus ``lateness``).
3. The shard is ``pmod(xxhash64(equality keys), shards)`` (both sides' keys cast to one type, so equal keys
   meet), one shard without equality predicates; ``groupBy(shard).transformWithStateInPandas`` runs
   :class:`windgate._spark_join_shard.JoinShard` in append mode with event-time timers.
4. Per shard and call, the processor restores the shard's :class:`windgate.BandJoiner` (``lateness`` as
   given) from its snapshot, moves *both* sides' watermarks up to ``W`` with one clock row per side at
   ``W + lateness``, pushes the left then the right rows of the micro-batch, each sorted by ``(time, the
   other columns)``, emits the pairs that became final and stores the snapshot. A timer at the shard's
   largest time plus ``max(upper, 0)`` calls it again when ``W`` passes, so a shard without new rows
   finishes too.

The clock rows: both sides get a hidden column ``__windgate_clock`` and the join the predicate
``eq(__windgate_clock, __windgate_clock)``; input rows hold 0, left clock rows 1 and right clock rows 2, so
a clock row matches nothing; its unmatched output (``how="left"``) is filtered out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _specs
from .errors import ColumnTypeError, InvalidParameterError
from .spark_session import output_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

_T = "__windgate_t"
_SHARD = "__windgate_shard"


def band_join_stream(
    left_df: DataFrame,
    right_df: DataFrame,
    *,
    time: Any,
    window: Any,
    lower: Any,
    upper: Any,
    how: str,
    on: Any,
    threads: int | None,
    index: bool,
    semantics: str,
    lateness: Any,
    on_late: str,
    shards: int | None,
) -> DataFrame:
    """The streaming plan of :func:`windgate.spark.band_join` (see the module's docstring)."""
    from pyspark.sql import functions as F

    from ._spark_join_shard import CLOCK, SIDE, JoinShard
    from .join import eq as _eq
    from .spark_join import common_key_type, drop_unmatchable, key_expr, prepare
    from .spark_streaming import ROCKSDB, lateness_units, watermark_delay

    chk = prepare(
        left_df,
        right_df,
        time=time,
        window=window,
        lower=lower,
        upper=upper,
        how=how,
        on=on,
        threads=threads,
        index=index,
        semantics=semantics,
        streaming=True,
    )
    _specs.choice(on_late, "on_late")
    arrow_l, arrow_r, preds, threads = chk["arrow_l"], chk["arrow_r"], chk["preds"], chk["threads"]
    (time_l, time_r), arrow_out = chk["time"], chk["arrow_out"]
    lower, upper = chk["lower"], chk["upper"]
    time_type = arrow_l.field(time_l).type
    if not pa.types.is_timestamp(time_type):
        raise ColumnTypeError(
            f"time: a streaming DataFrame needs a timestamp time column (Spark's watermark), got {time_type}"
        )
    unit = _specs.time_unit(time_type)
    k = lateness_units(lateness, unit, time_l)
    spark = left_df.sparkSession
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass", "")
    if provider != ROCKSDB:
        raise InvalidParameterError(
            "spark: a streaming windgate helper keeps its state with transformWithStateInPandas, which "
            f"needs the RocksDB state store: set spark.sql.streaming.stateStore.providerClass={ROCKSDB} "
            "before the session starts (windgate.spark.local_session does)"
        )
    eq_preds = [p for p in preds if p[0] == "eq"]
    if shards is None:
        shards = int(spark.conf.get("spark.sql.shuffle.partitions", "4")) if eq_preds else 1
    shards = _specs.integer(shards, "shards", minimum=1)
    if shards > 1 and not eq_preds:
        raise InvalidParameterError(
            f"shards: without equality predicates (on=windgate.eq(...)) the join is one shard, got {shards}"
        )

    left = left_df if how == "left" else drop_unmatchable(left_df, time_l, [p[1] for p in preds], arrow_l)
    right = drop_unmatchable(right_df, time_r, [p[2] for p in preds], arrow_r)

    def shard(side: int):
        if not eq_preds:
            return F.lit(0).cast("long")
        keys = [key_expr(p[side], common_key_type(arrow_l.field(p[1]).type)) for p in eq_preds]
        return F.pmod(F.xxhash64(*keys), F.lit(shards))

    lcols = [f"__windgate_l{i}" for i in range(len(arrow_l))]
    rcols = [f"__windgate_r{i}" for i in range(len(arrow_r))]
    l_types = dict(left_df.dtypes)
    r_types = dict(right_df.dtypes)

    def project(df, side: int, own: pa.Schema, names: list[str], other: list[tuple[str, str]]):
        t = time_l if side == 0 else time_r
        return df.select(
            F.lit(side).cast("tinyint").alias(SIDE),
            F.col(f"`{t}`").alias(_T),
            shard(side + 1).alias(_SHARD),
            *(F.col(f"`{c}`").alias(n) for c, n in zip(own.names, names, strict=True)),
            *(F.lit(None).cast(typ).alias(n) for n, typ in other),
        )

    lpart = project(
        left, 0, arrow_l, lcols, [(n, r_types[c]) for n, c in zip(rcols, arrow_r.names, strict=True)]
    )
    rpart = project(
        right, 1, arrow_r, rcols, [(n, l_types[c]) for n, c in zip(lcols, arrow_l.names, strict=True)]
    )
    rpart = rpart.select(*lpart.columns)
    both = lpart.unionByName(rpart).withWatermark(_T, watermark_delay(k, unit))
    # A computed time column carries no watermark metadata: Spark drops no rows, the joiner judges them.
    both = both.withColumn(_T, F.col(_T) + F.expr("INTERVAL 0 SECONDS"))

    clock = pa.field(CLOCK, pa.int8())
    sides = (arrow_l.append(clock), arrow_r.append(clock))
    items = [on] if not isinstance(on, (list, tuple)) else list(on)
    kwargs = {
        "time": (time_l, time_r),
        "lower": _specs.units_span(lower, unit),
        "upper": _specs.units_span(upper, unit),
        "how": how,
        "on": [*items, _eq(CLOCK, CLOCK)],
        "threads": threads,
        "lateness": _specs.units_span(k, unit),
        "on_late": on_late,
        "semantics": "interval",
        "index": bool(index),
    }
    spec = {"time": (time_l, time_r), "unit": unit, "lateness": k, "upper": upper}
    processor = JoinShard(kwargs, sides, (lcols, rcols), spec, arrow_out, list(both.columns))
    out = both.groupBy(_SHARD).transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=output_schema(arrow_out),
        outputMode="Append",
        timeMode="EventTime",
    )
    out.windgate_plan = (
        f"streaming: BandJoiner per shard ({shards} shard(s)) in transformWithStateInPandas, its snapshot "
        f"in the state store; watermark {time_l}/{time_r} - {lateness!r}"
    )
    return out
