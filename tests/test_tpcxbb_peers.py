"""The DuckDB versions of docs/tpcxbb.md's five queries (benches.peers.tpcxbb_peers) against windgate's
ordered pipelines on a small generated data set: the same rows in the same order, floats bit for bit, from
the sequential executor and the parallel one on 2 threads."""

from __future__ import annotations

import pytest

pytest.importorskip("duckdb")
try:
    from windgate import tpcxbb
except ImportError as exc:  # the extension predates windgate.tpcxbb
    pytest.skip(f"windgate.tpcxbb is not importable ({exc})", allow_module_level=True)

from benches.peers import tpcxbb_peers as peers  # noqa: E402  (after the skips above)

ROWS, DAYS = 6_000, 3  # 3 days: enough rows an hour for Q1's repeated pairs, days for Q15's lines


@pytest.fixture(scope="module")
def data():
    clickstream, store_sales = tpcxbb.generate(ROWS, seed=3, days=DAYS)
    return {"clickstream": clickstream, "store_sales": store_sales}


@pytest.fixture(scope="module")
def duckdb_results(data):
    con = peers.duckdb_connect(data["clickstream"], data["store_sales"], threads=2)
    try:
        return {q: peers.duckdb_query(con, q) for q in peers.QUERIES}
    finally:
        con.close()


@pytest.mark.parametrize("query", peers.QUERIES)
@pytest.mark.parametrize("mode", [{"sequential": True}, {"threads": 2}], ids=["sequential", "2 threads"])
def test_duckdb_equals_windgate(data, duckdb_results, query, mode):
    assert tpcxbb.table_of(query) == peers.INPUT[query]
    out = tpcxbb.query(query).run(data[peers.INPUT[query]], chunk_rows=500, **mode)
    assert out.num_rows > 0, f"{query} returned nothing on {ROWS} rows"
    diff = peers.compare(duckdb_results[query], out)
    assert diff is None, f"{query}: DuckDB != windgate: {diff}"
