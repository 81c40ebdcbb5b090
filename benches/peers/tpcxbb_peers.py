"""The five TPCx-BB-like queries of ``docs/tpcxbb.md`` (Q1, Q2, Q3, Q4, Q15) written for other engines: DuckDB
SQL and Spark DataFrame code, each returning the query's exact result as a pyarrow table (the doc's columns,
types and total order), so that it can be compared row for row with windgate's ordered pipelines.

    from benches.peers import tpcxbb_peers as peers
    con = peers.duckdb_connect(clickstream, store_sales, threads=2)   # loads both tables into DuckDB
    table = peers.duckdb_query(con, "q4")

    frames = peers.spark_frames(spark, clickstream_df, store_sales_df)
    table = peers.spark_query("q4", frames)                           # ordered, collected with toArrow()

How each query is written (the doc's numbered steps are the contract):

* Sessions (Q2, Q4) are not ``session_window``: a row starts a new session when the user's previous kept row
  (in ``click_id`` order, i.e. file order) is more than 3600 s older; the session number is the running sum of
  those starts. A gap of exactly 3600 s continues the session, as the doc says.
* Q3's "5 views with the largest ``click_id`` among those within 10 days before the purchase" is computed
  without a range join: every kept row carries the running number of the user's views so far, a purchase
  asks for view numbers ``v, v-1, ..., v-4`` (an equi-join), and the 10-day condition then drops some of
  them. That is the same set because ``ts`` never decreases in ``click_id`` order, so the views within 10
  days form a suffix of the user's views before the purchase.
* Q4's ``mean_rows`` and Q15's ``slope``/``intercept`` are exact integer sums (DuckDB ``HUGEINT``, Spark
  ``DECIMAL(38,0)``) rounded once to float64 and divided, as the doc defines them, so they compare exactly
  (both operands are below 2^53 for these data, so each rounding is exact and the division is IEEE's
  correctly rounded one in every engine).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

QUERIES = ("q1", "q2", "q3", "q4", "q15")

#: The table each query reads.
INPUT = {
    "q1": "store_sales",
    "q2": "clickstream",
    "q3": "clickstream",
    "q4": "clickstream",
    "q15": "store_sales",
}

#: Each query's output columns and Arrow types (docs/tpcxbb.md §3).
OUTPUT = {
    "q1": pa.schema(
        [
            ("item_a", pa.int64()),
            ("item_b", pa.int64()),
            ("window_start", pa.int64()),
            ("window_end", pa.int64()),
            ("count", pa.int64()),
        ]
    ),
    "q2": pa.schema([("item_a", pa.int64()), ("item_b", pa.int64()), ("count", pa.int64())]),
    "q3": pa.schema([("viewed_item_id", pa.int64()), ("count", pa.int64())]),
    "q4": pa.schema(
        [
            ("user_id", pa.int64()),
            ("session_start", pa.int64()),
            ("session_end", pa.int64()),
            ("rows", pa.int64()),
            ("carts", pa.int64()),
            ("purchases", pa.int64()),
            ("mean_rows", pa.float64()),
        ]
    ),
    "q15": pa.schema(
        [
            ("category", pa.int32()),
            ("window_start", pa.int64()),
            ("points", pa.int64()),
            ("slope", pa.float64()),
            ("intercept", pa.float64()),
        ]
    ),
}

GAP = 3600  # session gap, seconds (a gap of exactly GAP continues the session)
HOUR = 3600
DAY = 86400
Q3_WITHIN = 864000  # 10 days
Q3_LAST = 5

# --------------------------------------------------------------------------------------------- DuckDB

# Session numbers per user over ``kept`` (a CTE with click_id, ts, user_id), shared by Q2 and Q4.
_DUCKDB_SESSIONS = f"""
marked AS (
    SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY user_id ORDER BY click_id) <= {GAP}
                   THEN 0 ELSE 1 END AS starts
    FROM kept),
numbered AS (
    SELECT *, sum(starts) OVER (PARTITION BY user_id ORDER BY click_id ROWS UNBOUNDED PRECEDING)::BIGINT
              AS session
    FROM marked)"""

DUCKDB_SQL: Mapping[str, str] = {
    "q1": f"""
