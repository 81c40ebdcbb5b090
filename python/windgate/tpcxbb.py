"""TPCx-BB-like streams and queries for ordered pipelines, as in the evaluation of
Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory Multicores* (the contract is
docs/tpcxbb.md).

:func:`generate` makes a web clickstream and store sales (deterministic for a seed, time-ordered, skewed);
:func:`query` returns Q1, Q2, Q3, Q4 or Q15 as a :class:`windgate.Pipeline`; :func:`run` runs one on the
generated tables.

>>> from windgate import tpcxbb
>>> clicks, sales = tpcxbb.generate(20_000, seed=1)
>>> clicks.schema.names
['click_id', 'ts', 'user_id', 'item_id', 'event', 'category']
>>> tpcxbb.query("q4")
Pipeline(filter -> sessionize -> filter -> running_mean)
>>> out = tpcxbb.run("q4", clicks=clicks, threads=2)
>>> out.schema.names[-1], out.num_rows > 0
('mean_rows', True)
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from . import _native
from .errors import InvalidParameterError
from .pipeline import Pipeline

__all__ = ["QUERIES", "TABLES", "generate", "query", "table_of", "run"]

#: The query names.
QUERIES = ("q1", "q2", "q3", "q4", "q15")
#: The tables ``generate`` returns, in order, and their file names in ``windgate tpcxbb generate --out DIR``.
TABLES = ("clickstream", "store_sales")


def generate(
    rows: int,
    seed: int = 0,
    *,
    days: int = 28,
    users: int | None = None,
    items: int = 5000,
    stores: int = 20,
) -> tuple[pa.Table, pa.Table]:
    """``(clickstream, store_sales)``, each ``rows`` rows over ``days`` days from 2024-01-01 (UTC).

    ``users`` defaults to ``max(1000, rows // 20)``. The same arguments give identical tables everywhere.
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise InvalidParameterError(f"rows: expected a non-negative int, got {rows!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise InvalidParameterError(f"seed: expected an int in [0, 2**64), got {seed!r}")
    return _native.tpcxbb_generate(rows, seed, days=days, users=users, items=items, stores=stores)


def query(name: str) -> Pipeline:
    """Query ``name`` (``"q1"``, ``"q2"``, ``"q3"``, ``"q4"``, ``"q15"``) as a pipeline; it reads the table
    :func:`table_of` names."""
    ops, _ = _native.tpcxbb_query(name)
    return Pipeline(ops)


def table_of(name: str) -> str:
    """``"clickstream"`` or ``"store_sales"``: the table query ``name`` reads."""
    return _native.tpcxbb_query(name)[1]


def run(
    name: str,
    *,
    clicks: Any = None,
    sales: Any = None,
    **options: Any,
) -> pa.Table:
    """Runs query ``name`` on ``clicks`` (Q2, Q3, Q4) or ``sales`` (Q1, Q15); ``options`` are
    :meth:`windgate.Pipeline.run`'s (``threads``, ``scheduler``, ``sequential``, ...)."""
    table = table_of(name)
    data = clicks if table == "clickstream" else sales
    if data is None:
        param = "clicks" if table == "clickstream" else "sales"
        raise InvalidParameterError(f"{param}: query {name!r} reads the {table} table; pass it as {param}=")
    return query(name).run(data, **options)
