"""The Spark plans ``windgate demo`` and ``benches/peers/spark.py`` race windgate.spark against, written once.

Each function builds a lazy Spark DataFrame; nothing runs until it is written or collected. Every plan of a
family returns the same columns, so their outputs can be compared row for row (:mod:`windgate._demo_check`):

* window aggregation: ``[key,] window_start, <aggregates>`` with the aggregates of :data:`AGG_SETS`:
  :func:`spark_window` (Spark's ``groupBy(window(...), key)``), :func:`spark_panes` (the hand-written pane
  decomposition: partial aggregates per (key, pane), each pane exploded into the windows that hold it, then
  grouped again), :func:`windgate_window` (``windgate.spark.window_aggregate``, given a path when the
  installed version accepts one);
* top-k per window: ``key, window_start, ts, value``: :func:`spark_topk` (``row_number()`` over
  ``(window, key)``), :func:`spark_topk_panes` (top-k per pane first), :func:`windgate_topk`;
* band join: ``left_id, right_id``: :func:`spark_band_join` (a join on the key and the time band),
  :func:`windgate_band_join`.

Times are Spark timestamps after 1970 (the pane numbers use integer division, exact for positive times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: Aggregate sets: windgate's ``aggs`` and the output columns every plan returns for them.
AGG_SETS: dict[str, dict[str, Any]] = {
    "count_sum_max": {"*": "count", "value": ["sum", "max"]},
    "mean_std": {"value": ["mean", "std"]},
}
AGG_COLUMNS = {
    "count_sum_max": ["count", "sum_value", "max_value"],
    "mean_std": ["mean_value", "std_value"],
}


@dataclass(frozen=True)
class Windows:
    """A windowed query: windows of ``size_s`` seconds sliding by ``slide_s`` (tumbling when equal) on the
    timestamp column ``time``, per ``key`` (a column, a tuple of columns, or None: unkeyed), aggregating the
    column ``value``."""

    size_s: int
    slide_s: int
    key: str | tuple[str, ...] | None = "key"
    time: str = "ts"
    value: str = "value"
    aggs: str = "count_sum_max"

    @property
    def by(self) -> list[str]:
        if isinstance(self.key, tuple):
            return list(self.key)
        return [self.key] if self.key else []

    @property
    def columns(self) -> list[str]:
        """The output columns of the aggregation plans, in order."""
        return [*self.by, "window_start", *AGG_COLUMNS[self.aggs]]

    def pane_arithmetic(self) -> tuple[int, int, int]:
        """(pane length in microseconds, panes per window, panes per slide)."""
        pane_s = math.gcd(self.size_s, self.slide_s)
        return pane_s * 1_000_000, self.size_s // pane_s, self.slide_s // pane_s


def _window_col(w: Windows):
    from pyspark.sql import functions as F

    if w.size_s == w.slide_s:
        return F.window(w.time, f"{w.size_s} seconds")
    return F.window(w.time, f"{w.size_s} seconds", f"{w.slide_s} seconds")


def _spark_aggs(w: Windows) -> list:
    from pyspark.sql import functions as F

    v = F.col(w.value)
    if w.aggs == "count_sum_max":
        return [F.count(F.lit(1)).alias("count"), F.sum(v).alias("sum_value"), F.max(v).alias("max_value")]
    return [F.avg(v).alias("mean_value"), F.stddev_samp(v).alias("std_value")]


# ----------------------------------------------------------------------------------- window aggregation


def spark_window(df: DataFrame, w: Windows) -> DataFrame:
    """Spark's own plan: ``groupBy(window(ts, size, slide), key).agg(...)``."""
    from pyspark.sql import functions as F

    out = df.groupBy(_window_col(w).alias("window"), *w.by).agg(*_spark_aggs(w))
    return out.select(*w.by, F.col("window.start").alias("window_start"), *AGG_COLUMNS[w.aggs])


def _pane_number(w: Windows):
    """``floor(unix_micros(ts) / pane)`` in exact long arithmetic (times after 1970)."""
    from pyspark.sql import functions as F

    pane_us, _, _ = w.pane_arithmetic()
    return F.expr(f"unix_micros(`{w.time}`) div {pane_us}L")


