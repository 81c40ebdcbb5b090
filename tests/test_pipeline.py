"""windgate.Pipeline and windgate.tpcxbb: the API, errors that name the parameter, parallel == sequential
(hypothesis over random chains, options and batch cuts), each TPCx-BB query against a DuckDB brute force of
docs/tpcxbb.md, the CLI round trip, and Spark local[2]."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from windgate import Pipeline, col, tpcxbb

# ------------------------------------------------------------------------------------------------- API


def clicks_table() -> pa.Table:
    return pa.table(
        {
            "ts": [0, 60, 120, 4000, 4100, 4200],
            "user": [1, 1, 2, 1, 2, None],
            "item": [10, 11, 10, 12, 11, 13],
            "event": ["view", "cart", "view", "view", "purchase", "view"],
        }
    )


def test_builder_is_immutable_and_describes_itself():
    base = Pipeline().filter(col("user").is_not_null())
    longer = base.sessionize(key="user", time="ts", gap=3600)
    assert len(base) == 1 and len(longer) == 2
    assert repr(longer) == "Pipeline(filter -> sessionize)"
    assert longer.ops[0] == ("filter", {"predicate": ("is_not_null", "user")})
    assert longer.schema(clicks_table().schema).names == ["user", "session_start", "session_end", "rows"]
    assert longer.stats is None


def test_sessions_counts_and_stats():
    p = (
        Pipeline()
        .filter(col("user").is_not_null())
        .sessionize(key="user", time="ts", gap=3600, values="item", counts={"carts": col("event") == "cart"})
    )
    out = p.run(clicks_table(), threads=2, chunk_rows=2)
    assert out.to_pylist() == [
        {"user": 1, "session_start": 0, "session_end": 60, "rows": 2, "carts": 1, "item": [10, 11]},
        {"user": 2, "session_start": 120, "session_end": 120, "rows": 1, "carts": 0, "item": [10]},
        {"user": 1, "session_start": 4000, "session_end": 4000, "rows": 1, "carts": 0, "item": [12]},
        {"user": 2, "session_start": 4100, "session_end": 4100, "rows": 1, "carts": 0, "item": [11]},
    ]
    s = p.stats
    assert (s["rows_in"], s["rows_out"], s["executor"]) == (6, 4, "parallel")
    assert [o["name"] for o in s["ops"]] == ["filter", "sessionize"]
    assert s["ops"][1]["kind"] == "partitioned" and s["ops"][1]["partitions"] == 32


def test_inputs_of_every_kind_give_the_same_rows():
    p = Pipeline().project({"user": "user", "x": col("item") * 2 + 1})
    t = clicks_table()
    want = p.run(t, sequential=True).to_pylist()
    assert want[0] == {"user": 1, "x": 21}
    assert p.run(t.to_batches()[0]).to_pylist() == want
    assert (
        p.run(pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=4))).to_pylist() == want
    )
    assert p.run(t.to_pandas()).num_rows == 6


def test_tpcxbb_queries_and_tables():
    assert tpcxbb.QUERIES == ("q1", "q2", "q3", "q4", "q15")
    assert [tpcxbb.table_of(q) for q in tpcxbb.QUERIES] == [
        "store_sales",
        "clickstream",
        "clickstream",
        "clickstream",
        "store_sales",
    ]
    assert repr(tpcxbb.query("q2")) == "Pipeline(filter -> sessionize -> pairs -> window_count -> topk)"
    c1, s1 = tpcxbb.generate(2000, seed=4)
    c2, s2 = tpcxbb.generate(2000, seed=4)
    assert c1.equals(c2) and s1.equals(s2) and c1.num_rows == s1.num_rows == 2000


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("make", "exc", "needle"),
    [
        (
            lambda: Pipeline([("filter", {"predicte": ("is_null", "ts")})]),
            windgate.InvalidParameterError,
            "predicte",
        ),
        (
            lambda: Pipeline().sessionize(key="nope", time="ts", gap=1),
            windgate.ColumnNotFoundError,
            "sessionize: key",
        ),
        (
            lambda: Pipeline().sessionize(key="user", time="event", gap=1),
            windgate.ColumnTypeError,
            "column 'event'",
        ),
        (
            lambda: Pipeline().window_count(keys="user", size=10),
            windgate.InvalidParameterError,
            "window_count: time",
        ),
        (lambda: Pipeline().topk(k=0, score="item"), windgate.InvalidParameterError, "topk: k"),
        (lambda: Pipeline().topk(k=2, score="event"), windgate.ColumnTypeError, "topk: score"),
        (lambda: Pipeline().pairs("item"), windgate.ColumnTypeError, "pairs: column 'item'"),
        (lambda: Pipeline().filter(col("user") == "x"), windgate.ColumnTypeError, "filter: predicate"),
        (lambda: Pipeline().filter(("~", "user")), windgate.InvalidParameterError, "filter: predicate"),
        (lambda: Pipeline([("explode", {})]), windgate.InvalidParameterError, "unknown operator"),
    ],
)
def test_bad_pipelines_name_the_parameter(make, exc, needle):
    with pytest.raises(exc, match=needle):
        make().run(clicks_table())


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"threads": 0}, "threads"),
        ({"scheduler": "fifo"}, "scheduler"),
        ({"reorder": "maybe"}, "reorder"),
        ({"partitioning": "random"}, "partitioning"),
        ({"chunk_rows": 0}, "chunk_rows"),
        ({"time_slice": -1.0}, "time_slice"),
    ],
)
def test_bad_run_options_name_the_parameter(options, needle):
    with pytest.raises(windgate.InvalidParameterError, match=needle):
        Pipeline().run(clicks_table(), **options)


def test_bad_data_is_a_named_error():
    late = pa.table({"ts": [5, 6, 4], "user": [1, 2, 1]})
    with pytest.raises(windgate.LateRowError, match=r"column 'ts' at row 2"):
        Pipeline().sessionize(key="user", time="ts", gap=10).run(late, threads=2)
    closed = pa.table({"ts": [5, 25, 9], "user": [1, 2, 1]})
    with pytest.raises(windgate.LateRowError, match="already closed"):
        Pipeline().window_count(keys="user", time="ts", size=10).run(closed)
    nan = pa.table({"s": [1.0, float("nan")], "k": [1, 2]})
    with pytest.raises(windgate.InvalidValueError, match="column 's' is NaN"):
        Pipeline().topk(k=1, score="s", keys="k").run(nan)
    with pytest.raises(windgate.NullTimeError, match="column 'ts' is null"):
        Pipeline().sessionize(key="user", time="ts", gap=1).run(pa.table({"ts": [1, None], "user": [1, 1]}))
    with pytest.raises(windgate.ColumnTypeError, match="is a column, not a predicate"):
        Pipeline().filter(col("user"))
    with pytest.raises(TypeError, match="no truth value"):
        bool(col("a") > 1)


# --------------------------------------------------------------------- hypothesis: parallel == sequential


@st.composite
def datasets(draw) -> pa.Table:
    n = draw(st.integers(0, 150))
    steps = draw(st.lists(st.sampled_from([0, 1, 2, 9]), min_size=n, max_size=n))
    ts, t = [], 100
    for s in steps:
        t += s
        ts.append(t)
    keys = draw(st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=n, max_size=n))
    vals = draw(st.lists(st.one_of(st.none(), st.integers(0, 7)), min_size=n, max_size=n))
    ev = draw(st.lists(st.sampled_from(["view", "cart", "buy"]), min_size=n, max_size=n))
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array(keys, pa.int64()),
            "v": pa.array(vals, pa.int64()),
            "e": pa.array(ev, pa.string()),
        }
    )


def chains(gap: int, size: int, p: int) -> list[Pipeline]:
    first = Pipeline().filter((col("v") >= 2) | col("v").is_null())
    return [
        first.sessionize(key="k", time="ts", gap=gap, values="v", partitions=p)
        .pairs("v", names=("a", "b"))
        .window_count(keys=["a", "b"], time="session_end", size=size, partitions=p + 1)
        .topk(k=3, score="count", keys=["a", "b"], window="window_start"),
        Pipeline()
        .last_n_before(
            key="k", time="ts", value="v", trigger=col("e") == "buy", n=3, within=3 * size, partitions=p
        )
        .window_count(keys="v_before", top_k=4, partitions=p),
        first.sessionize(key="k", time="ts", gap=gap, counts={"carts": col("e") == "cart"}, partitions=p)
        .filter(col("carts") > 0)
        .running_mean("rows"),
        Pipeline()
        .project({"k": "k", "ts": "ts", "amount": col("v") * 3})
        .regression(key="k", time="ts", value="amount", bucket=size, max_slope=0.5, partitions=p),
    ]


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=datasets(),
    shape=st.integers(0, 3),
    gap=st.integers(0, 10),
    size=st.integers(1, 30),
    p1=st.integers(1, 8),
    p2=st.integers(1, 8),
    threads=st.sampled_from([1, 2, 3, 4, 8]),
    scheduler=st.sampled_from(["ct", "ct_input", "lp", "qst", "et"]),
    reorder=st.sampled_from(["nonblocking", "locked"]),
    partitioning=st.sampled_from(["hybrid", "partitioned"]),
    chunk=st.integers(1, 64),
    slots=st.sampled_from([1, 2, 1024]),
)
def test_parallel_equals_sequential(
    data, shape, gap, size, p1, p2, threads, scheduler, reorder, partitioning, chunk, slots
):
    want = chains(gap, size, p1)[shape].run(data, sequential=True)
    got = chains(gap, size, p2)[shape].run(
        data,
        threads=threads,
        scheduler=scheduler,
        reorder=reorder,
        partitioning=partitioning,
        chunk_rows=chunk,
        reorder_slots=slots,
    )
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()


# ---------------------------------------------------------------------- TPCx-BB against DuckDB (the doc)

SESSIONS = """
g AS (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY user_id ORDER BY click_id) <= 3600 THEN 0 ELSE 1 END
      AS new FROM k),
