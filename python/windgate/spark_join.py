"""The band join on Spark (:func:`windgate.spark.band_join`): a bounded number of groups, one join each.

Rows are grouped by ``(time bucket, pmod(hash(equality keys), P))``. A left row lives in the one bucket
``floor((l.ts - origin) / bucket)``; a right row is copied into every bucket holding a left row it can match,
``floor((r.ts - upper - origin) / bucket)`` to ``floor((r.ts - lower - origin) / bucket)`` (exact: the
differences are clamped to int64, never wrapped). Equal keys hash alike on both sides,
so every matching pair meets in exactly one group: the left row's. Each group runs ONE
:func:`windgate.band_join` over all of its keys (the equality predicates select the pairs; the join's index
is keyed by them), so the number of Python calls is the number of groups, not buckets x distinct keys.

``how="left"``: every right row that can match a left row is in the left row's group, so a left row without a
partner in its group has none at all; the group's join returns it with nulls.

The groups, with equality predicates: ``P = spark.sql.shuffle.partitions`` (the partitions Spark's own join
would use for the same data) key-hash groups per bucket, and buckets ``KEYED_BUCKET_FACTOR x (upper -
lower)`` wide (``origin = 0``): no Spark job before the join, and right rows are copied into about
``1 + 1/64`` buckets. Without equality predicates (``P = 1``) the buckets alone make the groups, so their
width comes from the data: one Spark job reads the time span and row count of both inputs, and :func:`plan`
cuts the span into about ``G = min(spark.sql.shuffle.partitions, 4 x defaultParallelism)`` buckets (more
for large inputs, about ``ROWS_PER_GROUP`` rows each), at least twice ``upper - lower`` wide, starting at
the smallest time. ``bucket=`` and ``partitions=`` override both choices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _native, _specs
from .errors import ColumnNotFoundError, InvalidParameterError
from .spark_session import default_parallelism, input_schema, output_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

_BUCKET = "__windgate_bucket"
_PART = "__windgate_part"
_TIME = "__windgate_time"
_KEY = "__windgate_key"
_MAX_BUCKET = 2**60
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
#: Rows (both sides, right rows counted once per bucket copy) a group should hold at most, when the number
#: of groups is derived from the data: a group is joined in one Python call, in memory.
ROWS_PER_GROUP = 2_000_000
#: With equality predicates, the default bucket is this many times ``upper - lower`` wide: right rows are
#: copied into about ``1 + 1 / KEYED_BUCKET_FACTOR`` buckets, and ``P`` splits each bucket by key.
KEYED_BUCKET_FACTOR = 64


def signed_units(value: Any, unit: str, param: str, column: str = "time") -> int | None:
    """A span (an int on an integer time column; a duration string, possibly negative such as ``"-30s"``
    for ``lower``/``upper``, or a timedelta on a timestamp column) in time-column units."""
    return _specs.units(_specs.span(value, param), unit, param, column)


def plan(span: int | None, rows: int, lower: int, upper: int, target: int) -> int:
    """The bucket width without equality predicates, for a time span of ``span`` units (``None``: no rows)
    and ``rows`` rows: about ``G = max(target, ceil(rows / ROWS_PER_GROUP))`` buckets, each at least twice
    ``upper - lower`` wide (so a right row is in at most two buckets)."""
    groups = max(1, target, math.ceil(rows / ROWS_PER_GROUP))
    floor_width = min(2 * max(1, upper - lower), _MAX_BUCKET)
    if span is None:
        return floor_width
    return min(max(floor_width, math.ceil(span / groups)), _MAX_BUCKET)


def band_join(
    left_df: DataFrame,
    right_df: DataFrame,
    *,
    time: str | Sequence[str],
    window: _specs.Span | None = None,
    lower: _specs.Span | None = None,
    upper: _specs.Span | None = None,
    how: str = "inner",
    on: Any = (),
    bucket: _specs.Span | None = None,
    partitions: int | None = None,
    threads: int | None = None,
    index: bool = True,
    semantics: str = "interval",
) -> DataFrame:
    """See :func:`windgate.spark.band_join` (the documented entry point)."""
    from pyspark.sql import functions as F

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
    )
    arrow_l, arrow_r, preds, threads = chk["arrow_l"], chk["arrow_r"], chk["preds"], chk["threads"]
    (time_l, time_r), arrow_out, unit = chk["time"], chk["arrow_out"], chk["unit"]
    lo, up = chk["lower"], chk["upper"]
    if partitions is not None:
        partitions = _specs.integer(partitions, "partitions", minimum=1)
    spark_out = output_schema(arrow_out)
    spark = left_df.sparkSession
    eq_preds = [(i, p) for i, p in enumerate(preds) if p[0] == "eq"]
    outer = how == "left"

    # Rows with a null (or NaN) predicate value match nothing: dropped before the shuffle, except left rows
    # of a left outer join (they come out unmatched). Rows with a null time are kept: they land in the null
    # bucket, where the join raises NullTimeError as the local call does (Spark would drop them silently).
    left = left_df if outer else drop_unmatchable(left_df, time_l, [p[1] for p in preds], arrow_l)
    right = drop_unmatchable(right_df, time_r, [p[2] for p in preds], arrow_r)
    left = left.withColumn(_TIME, _specs.spark_time_units(time_l, unit))
    right = right.withColumn(_TIME, _specs.spark_time_units(time_r, unit))

    if bucket is not None:
        bucket_u = signed_units(bucket, unit, "bucket", time_l)
        if not 0 < bucket_u <= _MAX_BUCKET:
            raise InvalidParameterError(f"bucket: expected a positive width up to 2**60, got {bucket_u}")
    origin = 0
    if eq_preds:
        # No Spark job: P from the shuffle partitions, buckets wide.
        parts = partitions if partitions is not None else _shuffle_partitions(spark)
        if bucket is None:
            bucket_u = min(max(1, KEYED_BUCKET_FACTOR * (up - lo)), _MAX_BUCKET)
    else:
        parts = 1
        if bucket is None:
            # One Spark job: the time span and row count, for about G buckets from the smallest time.
            t_min, t_max, rows = _stats(left, right)
            span = None if t_min is None else t_max - t_min + 1
            origin = t_min or 0
            bucket_u = plan(span, rows, lo, up, _target_groups(spark))

    # Buckets start at the smallest time (when known): data spanning one bucket width is one bucket.
    b = bucket_u
    left = left.withColumn(_BUCKET, F.expr(_floor_div(_clamped(f"`{_TIME}`", -origin), b)))
    # explode_outer: a null time (null sequence) keeps its row, with a null bucket.
    first = _floor_div(_clamped(f"`{_TIME}`", -origin - up), b)
    last = _floor_div(_clamped(f"`{_TIME}`", -origin - lo), b)
    right = right.withColumn(_BUCKET, F.explode_outer(F.sequence(F.expr(first), F.expr(last))))
    keys = [_BUCKET]
    if parts > 1:
        left = left.withColumn(_PART, F.pmod(F.hash(*_keys(eq_preds, arrow_l, 1)), F.lit(parts)))
        right = right.withColumn(_PART, F.pmod(F.hash(*_keys(eq_preds, arrow_l, 2)), F.lit(parts)))
        keys.append(_PART)
    native_kwargs = {
        "time": (time_l, time_r),
        "window": None,
        "lower": _specs.units_span(lo, unit),
        "upper": _specs.units_span(up, unit),
        "how": how,
        "on": preds,
        "threads": threads,
        "lateness": None,
        "on_late": "drop",
        "semantics": "interval",
        "index": bool(index),
        "strategy": "auto",
    }
    extra = [_TIME, *keys]
    grouped = left.groupBy(*keys).cogroup(right.groupBy(*keys))
    return grouped.applyInArrow(_group_task(native_kwargs, arrow_out, extra, outer), spark_out)


def prepare(
    left_df: DataFrame,
    right_df: DataFrame,
    *,
    time: str | Sequence[str],
    window: _specs.Span | None,
    lower: _specs.Span | None,
    upper: _specs.Span | None,
    how: str,
    on: Any,
    threads: int | None,
    index: bool,
    semantics: str,
    streaming: bool = False,
) -> dict[str, Any]:
    """Every parameter and column type checked, and the output schema, before Spark runs anything (also for
    :mod:`windgate.spark_join_stream`): the Arrow schemas, ``time`` as a pair, the predicates' tuples,
    ``threads``, the output schema, the time unit and the bounds in it."""
    from .join import band_join as local_band_join

    if semantics != "interval":
        raise InvalidParameterError(
            f'semantics: windgate.spark.band_join supports only "interval", got {semantics!r} '
            '(the "scalejoin" semantics depends on the global order in which each side purges its window, '
            "which time buckets cannot reproduce; run windgate.band_join locally for it)"
        )
    flags = [getattr(df, "isStreaming", False) is True for df in (left_df, right_df)]
    if any(flags) and not all(flags):
        param = "left_df" if flags[0] else "right_df"
        raise InvalidParameterError(
            f"{param}: a streaming DataFrame joins only another streaming DataFrame (a stream with a batch "
            "DataFrame is not supported: join each micro-batch inside writeStream.foreachBatch instead)"
        )
    arrow_l = input_schema(left_df, "left_df", streaming=streaming)
    arrow_r = input_schema(right_df, "right_df", streaming=streaming)
    time_l, time_r = _specs.time_pair(time)
    preds = _specs.predicates(on)
    for side, df, cols in (
        ("left", left_df, [time_l, *(p[1] for p in preds)]),
        ("right", right_df, [time_r, *(p[2] for p in preds)]),
    ):
        for col in cols:
            if col not in df.columns:
                param = "time" if col == cols[0] else "on"
                names = ", ".join(df.columns)
                raise ColumnNotFoundError(
                    f"{param}: column '{col}' is not in the {side} DataFrame (columns: {names})"
                )
    spark = left_df.sparkSession
    if threads is None:
        threads = int(spark.conf.get("spark.task.cpus", "1") or 1)
    kwargs = {
        "time": (time_l, time_r),
        "window": window,
        "lower": lower,
        "upper": upper,
        "how": how,
        "on": on,
        "threads": threads,
        "lateness": None,
        "semantics": "interval",
        "index": index,
    }
    # Every parameter and column type checked, and the output schema, before Spark runs anything.
    arrow_out = local_band_join(arrow_l.empty_table(), arrow_r.empty_table(), **kwargs).schema

    unit = _specs.time_unit(arrow_l.field(time_l).type)
    if window is not None:
        w = signed_units(window, unit, "window", time_l)
        lo, up = -w, w
    else:
        lo, up = signed_units(lower, unit, "lower", time_l), signed_units(upper, unit, "upper", time_l)
    return {
        "arrow_l": arrow_l,
        "arrow_r": arrow_r,
        "time": (time_l, time_r),
        "preds": preds,
        "threads": threads,
        "arrow_out": arrow_out,
        "unit": unit,
        "lower": lo,
        "upper": up,
    }


def _shuffle_partitions(spark) -> int:
    return max(1, int(spark.conf.get("spark.sql.shuffle.partitions", "200") or 200))


def _target_groups(spark) -> int:
    return min(_shuffle_partitions(spark), 4 * default_parallelism(spark))


def _stats(left, right) -> tuple[int | None, int | None, int]:
    """One Spark job: the smallest and largest time of both sides (``None`` without any), the row count."""
    from pyspark.sql import functions as F

    both = left.select(F.col(_TIME).alias("t")).unionAll(right.select(F.col(_TIME).alias("t")))
    lo, hi, n = both.agg(F.min("t"), F.max("t"), F.count(F.lit(1))).first()
    return (None if lo is None else int(lo)), (None if hi is None else int(hi)), int(n or 0)


def _keys(eq_preds, arrow_l: pa.Schema, side: int) -> list:
    """The equality columns of one side (1: left, 2: right), cast to one type per pair so both sides hash
    and compare alike (int vs long, -0.0 vs 0.0)."""
    out = []
    for _, p in eq_preds:
        out.append(key_expr(p[side], common_key_type(arrow_l.field(p[1]).type)))
    return out


def _clamped(expr: str, offset: int) -> str:
    """``expr + offset`` clamped to int64, exact: a matching left time lies inside it. Long arithmetic with
    the overflow thresholds computed here (decimal arithmetic for offsets beyond 2**62)."""
    if offset == 0:
        return expr
    if abs(offset) <= 2**62:
        if offset > 0:
            body = f"if({expr} > {_I64_MAX - offset}L, {_I64_MAX}L, {expr} + {offset}L)"
        else:
            # (a literal -2**63 would be parsed as the negation of 2**63, which overflows)
            body = f"if({expr} < {_I64_MIN - offset}L, ({_I64_MIN + 1}L - 1L), {expr} + {offset}L)"
    else:
        total = f"(CAST({expr} AS DECIMAL(20, 0)) + CAST({offset} AS DECIMAL(20, 0)))"
        # greatest/least skip nulls: a null time must stay null (its row goes to the null bucket).
        body = f"CAST(least(greatest({total}, {_I64_MIN}BD), {_I64_MAX}BD) AS BIGINT)"
    return f"if({expr} IS NULL, NULL, {body})"


def _floor_div(expr: str, b: int) -> str:
    """floor(expr / b) in long arithmetic (`/` would go through double, `div` truncates towards zero)."""
    e = f"({expr})"
    return f"(({e} div {b}L) - if({e} < 0 AND pmod({e}, {b}L) != 0, 1L, 0L))"


def key_expr(col: str, common: str | None):
    from pyspark.sql import functions as F

    c = F.col(f"`{col}`")
    if common is None:
        return c
    c = c.cast(common)
    if common == "double":
        # -0.0 equals 0.0: one value, one hash.
        c = F.when(c == 0, F.lit(0.0)).otherwise(c)
    return c


def drop_unmatchable(df, time: str, cols: list[str], schema: pa.Schema):
    """Drops the rows whose predicate columns hold a null or NaN (they match nothing), keeping null times."""
    from pyspark.sql import functions as F

    if not cols:
        return df
    ok = None
    for c in dict.fromkeys(cols):
        cond = F.col(f"`{c}`").isNotNull()
        if pa.types.is_floating(schema.field(c).type):
            cond = cond & ~F.isnan(F.col(f"`{c}`"))
        ok = cond if ok is None else ok & cond
    return df.filter(F.col(f"`{time}`").isNull() | ok)


def common_key_type(t: pa.DataType) -> str | None:
    """The Spark type both sides' equality keys are cast to (windgate compares integers as int64, floats as
    float64); ``None`` keeps the column as it is."""
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_floating(t):
        return "double"
    return None


def _group_task(kwargs: dict[str, Any], arrow_out: pa.Schema, extra: list[str], outer: bool):
    """One group (a time bucket and a share of the keys): one local join of all its rows."""

    def run(key: tuple, left: pa.Table, right: pa.Table) -> pa.Table:
        # The null bucket holds rows with a null time: the join raises NullTimeError on them.
        if key[0].is_valid and (left.num_rows == 0 or (right.num_rows == 0 and not outer)):
            return arrow_out.empty_table()
        out = _native.band_join(left.drop_columns(extra), right.drop_columns(extra), **kwargs)
        return out if out.schema == arrow_out else out.cast(arrow_out)

    return run
