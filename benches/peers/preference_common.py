"""What the ``preference`` suite's modules share: the query constants, timing within a budget, the
(window, id) pairs every check compares, and the windgate preference API as the installed build offers it.
"""

from __future__ import annotations

import time

import pyarrow as pa

from .report import log

TIME = "ts"
TOPK_K, TOPK_SCORE = 10, "d0"
STREAM_BATCH = 10_000

# --------------------------------------------------------------------------------------------- helpers


def ms_int(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A timestamp column (any unit) as int64 epoch milliseconds; an integer column as int64."""
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz=col.type.tz))
    return col.cast(pa.int64())


def pairs_of(table: pa.Table) -> pa.Table:
    """The sorted (window_start in epoch ms, id) pairs of an engine's output."""
    t = pa.table(
        {"window_start": ms_int(table.column("window_start")), "id": table.column("id").cast(pa.int64())}
    )
    return t.sort_by([("window_start", "ascending"), ("id", "ascending")])


def compare_pairs(pairs: pa.Table, ref: pa.Table, ref_name: str) -> str | None:
    """None when equal, else what differs (counts of pairs only on one side, and one example)."""
    if pairs.equals(ref):
        return None
    a = {(w, i) for w, i in zip(*(pairs.column(c).to_pylist() for c in ("window_start", "id")), strict=True)}
    b = {(w, i) for w, i in zip(*(ref.column(c).to_pylist() for c in ("window_start", "id")), strict=True)}
    extra, missing = sorted(a - b), sorted(b - a)
    msg = f"{pairs.num_rows:,} (window, id) pairs vs {ref.num_rows:,} ({ref_name}): "
    msg += f"{len(extra):,} not in {ref_name}'s, {len(missing):,} missing"
    if extra:
        msg += f"; e.g. extra (window_start={extra[0][0]}, id={extra[0][1]})"
    if missing:
        msg += f"; e.g. missing (window_start={missing[0][0]}, id={missing[0][1]})"
    if not extra and not missing:
        msg += " (duplicate pairs)"
    return msg


def dims_of(d: int) -> list[str]:
    return [f"d{k}" for k in range(d)]


def skipped(engine: str, why: str, **extra) -> dict:
    log(f"{engine}: skipped: {why}")
    return {"engine": engine, "threads": None, "seconds": None, "check": "skipped", "notes": why, **extra}


def unbalance(busy) -> float | None:
    """(1 - min/max) * 100 over per-worker busy seconds (None without them)."""
    busy = [b for b in (busy or []) if b is not None]
    if len(busy) < 1 or max(busy) <= 0:
        return None
    return (1 - min(busy) / max(busy)) * 100


# --------------------------------------------------------------------------------------------- windgate


class Windgate:
    """The windgate preference API: ``windgate.skyline`` / ``topk`` / ``SkylineQuery`` when the Python
    wrappers exist, else the extension's ``_native.preference`` (batch only) with the same keywords."""

    def __init__(self) -> None:
        import windgate

        self.wg = windgate
        self.native = getattr(windgate, "_native", None)
        self.has_wrappers = hasattr(windgate, "skyline")
        self.has_native = self.native is not None and hasattr(self.native, "preference")
        self.available = self.has_wrappers or self.has_native
        self.why = (
            "" if self.available else "the installed windgate has no skyline() (nor _native.preference)"
        )
        self.via = "windgate.skyline/topk" if self.has_wrappers else "windgate._native.preference"

    def query(self, query: str, data: pa.Table, **kw) -> pa.Table:
        if self.has_wrappers:
            fn = {"skyline": self.wg.skyline, "topk": self.wg.topk, "top_dominant": self.wg.top_dominant}[
                query
            ]
            return fn(data, **kw)
        from windgate import _specs

        kw = dict(kw)
        for key in ("dims", "by"):
            if key in kw and kw[key] is not None and isinstance(kw[key], str):
                kw[key] = [kw[key]]
        if isinstance(kw.get("prefer"), str):
            kw["prefer"] = [kw["prefer"]] * len(kw.get("dims") or [1])
        return self.native.preference(_specs.sources(data), query=query, **kw)

    @property
    def streaming(self) -> bool:
        return hasattr(self.wg, "SkylineQuery")

    def stream(self, batches: list[pa.RecordBatch], **kw) -> tuple[float, pa.Table, dict]:
        """Push every batch into a SkylineQuery and flush; (seconds, output, stats)."""
        t0 = time.perf_counter()
        q = self.wg.SkylineQuery(**kw)
        parts = [o for o in map(q.push, batches) if o.num_rows]
        parts.append(q.flush())
        seconds = time.perf_counter() - t0
        return seconds, pa.Table.from_batches(parts), dict(q.stats)