WITH kept AS (SELECT * FROM store_sales WHERE store <= 10 AND category IN (1, 2, 3, 4, 5)),
pairs AS (SELECT DISTINCT a.ticket, a.ts, a.item_id AS item_a, b.item_id AS item_b
          FROM kept a JOIN kept b ON a.ticket = b.ticket AND a.item_id < b.item_id),
counts AS (SELECT item_a, item_b, ts // {HOUR} * {HOUR} AS window_start, count(*) AS count
           FROM pairs GROUP BY ALL HAVING count(*) >= 2)
SELECT item_a, item_b, window_start, window_start + {HOUR} AS window_end, count FROM counts
QUALIFY row_number() OVER (PARTITION BY window_start ORDER BY count DESC, item_a, item_b) <= 100
ORDER BY window_start, count DESC, item_a, item_b""",
    "q2": f"""
WITH kept AS (SELECT click_id, ts, user_id, item_id FROM clickstream
              WHERE user_id IS NOT NULL AND item_id IS NOT NULL),
{_DUCKDB_SESSIONS},
items AS (SELECT DISTINCT user_id, session, item_id FROM numbered)
SELECT a.item_id AS item_a, b.item_id AS item_b, count(*) AS count
FROM items a JOIN items b ON a.user_id = b.user_id AND a.session = b.session AND a.item_id < b.item_id
GROUP BY ALL
ORDER BY count DESC, item_a, item_b
LIMIT 30""",
    "q3": f"""
WITH kept AS (SELECT click_id, ts, user_id, item_id, event FROM clickstream
              WHERE user_id IS NOT NULL AND item_id IS NOT NULL AND event IN ('view', 'purchase')),
counted AS (
    SELECT *, sum(CASE WHEN event = 'view' THEN 1 ELSE 0 END)
                  OVER (PARTITION BY user_id ORDER BY click_id ROWS UNBOUNDED PRECEDING)::BIGINT AS views
    FROM kept),
viewed AS (SELECT user_id, views, ts, item_id FROM counted WHERE event = 'view'),
wanted AS (SELECT p.user_id, p.ts, p.views - k.k AS views
           FROM counted p CROSS JOIN (SELECT unnest(range({Q3_LAST})) AS k) k
           WHERE p.event = 'purchase' AND p.views - k.k >= 1)
SELECT v.item_id AS viewed_item_id, count(*) AS count
FROM wanted w JOIN viewed v ON v.user_id = w.user_id AND v.views = w.views AND v.ts >= w.ts - {Q3_WITHIN}
GROUP BY ALL
ORDER BY count DESC, viewed_item_id
LIMIT 30""",
    "q4": f"""
WITH kept AS (SELECT click_id, ts, user_id, event FROM clickstream WHERE user_id IS NOT NULL),
{_DUCKDB_SESSIONS},
sessions AS (
    SELECT user_id, min(ts) AS session_start, max(ts) AS session_end, count(*) AS "rows",
           count(*) FILTER (WHERE event = 'cart') AS carts,
           count(*) FILTER (WHERE event = 'purchase') AS purchases
    FROM numbered GROUP BY user_id, session)
SELECT user_id, session_start, session_end, "rows", carts, purchases,
       CAST(sum("rows"::HUGEINT) OVER w AS DOUBLE) / CAST(count(*) OVER w AS DOUBLE) AS mean_rows
