"""Row-for-row equality of two engines' answers, for ``windgate demo`` and ``benches/peers/spark.py``: both
sorted, the exact columns (keys, window starts, counts, chosen rows) equal, the float columns within a
relative tolerance (Spark's float sums depend on its summation order; windgate's are exact, rounded once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

REL_TOL = 1e-9


def collect(df: DataFrame) -> pa.Table:
    """A Spark DataFrame's rows as a pyarrow Table (``toArrow`` where Spark has it)."""
    import pyarrow as pa

    if hasattr(df, "toArrow"):
        return df.toArrow()
    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)  # pragma: no cover - Spark < 4


def _normalised(t: pa.Table, exact: Sequence[str], floats: Sequence[str]) -> pa.Table:
    """The columns ``exact + floats`` with timestamps as int64 microseconds, sorted by ``exact``."""
    import pyarrow as pa

    cols = []
    for name in (*exact, *floats):
        c = t.column(name)
        if pa.types.is_timestamp(c.type):
            c = c.cast(pa.timestamp("us", tz=c.type.tz)).cast(pa.int64())
        elif pa.types.is_integer(c.type):
            c = c.cast(pa.int64())
        cols.append(c)
    out = pa.table(cols, names=[*exact, *floats])
    return out.sort_by([(name, "ascending") for name in exact]) if exact else out


def compare(
    got: pa.Table,
    ref: pa.Table,
    *,
    exact: Sequence[str],
    floats: Sequence[str] = (),
    names: tuple[str, str] = ("got", "reference"),
    rel_tol: float = REL_TOL,
) -> tuple[bool, str]:
    """Whether ``got`` has the rows of ``ref``: the same number of rows; sorted by the ``exact`` columns,
    those columns equal and the ``floats`` within ``rel_tol`` relative (nulls and NaNs in the same places).
    Returns (equal, a one-line description naming the first difference)."""
    import numpy as np

    a_name, b_name = names
    if got.num_rows != ref.num_rows:
        return False, f"{got.num_rows:,} rows ({a_name}) != {ref.num_rows:,} rows ({b_name})"
    for t, who in ((got, a_name), (ref, b_name)):
        missing = [c for c in (*exact, *floats) if c not in t.column_names]
        if missing:
            return False, f"{who} lacks the column(s) {', '.join(missing)}"
    a, b = _normalised(got, exact, floats), _normalised(ref, exact, floats)
    for name in exact:
        if not a.column(name).equals(b.column(name)):
            x, y = a.column(name).to_pylist(), b.column(name).to_pylist()
            i = next(i for i, (p, q) in enumerate(zip(x, y, strict=True)) if p != q)
            return (
                False,
                f"column {name} differs at sorted row {i:,}: {x[i]!r} ({a_name}) vs {y[i]!r} ({b_name})",
            )
    worst = 0.0
    for name in floats:
        x = a.column(name).to_numpy(zero_copy_only=False).astype(float)  # nulls -> NaN
        y = b.column(name).to_numpy(zero_copy_only=False).astype(float)
        nx, ny = np.isnan(x), np.isnan(y)
        if not np.array_equal(nx, ny):
            i = int(np.flatnonzero(nx != ny)[0])
            return False, f"column {name}: null/NaN at sorted row {i:,} in one answer only ({x[i]} vs {y[i]})"
        x, y = x[~nx], y[~ny]
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), np.finfo(float).tiny)
        rel = np.where(x == y, 0.0, rel)  # equal infinities
        here = float(rel.max(initial=0.0))
        if here > rel_tol:
            i = int(np.argmax(rel))
            return False, f"column {name} differs by {here:.1e} (relative): {x[i]!r} vs {y[i]!r}"
        worst = max(worst, here)
    detail = f"equal: {got.num_rows:,} rows"
    if floats:
        detail += f", floats within {worst:.0e}" if worst else ", floats identical"
    return True, detail
