"""Two-phase window aggregation on Spark: pre-aggregate where the rows are, shuffle only partial states.

Phase 1 runs windgate on the input as it is partitioned, with no shuffle and no sort of raw rows: each task
reduces its rows to one partial-state row per (key, pane) (``output="partials"``: exact sums, moments,
extremes, first/last with their order key). Where the input is Parquet files, the tasks read the files
themselves with pyarrow (row groups as tasks, only the columns the query reads, any filesystem pyarrow
reaches), so raw rows never pass through the JVM; any other DataFrame goes through ``mapInArrow`` with only
those columns. Phase 2 shuffles the partial states by key (unkeyed: all into one task, since they are few)
and merges them into windows (``input="partials"``) streaming, sorted by pane, so memory is bounded by the
open panes. Every combine is exact, so the windows have the bits of the local call on the same rows.

The plan a call chose is on the returned DataFrame as ``windgate_plan`` (a one-line description).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _native, _specs
from .errors import ColumnNotFoundError, InvalidParameterError
from .spark_session import default_parallelism

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ParquetInput", "parquet_input", "plain_parquet_scan", "prefilter", "two_phase"]

#: Most rows per phase-1 task when reading files (whole row groups are kept together): bounds a task's
#: partial states, which are at most its rows.
SPLIT_ROWS = 1 << 23
#: Most input rows per phase-2 task for which the partial states are merged in memory without a sort.
MERGE_IN_MEMORY_ROWS = 1 << 22
#: Phase-1 tasks of a DataFrame number rows from ``partition << ROW_BITS``: arrival order across partitions
#: is partition order, which is the DataFrame's order for data read in order.
ROW_BITS = 40


@dataclass(frozen=True)
class ParquetInput:
    """Parquet files read by the tasks themselves: ``files`` in order, the pyarrow ``schema``, every row
    group in the whole input's order as ``(file index, row group, rows)``, and the total ``rows``."""

    files: tuple[str, ...]
    schema: pa.Schema
    groups: tuple[tuple[int, int, int], ...]
    rows: int
    filesystem: Any = None

    def splits(self, tasks: int) -> list[tuple[int, int, int]]:
        """Runs of consecutive row groups, one per phase-1 task: ``(first group, end group, rows before)``.

        About ``rows / tasks`` rows each (at most :data:`SPLIT_ROWS`): the more rows a task reduces, the
        fewer partial states it emits when the files are not ordered by time (a task's states are at most
        its (key, pane) pairs), and a run's rows are contiguous in the whole input, so one operator numbers
        them from the rows before it and ties break as in the local call.
        """
        target = max(1, min(SPLIT_ROWS, -(-self.rows // max(1, tasks))))
        out, start, rows, before = [], 0, 0, 0
        for g, (_, _, n) in enumerate(self.groups):
            if g > start and rows + n > target:
                out.append((start, g, before))
                start, before, rows = g, before + rows, 0
            rows += n
        if start < len(self.groups):
            out.append((start, len(self.groups), before))
        return out


def parquet_input(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> ParquetInput:
    """Lists the Parquet files under ``paths`` (files or directories, local or any URI pyarrow reaches)
    and their row groups, reading only the footers."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise InvalidParameterError("df: expected a DataFrame or at least one Parquet path, got []")
    try:
        fs, paths = _filesystem(paths)
        dataset = ds.dataset(paths if len(paths) > 1 else paths[0], format="parquet", filesystem=fs)
    except (OSError, ValueError, pa.ArrowInvalid) as e:
        raise InvalidParameterError(f"df: cannot read Parquet at {paths!r}: {e}") from None
    files = tuple(dataset.files)
    fs = dataset.filesystem
    groups = []
    for i, f in enumerate(files):
        meta = pq.ParquetFile(f, filesystem=fs).metadata
        groups.extend((i, rg, meta.row_group(rg).num_rows) for rg in range(meta.num_row_groups))
    return ParquetInput(files, dataset.schema, tuple(groups), sum(g[2] for g in groups), fs)


def _filesystem(paths: list[str]) -> tuple[Any, list[str]]:
    """One pyarrow filesystem for ``paths`` (URIs such as Spark's ``file:/...`` and ``s3a://...`` too) and
    the paths within it; ``None`` and the paths as given when they are plain local paths."""
    from pyarrow import fs as pafs

    if not any(":" in p.split("/")[0] for p in paths):
        return None, paths
    filesystem, out = None, []
    for p in paths:
        uri = "s3://" + p[len("s3a://") :] if p.startswith("s3a://") else p
        if uri.startswith("file:") and not uri.startswith("file://"):
            uri = "file://" + uri[len("file:") :]  # Hadoop's file:/path
        fs_i, path = pafs.FileSystem.from_uri(uri)
        filesystem = filesystem or fs_i
        out.append(path)
    return filesystem, out


def plain_parquet_scan(df: DataFrame, columns: Sequence[str] = ()) -> ParquetInput | None:
    """The files of ``df`` when it is a plain Parquet scan (``spark.read.parquet(...)``, optionally with
    columns selected) whose files hold ``columns``, else ``None``. Only a classic session exposes the plan;
    Spark Connect falls back. Partition columns of a Hive-style layout live in directory names, not in the
    files: a query that reads one takes the ``mapInArrow`` route."""
    try:
        jdf = df._jdf  # classic PySpark only
        plan = jdf.queryExecution().optimizedPlan().toString()
    except Exception:  # noqa: BLE001 - a Connect DataFrame has no _jdf: no fast path
        return None
    lines = [ln.strip().lstrip(":-+ ") for ln in plan.strip().splitlines()]
    relation = lines[-1] if lines else ""
    if not relation.startswith("Relation ") or not relation.endswith(" parquet"):
        return None
    for node in lines[:-1]:
        # A pure column selection is fine; anything else (filters, renames, joins) is not a plain scan.
        if not node.startswith("Project [") or " AS " in node or "(" in node.split("]")[0]:
            return None
    try:
        files = df.inputFiles()
    except Exception:  # noqa: BLE001
        return None
    if not files:
        return None
    source = parquet_input(sorted(files))
    return source if all(c in source.schema.names for c in columns) else None


def two_phase(
    spark: SparkSession,
    source: DataFrame | ParquetInput,
    spec: dict[str, Any],
    *,
    columns: Sequence[str],
    sorted_merge: bool | None = None,
) -> DataFrame:
    """The two-phase plan for ``_native.window_aggregate(**spec)``; ``columns`` are the input columns the
    query reads. Returns the windows as a Spark DataFrame with ``windgate_plan`` set.

    ``sorted_merge``: phase 2 sorts each task's partial states by pane and merges them streaming (memory
    bounded by the open panes; Spark's sort spills) instead of merging them in memory, which skips the sort
    (about half of phase 2's time) but holds the task's share of the states. ``None`` sorts only when the
    input is files with more than :data:`MERGE_IN_MEMORY_ROWS` rows per shuffle partition (states never
    outnumber rows); a DataFrame's row count is unknown up front, so it merges in memory.
    """
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    # Phase 1 emits partials, which only the pane engine does; phase 2 streams small pushes, where "auto"
    # picks it too. The strategy changes no row, so it is not passed on.
    spec = {k: v for k, v in spec.items() if k != "strategy"}
    tz = spark.conf.get("spark.sql.session.timeZone", "UTC")
    if isinstance(source, ParquetInput):
        file_schema = source.schema
        arrow_in = _spark_compatible(file_schema)
        missing = [c for c in columns if c not in file_schema.names]
        where = f"the Parquet files (columns: {', '.join(file_schema.names)})"
    else:
        # dict.fromkeys: the time column can be an aggregated column too (aggs={"ts": "max"}).
        present = [f"`{c}`" for c in dict.fromkeys(columns) if c in source.columns]
        arrow_in = to_arrow_schema(source.select(*present).schema, timezone=tz)
        missing = [c for c in columns if c not in source.columns]
        where = f"the DataFrame (columns: {', '.join(source.columns)})"
    if missing:
        raise ColumnNotFoundError(f"column '{missing[0]}' is not in {where}")
    arrow_in = pa.schema([arrow_in.field(c) for c in dict.fromkeys(columns)])
    empty = arrow_in.empty_table()
    # Parameters and types checked, and both phases' schemas, before Spark runs anything.
    partial_schema = _native.window_aggregate([empty], **spec, output="partials").schema
    out_schema = _native.window_aggregate([partial_schema.empty_table()], **spec, input="partials").schema
    partial_spark = from_arrow_schema(partial_schema, prefer_timestamp_ntz=True)
    out_spark = from_arrow_schema(out_schema, prefer_timestamp_ntz=True)

    if isinstance(source, ParquetInput):
        splits = source.splits(default_parallelism(spark))
        n = len(splits)
        ids = spark.range(0, max(n, 1), 1, max(n, 1))
        task = _file_task(source, splits, list(arrow_in.names), spec, partial_schema)
        partials = ids.mapInArrow(task, partial_spark)
        first = f"phase 1: {n} Parquet split(s) read by pyarrow, one task each"
    else:
        cols = source.select(*[f"`{c}`" for c in arrow_in.names])
        partials = cols.mapInArrow(_frame_task(spec, partial_schema), partial_spark)
        first = f"phase 1: mapInArrow over the DataFrame's partitions ({len(arrow_in.names)} column(s))"
    time, by = spec["time"], spec["by"]
    merge_spec = {**spec, "input": "partials"}
    if by:
        parts = partials.repartition(*[f"`{b}`" for b in by])
        tasks = int(spark.conf.get("spark.sql.shuffle.partitions", "200") or 200)
        rows = source.rows if isinstance(source, ParquetInput) else None
        if sorted_merge is None:
            sorted_merge = rows is not None and rows > MERGE_IN_MEMORY_ROWS * tasks
        if sorted_merge:
            parts = parts.sortWithinPartitions(f"`{time}`")
            merge_spec["lateness"] = 0
            how = "sorted by pane, merged streaming (memory: the open panes)"
        else:
            merge_spec["lateness"] = None
            how = "merged in memory (memory: the task's partial states)"
        second = f"phase 2: partial states shuffled by {', '.join(by)}, {how}"
    else:
        parts = partials.repartition(1)
        merge_spec["lateness"] = None
        second = "phase 2: the partial states (one per pane and task) merged in one task"
    out = parts.mapInArrow(_merge_task(merge_spec, out_schema), out_spark)
    out.windgate_plan = f"two-phase: {first}; {second}"
    return out


def _spark_compatible(schema: pa.Schema) -> pa.Schema:
    """The schema Spark gives these columns: timestamps in microseconds, strings and binaries not large,
    dictionaries decoded."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_timestamp(t) and t.unit != "us":
            t = pa.timestamp("us", tz=t.tz)
        elif pa.types.is_large_string(t):
            t = pa.string()
        elif pa.types.is_large_binary(t):
            t = pa.binary()
        fields.append(f.with_type(t))
    return pa.schema(fields)


def _emit(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """``batch`` cast to the schema Spark was promised, as record batches (none when empty)."""
    if not batch.num_rows:
        return
    if batch.schema != schema:
        batch = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        batch = batch.cast(schema)
    yield from (batch.to_batches() if isinstance(batch, pa.Table) else [batch])


def _partial_operator(spec: dict[str, Any], row_offset: int):
    # Phase 1 sees its rows in any order: exact (no lateness), one operator per split or partition.
    kwargs = {**spec, "lateness": None, "output": "partials", "row_offset": row_offset}
    kwargs.pop("strategy", None)
    return _native.WindowAggregator(**kwargs)


def _file_task(source: ParquetInput, splits, columns: list[str], spec: dict[str, Any], schema: pa.Schema):
    """Phase 1 over files: each split (a run of row groups) of the task read with pyarrow, pre-aggregated."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        for ids in batches:
            for split in ids.column(0).to_pylist():
                if split >= len(splits):
                    continue
                first, end, before = splits[split]
                op = _partial_operator(spec, before)
                files: dict[int, Any] = {}
                for f, rg, _ in source.groups[first:end]:
                    if f not in files:
                        files[f] = pq.ParquetFile(source.files[f], filesystem=source.filesystem)
                    for batch in files[f].iter_batches(row_groups=[rg], columns=columns, batch_size=1 << 16):
                        yield from _emit(op.push(batch), schema)
                yield from _emit(op.flush(), schema)

    return run


def _frame_task(spec: dict[str, Any], schema: pa.Schema):
    """Phase 1 over a DataFrame partition, streamed through ``mapInArrow``."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        op = _partial_operator(spec, partition << ROW_BITS)
        for batch in batches:
            yield from _emit(op.push(batch), schema)
        yield from _emit(op.flush(), schema)

    return run


def _merge_task(spec: dict[str, Any], schema: pa.Schema):
    """Phase 2: a task's partial states into windows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        kwargs = dict(spec)
        kwargs.pop("strategy", None)
        op = _native.WindowAggregator(**kwargs)
        for batch in batches:
            yield from _emit(op.push(batch), schema)
        yield from _emit(op.flush(), schema)

    return run


def prefilter(
    df: DataFrame, spec: dict[str, Any], *, size: int, slide: int, offset: int, unit: str = "plain"
) -> DataFrame:
    """Phase 1 of the preference queries: each partition keeps only the rows that can be in some window's
    answer, judged within its own panes (``size``, ``slide``, ``offset`` in the time column's ``unit``, see
    :func:`windgate._specs.time_unit`).

    A row dominated by another row of the same key and pane is dominated in every window holding that pane,
    and whatever it would add to another row's ``kappa`` the dominating row adds too: so the pane skylines
    are enough for the skyline and the top-delta dominant queries. A row outside its pane's top k (ties by
    time and arrival, the partition's order) is outside the top k of every window holding the pane. The
    rows kept keep their partition and order, so later tie-breaking sees the same order.
    """
    import math

    from pyspark.sql.pandas.types import to_arrow_schema

    pane = math.gcd(size, slide)
    pane_spec = {
        **spec,
        "size": _specs.units_span(pane, unit),
        "slide": _specs.units_span(pane, unit),
        "offset": _specs.units_span(offset % pane, unit),
        "lateness": None,
    }
    if spec["query"] == "top_dominant":
        pane_spec["query"] = "skyline"
        pane_spec.pop("delta", None)
    tz = df.sparkSession.conf.get("spark.sql.session.timeZone", "UTC")
    schema = to_arrow_schema(df.schema, timezone=tz)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches), schema=schema)
        if not table.num_rows:
            return
        kept = _native.preference(table, **pane_spec).select(schema.names)
        yield from kept.cast(schema).to_batches()

    return df.mapInArrow(run, df.schema)