FROM sessions WHERE carts > 0 AND purchases = 0
WINDOW w AS (ORDER BY session_end, user_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
ORDER BY session_end, user_id""",
    "q15": f"""
WITH daily AS (
    SELECT category, ts // {DAY} AS day, sum(quantity::HUGEINT * price) AS y
    FROM store_sales WHERE store = 1 GROUP BY ALL),
points AS (SELECT category, day, y, (day - min(day) OVER (PARTITION BY category))::HUGEINT AS x FROM daily),
sums AS (
    SELECT category, day, count(*) OVER c AS n, sum(x) OVER c AS sx, sum(y) OVER c AS sy,
           sum(x * x) OVER c AS sxx, sum(x * y) OVER c AS sxy
    FROM points WINDOW c AS (PARTITION BY category ORDER BY day ROWS UNBOUNDED PRECEDING)),
fit AS (SELECT category, day, n, n * sxy - sx * sy AS num, n * sxx - sx * sx AS den,
               sy * sxx - sx * sxy AS icpt FROM sums)
SELECT category, day * {DAY} AS window_start, n AS points,
       CAST(num AS DOUBLE) / CAST(den AS DOUBLE) AS slope,
       CAST(icpt AS DOUBLE) / CAST(den AS DOUBLE) AS intercept
FROM fit WHERE n >= 2 AND num <= 0
ORDER BY window_start, category""",
}


def duckdb_connect(clickstream: pa.Table | None, store_sales: pa.Table | None, threads: int = 1):
    """A new in-memory DuckDB connection with ``threads`` threads and the given tables copied into DuckDB
    tables of the same names (so a query does not time the Arrow scan)."""
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(f"SET threads = {int(threads)}")
    for name, table in (("clickstream", clickstream), ("store_sales", store_sales)):
        if table is not None:
            con.register("_input", table)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM _input")
            con.unregister("_input")
    return con


def duckdb_query(con, name: str) -> pa.Table:
    """Query ``name`` (one of :data:`QUERIES`) on a :func:`duckdb_connect` connection."""
    return _conform(con.sql(DUCKDB_SQL[name]).to_arrow_table(), name)


def duckdb(name: str, clickstream: pa.Table, store_sales: pa.Table, threads: int = 1) -> pa.Table:
    """Query ``name`` in a fresh DuckDB connection (loads the tables, runs, closes)."""
    con = duckdb_connect(
        clickstream if INPUT[name] == "clickstream" else None,
        store_sales if INPUT[name] == "store_sales" else None,
        threads,
    )
    try:
        return duckdb_query(con, name)
    finally:
        con.close()


# --------------------------------------------------------------------------------------------- Spark


def spark_frames(spark, clickstream, store_sales) -> dict:
    """The inputs of :func:`spark_query`: ``{"clickstream": DataFrame, "store_sales": DataFrame}``. Each may
    be a DataFrame, a pyarrow table (converted with ``createDataFrame``) or None."""
    frames = {}
    for name, t in (("clickstream", clickstream), ("store_sales", store_sales)):
        if isinstance(t, pa.Table):
            t = spark.createDataFrame(t.to_pandas(), schema=_spark_schema(t.schema))
        frames[name] = t
    return frames


def _spark_schema(schema: pa.Schema) -> str:
    types = {pa.int64(): "bigint", pa.int32(): "int", pa.string(): "string", pa.large_string(): "string"}
    return ", ".join(f"{f.name} {types[f.type]}" for f in schema)


def _sessions(kept):
    """``kept`` (click_id, ts, user_id, ...) with ``session``, the user's session number (module doc)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_user = Window.partitionBy("user_id").orderBy("click_id")
    starts = F.when(F.col("ts") - F.lag("ts").over(by_user) <= GAP, 0).otherwise(1)
    return kept.withColumn("starts", starts).withColumn(
        "session", F.sum("starts").over(by_user.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    )


def spark_q1(ss):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kept = (
        ss.where((F.col("store") <= 10) & F.col("category").isin(1, 2, 3, 4, 5))
        .select("ticket", "ts", "item_id")
        .distinct()
    )
    a, b = kept.alias("a"), kept.alias("b")
    pairs = a.join(b, (F.col("a.ticket") == F.col("b.ticket")) & (F.col("a.item_id") < F.col("b.item_id")))
    counts = (
        pairs.select(
            F.col("a.item_id").alias("item_a"),
            F.col("b.item_id").alias("item_b"),
            F.expr(f"a.ts div {HOUR} * {HOUR}").alias("window_start"),
        )
        .groupBy("item_a", "item_b", "window_start")
        .agg(F.count(F.lit(1)).alias("count"))
        .where(F.col("count") >= 2)
    )
    rank = Window.partitionBy("window_start").orderBy(F.desc("count"), "item_a", "item_b")
    return (
        counts.withColumn("rank", F.row_number().over(rank))
        .where(F.col("rank") <= 100)
        .select(
            "item_a", "item_b", "window_start", (F.col("window_start") + HOUR).alias("window_end"), "count"
        )
        .orderBy("window_start", F.desc("count"), "item_a", "item_b")
    )


def spark_q2(wc):
    from pyspark.sql import functions as F

    kept = wc.where(F.col("user_id").isNotNull() & F.col("item_id").isNotNull()).select(
        "click_id", "ts", "user_id", "item_id"
    )
    items = _sessions(kept).select("user_id", "session", "item_id").distinct()
    a, b = items.alias("a"), items.alias("b")
    on = (
        (F.col("a.user_id") == F.col("b.user_id"))
        & (F.col("a.session") == F.col("b.session"))
        & (F.col("a.item_id") < F.col("b.item_id"))
    )
    return (
        a.join(b, on)
        .groupBy(F.col("a.item_id").alias("item_a"), F.col("b.item_id").alias("item_b"))
        .agg(F.count(F.lit(1)).alias("count"))
        .orderBy(F.desc("count"), "item_a", "item_b")
        .limit(30)
    )


def spark_q3(wc):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kept = wc.where(
        F.col("user_id").isNotNull() & F.col("item_id").isNotNull() & F.col("event").isin("view", "purchase")
    ).select("click_id", "ts", "user_id", "item_id", "event")
    so_far = Window.partitionBy("user_id").orderBy("click_id").rowsBetween(Window.unboundedPreceding, 0)
    counted = kept.withColumn("views", F.sum(F.when(F.col("event") == "view", 1).otherwise(0)).over(so_far))
    viewed = counted.where(F.col("event") == "view").select("user_id", "views", "ts", "item_id")
    wanted = (
        counted.where(F.col("event") == "purchase")
        .select(
            "user_id",
            F.col("ts").alias("p_ts"),
            "views",
            F.explode(F.sequence(F.lit(0), F.lit(Q3_LAST - 1))).alias("k"),
        )
        .select("user_id", "p_ts", (F.col("views") - F.col("k")).alias("views"))
        .where(F.col("views") >= 1)
    )
    return (
        wanted.join(viewed, ["user_id", "views"])
        .where(F.col("ts") >= F.col("p_ts") - Q3_WITHIN)
        .groupBy(F.col("item_id").alias("viewed_item_id"))
        .agg(F.count(F.lit(1)).alias("count"))
        .orderBy(F.desc("count"), "viewed_item_id")
        .limit(30)
    )


def spark_q4(wc):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kept = wc.where(F.col("user_id").isNotNull()).select("click_id", "ts", "user_id", "event")
    sessions = (
        _sessions(kept)
        .groupBy("user_id", "session")
        .agg(
            F.min("ts").alias("session_start"),
            F.max("ts").alias("session_end"),
            F.count(F.lit(1)).alias("rows"),
            F.count(F.when(F.col("event") == "cart", 1)).alias("carts"),
            F.count(F.when(F.col("event") == "purchase", 1)).alias("purchases"),
        )
        .where((F.col("carts") > 0) & (F.col("purchases") == 0))
    )
    so_far = Window.orderBy("session_end", "user_id").rowsBetween(Window.unboundedPreceding, 0)
    total = F.sum(F.col("rows").cast("decimal(38,0)")).over(so_far).cast("double")
    mean = total / F.count(F.lit(1)).over(so_far).cast("double")
    return sessions.select(
        "user_id", "session_start", "session_end", "rows", "carts", "purchases", mean.alias("mean_rows")
    ).orderBy("session_end", "user_id")


def spark_q15(ss):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    dec = "decimal(38,0)"
    daily = (
        ss.where(F.col("store") == 1)
        .groupBy("category", F.expr(f"ts div {DAY}").alias("day"))
        .agg(F.sum(F.col("quantity").cast(dec) * F.col("price").cast(dec)).cast(dec).alias("y"))
    )
    first = F.min("day").over(Window.partitionBy("category"))
    points = daily.withColumn("x", (F.col("day") - first).cast(dec))
    c = Window.partitionBy("category").orderBy("day").rowsBetween(Window.unboundedPreceding, 0)

    def total(e):
        return F.sum(e).over(c).cast(dec)

    x, y = F.col("x"), F.col("y")
    sums = points.select(
        "category",
        "day",
        F.count(F.lit(1)).over(c).alias("n"),
        total(x).alias("sx"),
        total(y).alias("sy"),
        total(x * x).alias("sxx"),
        total(x * y).alias("sxy"),
    )
    n, sx, sy, sxx, sxy = (F.col(k).cast(dec) for k in ("n", "sx", "sy", "sxx", "sxy"))
    fit = sums.select(
        "category",
        "day",
        "n",
        (n * sxy - sx * sy).alias("num"),
        (n * sxx - sx * sx).alias("den"),
        (sy * sxx - sx * sxy).alias("icpt"),
    )
    return (
        fit.where((F.col("n") >= 2) & (F.col("num") <= 0))
        .select(
            "category",
            (F.col("day") * DAY).alias("window_start"),
            F.col("n").alias("points"),
            (F.col("num").cast("double") / F.col("den").cast("double")).alias("slope"),
            (F.col("icpt").cast("double") / F.col("den").cast("double")).alias("intercept"),
        )
        .orderBy("window_start", "category")
    )


SPARK = {"q1": spark_q1, "q2": spark_q2, "q3": spark_q3, "q4": spark_q4, "q15": spark_q15}


def spark_dataframe(name: str, frames: Mapping):
    """Query ``name`` as an ordered Spark DataFrame over ``frames`` (see :func:`spark_frames`)."""
    return SPARK[name](frames[INPUT[name]])


def spark_query(name: str, frames: Mapping) -> pa.Table:
    """Query ``name`` run on Spark and collected in order with ``toArrow()``."""
    return _conform(spark_dataframe(name, frames).toArrow(), name)


# --------------------------------------------------------------------------------------------- checks


def _conform(table: pa.Table, name: str) -> pa.Table:
    """``table`` with the doc's column types (a safe cast: an engine's ``BIGINT`` count or ``INTEGER``
    category keeps its value); fails if a column is missing or a value does not fit."""
    want = OUTPUT[name]
    if table.column_names != want.names:
        raise ValueError(f"{name}: columns {table.column_names} != {want.names}")
    return table.cast(want, safe=True)


def compare(out: pa.Table, ref: pa.Table, *, tolerance: float = 0.0) -> str | None:
    """None when ``out`` equals ``ref`` row for row (names, types and values; float columns bit for bit, or
    within ``tolerance`` relative when it is positive), else what differs first."""
    names = [(f.name, f.type) for f in out.schema]
    ref_names = [(f.name, f.type) for f in ref.schema]
    if names != ref_names:
        return f"columns {names} != {ref_names}"
    if out.num_rows != ref.num_rows:
        return f"{out.num_rows:,} rows != {ref.num_rows:,}"
    for field in ref.schema:
        a, b = out.column(field.name).combine_chunks(), ref.column(field.name).combine_chunks()
        nulls = a.is_null().to_numpy(zero_copy_only=False) != b.is_null().to_numpy(zero_copy_only=False)
        if pa.types.is_floating(field.type):
            x, y = a.to_numpy(zero_copy_only=False), b.to_numpy(zero_copy_only=False)
            if tolerance > 0:
                bad = ~np.isclose(x, y, rtol=tolerance, atol=0.0, equal_nan=True)
            else:
                bad = x.view(np.int64) != y.view(np.int64)  # bit for bit: -0.0 != 0.0, NaN == same NaN
        else:
            bad = ~pc.fill_null(pc.equal(a, b), True).to_numpy(zero_copy_only=False)
        bad |= nulls
        if bad.any():
            i = int(bad.argmax())
            return (
                f"column {field.name}: {int(bad.sum()):,} rows differ, first at row {i} "
                f"({a[i].as_py()!r} != {b[i].as_py()!r})"
            )
    return None