def _windows_of_pane(w: Windows, pane):
    """The window numbers ``j`` (window ``j`` starts at ``j * slide``) whose window holds pane ``pane``:
    ``j * step <= pane < j * step + n``. One column when each pane is in one window (tumbling), else an
    exploded array (a literal array of ``n`` shifts when the slide is one pane: cheaper than ``sequence``)."""
    from pyspark.sql import functions as F

    _, n, step = w.pane_arithmetic()
    if n == 1 and step == 1:
        return pane
    if step == 1:
        return F.explode(F.array(*[pane - F.lit(i) for i in range(n)]))
    lo = F.expr(f"-((-(pane - {n - 1}L)) div {step}L)")  # ceil((pane - n + 1) / step); exact in longs
    hi = F.expr(f"pane div {step}L")
    return F.explode(F.sequence(lo, hi))


def spark_panes(df: DataFrame, w: Windows) -> DataFrame:
    """The hand-written pane decomposition, usually Spark's fastest plan for sliding windows: tumbling partial
    aggregates per (key, pane) of ``gcd(size, slide)``, each pane's partials exploded into the windows that
    contain it, and grouped again. Both group-bys aggregate partially before their shuffle, so only one row
    per (key, pane) and task crosses the network. Tumbling windows are their own panes: one group-by by the
    pane number.

    count/sum/max: count, sum and max per pane. mean/std: per pane the count ``c``, the sum ``s`` and
    ``m2 = c * var_pop`` (Spark's own, from central moments); per window ``n = sum(c)``, ``S = sum(s)`` and
    ``M2 = sum(m2) + sum(s*s/c) - S*S/n`` (Chan et al.'s combination). The between-pane term cancels when a
    window's panes hold nearly equal values far from zero, so a few windows can lose digits: the check reports
    them (plain sums of squares would lose them in every small window)."""
    from pyspark.sql import functions as F

    v = F.col(w.value)
    _, n, step = w.pane_arithmetic()
    if n == 1 and step == 1:  # tumbling: the pane is the window
        out = df.groupBy(*w.by, _pane_number(w).alias("j")).agg(*_spark_aggs(w))
        start = F.timestamp_micros(F.col("j") * F.lit(w.slide_s * 1_000_000)).alias("window_start")
        return out.select(*w.by, start, *AGG_COLUMNS[w.aggs])
    if w.aggs == "count_sum_max":
        partial = [F.count(F.lit(1)).alias("c"), F.sum(v).alias("s"), F.max(v).alias("m")]
        final = [F.sum("c").alias("count"), F.sum("s").alias("sum_value"), F.max("m").alias("max_value")]
        names = ["c", "s", "m"]
    else:
        partial = [F.count(v).alias("c"), F.sum(v).alias("s"), (F.var_pop(v) * F.count(v)).alias("m2")]
        final = [
            F.sum("c").alias("c"),
            F.sum("s").alias("s"),
            F.sum("m2").alias("m2"),
            F.sum(F.when(F.col("c") > 0, F.col("s") * F.col("s") / F.col("c"))).alias("between"),
        ]
        names = ["c", "s", "m2"]
    panes = df.select(*w.by, _pane_number(w).alias("pane"), w.value).groupBy(*w.by, "pane").agg(*partial)
    exploded = panes.select(*w.by, _windows_of_pane(w, F.col("pane")).alias("j"), *names)
    out = exploded.groupBy(*w.by, "j").agg(*final)
    start = F.timestamp_micros(F.col("j") * F.lit(w.slide_s * 1_000_000)).alias("window_start")
    if w.aggs == "count_sum_max":
        return out.select(*w.by, start, *AGG_COLUMNS[w.aggs])
    c, s = F.col("c"), F.col("s")
    mean = F.when(c > 0, s / c)
    m2 = F.greatest(F.col("m2") + F.col("between") - s * s / c, F.lit(0.0))
    std = F.when(c > 1, F.sqrt(m2 / (c - 1)))
    return out.select(*w.by, start, mean.alias("mean_value"), std.alias("std_value"))


def windgate_window(source: str | None, df: DataFrame, w: Windows) -> tuple[DataFrame, str]:
    """``windgate.spark.window_aggregate`` on the Parquet path ``source`` when the installed version takes a
    path, else on ``df`` (the same data read by Spark). Returns (the output with the plans' columns, what it
    was given: ``"path"``, or ``"DataFrame"`` with the reason the path was not taken)."""
    import windgate.spark as wspark

    kwargs = dict(
        time=w.time, size=f"{w.size_s}s", slide=f"{w.slide_s}s", by=w.by or None, aggs=AGG_SETS[w.aggs]
    )
    how = "DataFrame"
    out = None
    if source is not None:
        try:
            out = wspark.window_aggregate(source, **kwargs)
            how = "path"
        except (TypeError, AttributeError, ValueError) as exc:  # this version takes DataFrames only
            how = f"DataFrame (path not accepted: {type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if out is None:
        out = wspark.window_aggregate(df, **kwargs)
    return out.select(*w.columns), how


