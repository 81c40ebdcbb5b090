"""Type stubs of the compiled extension ``windgate._native``. Use the wrappers in ``windgate`` instead."""

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

__version__: str

def window_aggregate(
    sources: Sequence[Any],
    *,
    time: str,
    size: int | str | None = None,
    slide: int | str | None = None,
    offset: int | str | None = None,
    gap: int | str | None = None,
    rows: int | None = None,
    rows_slide: int | None = None,
    tz: str | None = None,
    by: Sequence[str] = (),
    aggs: Sequence[tuple[str, Sequence[str]]],
    lateness: int | str | None = None,
    on_late: str = "drop",
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: dict[str, Any] | None = None,
    order_by: str | None = None,
    in_memory: bool = False,
    input: str = "rows",
    output: str = "windows",
    row_offset: int = 0,
    allowed_lateness: int | str | None = None,
    emit: str = "final",
    interval: int | str | None = None,
) -> pa.Table | tuple[pa.Table, pa.Table]: ...

class WindowAggregator:
    def __init__(
        self,
        *,
        time: str,
        size: int | str | None = None,
        slide: int | str | None = None,
        offset: int | str | None = None,
        gap: int | str | None = None,
        rows: int | None = None,
        rows_slide: int | None = None,
        tz: str | None = None,
        by: Sequence[str] = (),
        aggs: Sequence[tuple[str, Sequence[str]]],
        lateness: int | str | None = None,
        on_late: str = "drop",
        null_time: str = "error",
        threads: int | None = None,
        strategy: str = "auto",
        farm: dict[str, Any] | None = None,
        sources: int = 1,
        credits: int | None = 1048576,
        order_by: str | None = None,
        input: str = "rows",
        output: str = "windows",
        row_offset: int = 0,
        allowed_lateness: int | str | None = None,
        emit: str = "final",
        interval: int | str | None = None,
    ) -> None: ...
    def push(self, batch: Any, source: int = 0) -> pa.RecordBatch: ...
    def close_source(self, source: int) -> pa.RecordBatch: ...
    def flush(self) -> pa.RecordBatch: ...
    def late_rows(self) -> pa.RecordBatch | None: ...
    def snapshot(self, note: str | None = None) -> bytes: ...
    @staticmethod
    def restore(data: bytes, overrides: dict[str, Any] | None = None) -> WindowAggregator: ...
    @property
    def stats(self) -> dict[str, Any]: ...
    @property
    def schema(self) -> pa.Schema | None: ...

def band_join(
    left: Any,
    right: Any,
    *,
    time: tuple[str, str],
    window: int | str | None = None,
    on: Sequence[tuple[str, str, str, float | None]] = (),
    threads: int | None = None,
    lateness: int | str | None = None,
    on_late: str = "drop",
    semantics: str = "interval",
    index: bool = True,
    strategy: str = "auto",
    lower: int | str | None = None,
    upper: int | str | None = None,
    how: str = "inner",
) -> pa.Table: ...

class BandJoiner:
    def __init__(
        self,
        *,
        time: tuple[str, str],
        window: int | str | None = None,
        on: Sequence[tuple[str, str, str, float | None]] = (),
        threads: int | None = None,
        lateness: int | str | None = None,
        on_late: str = "drop",
        semantics: str = "interval",
        index: bool = True,
        strategy: str = "auto",
        credits: int | None = 1048576,
        lower: int | str | None = None,
        upper: int | str | None = None,
        how: str = "inner",
    ) -> None: ...
    def push(self, batch: Any, side: str = "left") -> pa.RecordBatch: ...
    def flush(self) -> pa.RecordBatch: ...
    def snapshot(self, note: str | None = None) -> bytes: ...
    @staticmethod
    def restore(data: bytes, overrides: dict[str, Any] | None = None) -> BandJoiner: ...
    @property
    def stats(self) -> dict[str, Any]: ...
    @property
    def schema(self) -> pa.Schema | None: ...

def preference(
    data: Any,
    *,
    query: str,
    time: str,
    size: int | str,
    slide: int | str | None = None,
    offset: int | str | None = None,
    by: Sequence[str] = (),
    dims: Sequence[str] = (),
    prefer: Sequence[str] = ("min",),
    delta: int | None = None,
    score: str | None = None,
    k: int | None = None,
    descending: bool = True,
    lateness: int | str | None = None,
    on_late: str = "drop",
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: dict[str, Any] | None = None,
) -> pa.Table: ...

class PreferenceQuery:
    def __init__(
        self,
        *,
        query: str,
        time: str,
        size: int | str,
        slide: int | str | None = None,
        offset: int | str | None = None,
        by: Sequence[str] = (),
        dims: Sequence[str] = (),
        prefer: Sequence[str] = ("min",),
        delta: int | None = None,
        score: str | None = None,
        k: int | None = None,
        descending: bool = True,
        lateness: int | str | None = None,
        on_late: str = "drop",
        null_time: str = "error",
        threads: int | None = None,
        strategy: str = "auto",
        farm: dict[str, Any] | None = None,
    ) -> None: ...
    def push(self, batch: Any) -> pa.RecordBatch: ...
    def flush(self) -> pa.RecordBatch: ...
    @property
    def stats(self) -> dict[str, Any]: ...
    @property
    def schema(self) -> pa.Schema | None: ...
    def snapshot(self, note: str | None = None) -> bytes: ...
    @staticmethod
    def restore(data: bytes, overrides: dict[str, Any] | None = None) -> PreferenceQuery: ...

def duration_units(value: int | str, unit: str, param: str = "size", column: str = "time") -> int: ...
def pipeline_schema(ops: Sequence[tuple[str, dict[str, Any]]], schema: pa.Schema) -> pa.Schema: ...
def run_pipeline(
    data: Any,
    ops: Sequence[tuple[str, dict[str, Any]]],
    *,
    threads: int | None = None,
    scheduler: str = "ct",
    reorder: str = "nonblocking",
    partitioning: str = "hybrid",
    sequential: bool = False,
    reorder_slots: int | None = None,
    time_slice: float | None = None,
    ct_window: float | None = None,
    qst_capacity: int | None = None,
    marker_every: int | None = None,
    max_pending: int | None = None,
    chunk_rows: int | None = None,
) -> tuple[pa.Table, dict[str, Any]]: ...
def tpcxbb_generate(
    rows: int,
    seed: int = 0,
    *,
    days: int = 28,
    users: int | None = None,
    items: int = 5000,
    stores: int = 20,
) -> tuple[pa.Table, pa.Table]: ...
def tpcxbb_query(name: str) -> tuple[list[tuple[str, dict[str, Any]]], str]: ...
def strategies(operator: str) -> list[dict[str, Any]]: ...
def snapshot_info(data: bytes) -> dict[str, Any]: ...