s AS (SELECT *, sum(new) OVER (PARTITION BY user_id ORDER BY click_id) AS sid FROM g)"""

SQL = {
    "q1": """
WITH kept AS (SELECT * FROM store_sales WHERE store <= 10 AND category IN (1, 2, 3, 4, 5)),
pairs AS (SELECT DISTINCT a.ticket, a.ts, a.item_id AS item_a, b.item_id AS item_b
          FROM kept a JOIN kept b ON a.ticket = b.ticket AND a.item_id < b.item_id),
counts AS (SELECT item_a, item_b, ts // 3600 * 3600 AS window_start, count(*) AS count
           FROM pairs GROUP BY ALL HAVING count(*) >= 2)
SELECT item_a, item_b, window_start, window_start + 3600 AS window_end, count FROM counts
QUALIFY row_number() OVER (PARTITION BY window_start ORDER BY count DESC, item_a, item_b) <= 100
ORDER BY window_start, count DESC, item_a, item_b""",
    "q2": f"""
WITH k AS (SELECT * FROM clickstream WHERE user_id IS NOT NULL AND item_id IS NOT NULL), {SESSIONS},
items AS (SELECT DISTINCT user_id, sid, item_id FROM s)
SELECT a.item_id AS item_a, b.item_id AS item_b, count(*) AS count
FROM items a JOIN items b ON a.user_id = b.user_id AND a.sid = b.sid AND a.item_id < b.item_id
GROUP BY ALL ORDER BY count DESC, item_a, item_b LIMIT 30""",
    "q3": """