# ---------------------------------------------------------------------------------------- top-k per window


def spark_topk(df: DataFrame, w: Windows, k: int) -> DataFrame:
    """Spark's plan: each row in its windows (``window()``), ``row_number()`` over ``(window, key)`` by value
    (descending, then time), rank <= k (Spark pushes the limit below the shuffle as a window group limit)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = df.select(_window_col(w).alias("window"), *w.by, w.time, w.value)
    rank = F.row_number().over(
        Window.partitionBy("window", *w.by).orderBy(F.col(w.value).desc(), F.col(w.time))
    )
    top = rows.withColumn("rank", rank).where(F.col("rank") <= k)
    return top.select(*w.by, F.col("window.start").alias("window_start"), w.time, w.value)


def spark_topk_panes(df: DataFrame, w: Windows, k: int) -> DataFrame:
    """The pane rewrite of top-k: the k best rows of each (key, pane) first (a window's top k are among its
    panes' top k), exploded into the windows that hold the pane, then ``row_number()`` per (key, window)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = (F.col(w.value).desc(), F.col(w.time))
    pane_rank = F.row_number().over(Window.partitionBy(*w.by, "pane").orderBy(*order))
    panes = (
        df.select(*w.by, w.time, w.value, _pane_number(w).alias("pane"))
        .withColumn("r", pane_rank)
        .where(F.col("r") <= k)
    )
    exploded = panes.select(*w.by, w.time, w.value, _windows_of_pane(w, F.col("pane")).alias("j"))
    rank = F.row_number().over(Window.partitionBy(*w.by, "j").orderBy(*order))
    top = exploded.withColumn("rank", rank).where(F.col("rank") <= k)
    start = F.timestamp_micros(F.col("j") * F.lit(w.slide_s * 1_000_000)).alias("window_start")
    return top.select(*w.by, start, w.time, w.value)


def windgate_topk(df: DataFrame, w: Windows, k: int) -> DataFrame:
    """``windgate.spark.topk`` with the plans' columns."""
    import windgate.spark as wspark

    out = wspark.topk(
        df, time=w.time, size=f"{w.size_s}s", slide=f"{w.slide_s}s", by=w.by or None, score=w.value, k=k
    )
    return out.select(*w.by, "window_start", w.time, w.value)


# ---------------------------------------------------------------------------------------------- band join


def spark_band_join(
    left: DataFrame,
    right: DataFrame,
    *,
    window_s: int,
    key: str | None = None,
    band: tuple[str, float] | None = None,
) -> DataFrame:
    """Spark's join of the rows within ``window_s`` seconds: ``l.key = r.key AND r.ts BETWEEN l.ts - w AND
    l.ts + w`` (a sort-merge or broadcast hash join on the key); without a key, ``band = (column, eps)`` adds
    ``abs(l.column - r.column) <= eps`` and Spark has only a nested-loop join. Columns ``left_id``,
    ``right_id``."""
    from pyspark.sql import functions as F

    lt, rt = F.col("l.ts"), F.col("r.ts")
    interval = F.expr(f"INTERVAL {window_s} SECONDS")
    cond = (rt >= lt - interval) & (rt <= lt + interval)
    if key is not None:
        cond = (F.col(f"l.{key}") == F.col(f"r.{key}")) & cond
    if band is not None:
        col, eps = band
        cond = cond & (F.abs(F.col(f"l.{col}") - F.col(f"r.{col}")) <= F.lit(eps))
    joined = left.alias("l").join(right.alias("r"), cond, "inner")
    return joined.select(F.col("l.id").alias("left_id"), F.col("r.id").alias("right_id"))


def windgate_band_join(
    left: DataFrame,
    right: DataFrame,
    *,
    window_s: int,
    key: str | None = None,
    band: tuple[str, float] | None = None,
) -> DataFrame:
    """``windgate.spark.band_join`` of the same rows: ``|l.ts - r.ts| <= window_s`` seconds, ``eq(key)`` and
    ``band(column, eps)``. Columns ``left_id, right_id``."""
    import windgate
    import windgate.spark as wspark

    on = []
    if key is not None:
        on.append(windgate.eq(key, key))
    if band is not None:
        on.append(windgate.band(band[0], band[0], band[1]))
    out = wspark.band_join(left, right, time="ts", window=f"{window_s}s", on=on)
    return out.select("left_id", "right_id")
