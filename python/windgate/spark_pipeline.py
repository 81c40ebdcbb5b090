"""Ordered pipelines inside PySpark: :func:`run_pipeline` runs a :class:`windgate.Pipeline` in every Spark
task over that task's partition, through ``mapInArrow`` (re-exported as ``windgate.spark.run_pipeline``).

Each task's rows stream through the pipeline in the partition's order, on ``threads`` windgate workers
(default ``spark.task.cpus``), and the task yields the pipeline's output. The result is the concatenation of
the per-partition results, so it equals the local run over the whole DataFrame when the pipeline's answer
splits by partition: pass ``partition_by`` (the key of its partitioned operators, e.g. ``user_id`` for
sessions per user) and ``order_by`` (the arrival order, e.g. a click id or the time) so that every task sees
all of its keys' rows in order. Global operators (``topk`` over all keys, ``running_mean``, ``window_count``
keyed by something else) would see one partition at a time: run those locally on the collected result.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _specs
from .errors import ColumnNotFoundError, ColumnTypeError
from .pipeline import Pipeline
from .spark_session import input_schema, output_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["run_pipeline"]


def run_pipeline(
    df: DataFrame,
    pipeline: Pipeline,
    *,
    partition_by: str | Sequence[str] | None = None,
    order_by: str | Sequence[str] | None = None,
    threads: int | None = None,
    **options: Any,
) -> DataFrame:
    """Runs ``pipeline`` in each Spark task over its partition; returns a Spark DataFrame of the outputs.

    Args:
        df: the input DataFrame.
        pipeline: a :class:`windgate.Pipeline`; its output schema is checked against ``df`` before Spark runs.
        partition_by: columns to ``repartition`` by first (rows of a key in one task).
        order_by: columns to sort each partition by (the arrival order the pipeline assumes).
        threads: windgate threads per task (default ``spark.task.cpus``).
        options: more :meth:`windgate.Pipeline.run` options (``scheduler``, ``reorder``, ``chunk_rows``, ...).

    Example:
        >>> from windgate import Pipeline, col, spark  # doctest: +SKIP
        >>> sessions = Pipeline().filter(col("user_id").is_not_null()).sessionize(
        ...     key="user_id", time="ts", gap=3600)  # doctest: +SKIP
        >>> out = spark.run_pipeline(df, sessions, partition_by="user_id",
        ...                          order_by="click_id")  # doctest: +SKIP
    """
    if not isinstance(pipeline, Pipeline):
        raise ColumnTypeError(f"pipeline: expected a windgate.Pipeline, got {type(pipeline).__name__}")
    arrow_in = input_schema(df)
    by = _specs.columns(partition_by, "partition_by")
    order = _specs.columns(order_by, "order_by")
    for param, cols in (("partition_by", by), ("order_by", order)):
        for c in cols:
            if c not in df.columns:
                raise ColumnNotFoundError(
                    f"{param}: column '{c}' is not in the DataFrame (columns: {', '.join(df.columns)})"
                )
    if threads is None:
        threads = int(df.sparkSession.conf.get("spark.task.cpus", "1") or 1)
    arrow_out = pipeline.schema(arrow_in)
    spark_out = output_schema(arrow_out)
    if by:
        df = df.repartition(*by)
    if order:
        df = df.sortWithinPartitions(*order)
    ops = pipeline.ops
    run_options = {"threads": threads, **options}

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = pa.RecordBatchReader.from_batches(arrow_in, batches)
        out = Pipeline(ops).run(reader, **run_options)
        yield from out.cast(arrow_out).to_batches()

    return df.mapInArrow(task, spark_out)