WITH k AS (SELECT * FROM clickstream
           WHERE user_id IS NOT NULL AND item_id IS NOT NULL AND event IN ('view', 'purchase')),
j AS (SELECT v.item_id AS viewed_item_id,
             row_number() OVER (PARTITION BY p.click_id ORDER BY v.click_id DESC) AS rn
      FROM k p JOIN k v ON p.event = 'purchase' AND v.event = 'view' AND p.user_id = v.user_id
                       AND v.click_id < p.click_id AND v.ts >= p.ts - 864000)
SELECT viewed_item_id, count(*) AS count FROM j WHERE rn <= 5
GROUP BY 1 ORDER BY count DESC, viewed_item_id LIMIT 30""",
    "q4": f"""
WITH k AS (SELECT * FROM clickstream WHERE user_id IS NOT NULL), {SESSIONS},
sess AS (SELECT user_id, min(ts) AS session_start, max(ts) AS session_end, count(*) AS "rows",
                sum((event = 'cart')::BIGINT) AS carts, sum((event = 'purchase')::BIGINT) AS purchases
         FROM s GROUP BY user_id, sid)
SELECT *, sum("rows") OVER w / count(*) OVER w AS mean_rows FROM sess WHERE carts > 0 AND purchases = 0
WINDOW w AS (ORDER BY session_end, user_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
ORDER BY session_end, user_id""",
    "q15": """
WITH d AS (SELECT category, ts // 86400 AS day, sum(quantity::HUGEINT * price) AS y
           FROM store_sales WHERE store = 1 GROUP BY 1, 2),
x AS (SELECT *, (day - min(day) OVER (PARTITION BY category))::HUGEINT AS x FROM d),
c AS (SELECT category, day, count(*) OVER w AS n, sum(x) OVER w AS sx, sum(y) OVER w AS sy,
             sum(x * x) OVER w AS sxx, sum(x * y) OVER w AS sxy
      FROM x WINDOW w AS (PARTITION BY category ORDER BY day ROWS UNBOUNDED PRECEDING))
SELECT category, day * 86400 AS window_start, n AS points,
       (n * sxy - sx * sy)::DOUBLE / (n * sxx - sx * sx)::DOUBLE AS slope,
       (sy * sxx - sx * sxy)::DOUBLE / (n * sxx - sx * sx)::DOUBLE AS intercept
FROM c WHERE n >= 2 AND n * sxy - sx * sy <= 0 ORDER BY window_start, category""",
}


@pytest.fixture(scope="module")
def tpcxbb_data():
    return tpcxbb.generate(15_000, seed=11)


@pytest.mark.parametrize("query", tpcxbb.QUERIES)
def test_tpcxbb_query_equals_duckdb_brute_force(tpcxbb_data, query):
    duckdb = pytest.importorskip("duckdb")
    clickstream, store_sales = tpcxbb_data  # noqa: F841 (DuckDB reads the local variables)
    con = duckdb.connect()
    con.register("clickstream", clickstream)
    con.register("store_sales", store_sales)
    want = con.sql(SQL[query]).to_arrow_table().to_pylist()
    con.close()
    got = tpcxbb.run(query, clicks=clickstream, sales=store_sales, threads=2, chunk_rows=1000)
    assert got.num_rows == len(want) > 0
    assert got.to_pylist() == want


# ------------------------------------------------------------------------------------- deep expressions

DEEP_SCRIPT = """
import sys
from functools import reduce
from operator import and_, or_
import pyarrow as pa
from windgate import Pipeline, col
from windgate.errors import InvalidParameterError

shape, depth = sys.argv[1], int(sys.argv[2])
t = pa.table({"a": list(range(10))})
if shape == "and":
    p = Pipeline().filter(reduce(and_, [col("a") != i for i in range(depth)]))
elif shape == "or":
    p = Pipeline().filter(reduce(or_, [col("a") == i % 10 for i in range(depth)]))
elif shape == "not":
    e = col("a") < 3
    for _ in range(depth):
        e = ~e
    p = Pipeline().filter(e)
elif shape == "alternating":
    e = col("a") != 0
    for d in range(1, depth):
        e = ~e if d % 2 else (col("a") != d % 10) & e
    p = Pipeline().filter(e)
else:
    e = col("a")
    for d in range(1, depth):
        e = e + 1 if d % 2 else e * 1
    p = Pipeline().project({"x": e})
for mode in ({"threads": 1}, {"threads": 2}, {"sequential": True}):
    try:
        out = p.run(t, **mode)
        print(out.column(0).to_pylist())
    except InvalidParameterError as err:
        print("error:", err)
"""


def run_deep(shape: str, depth: int) -> list[str]:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", DEEP_SCRIPT, shape, str(depth)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and len(set(lines)) == 1, lines  # threads=1, threads=2 and sequential agree
    return lines


@pytest.mark.parametrize("depth", [1000, 2000, 100_000])
def test_long_and_or_chains_run_on_workers(depth):
    assert run_deep("and", depth) == ["[]"] * 3
    assert run_deep("or", depth) == [str(list(range(10)))] * 3


def test_deep_double_negation_runs():
    assert run_deep("not", 2001) == [str(list(range(3, 10)))] * 3
    assert run_deep("not", 100_000) == [str(list(range(3)))] * 3


@pytest.mark.parametrize("shape", ["alternating", "arith"])
def test_deep_nesting_runs_up_to_the_bound_then_is_a_named_error(shape):
    assert not run_deep(shape, 999)[0].startswith("error")
    if shape == "arith":
        assert run_deep(shape, 999)[0] == str([a + 499 for a in range(10)])
    for depth in (2000, 100_000):
        line = run_deep(shape, depth)[0]
        param = "filter: predicate" if shape == "alternating" else 'project: columns["x"]'
        assert line.startswith(f"error: {param}: ") and "at most 1000" in line, line


# ------------------------------------------------------------------------------------------------- CLI


def test_cli_generate_and_run_round_trip(tmp_path, capsys):
    from windgate.cli import main

    assert main(["tpcxbb", "generate", "--rows", "8000", "--seed", "2", "--out", str(tmp_path / "d")]) == 0
    clicks, sales = tpcxbb.generate(8000, seed=2)
    assert pq.read_table(tmp_path / "d" / "clickstream.parquet").equals(clicks)
    for q in ("q2", "q15"):
        out = tmp_path / f"{q}.parquet"
        args = ["tpcxbb", "run", "--query", q, "--data", str(tmp_path / "d"), "--out", str(out)]
        assert main([*args, "--threads", "2", "--scheduler", "lp"]) == 0
        assert main([*args[:-1], str(tmp_path / "seq.parquet"), "--sequential"]) == 0
        got, seq = pq.read_table(out), pq.read_table(tmp_path / "seq.parquet")
        assert got.equals(seq)
        assert got.equals(tpcxbb.run(q, clicks=clicks, sales=sales, sequential=True))
    assert main(["tpcxbb", "run", "--query", "q1", "--data", str(tmp_path / "none"), "--out", "x"]) == 2
    assert "no store_sales.parquet" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- Spark


def test_spark_run_pipeline_per_user_partition(spark):
    from windgate.spark import run_pipeline

    clicks, _ = tpcxbb.generate(3000, seed=5)
    sessions = (
        Pipeline()
        .filter(col("user_id").is_not_null())
        .sessionize(key="user_id", time="ts", gap=3600, counts={"carts": col("event") == "cart"})
    )
    df = spark.createDataFrame(clicks.to_pandas()).repartition(3)
    out = run_pipeline(df, sessions, partition_by="user_id", order_by="click_id", threads=2)
    assert out.columns == ["user_id", "session_start", "session_end", "rows", "carts"]
    key = ("session_end", "user_id")
    got = sorted((r.asDict() for r in out.collect()), key=lambda r: tuple(r[k] for k in key))
    assert got == sessions.run(clicks, sequential=True).to_pylist()
    with pytest.raises(windgate.ColumnNotFoundError, match="partition_by: column 'nope'"):
        run_pipeline(df, sessions, partition_by="nope")
