"""What every :mod:`windgate.spark` helper checks about its Spark session and input before building a plan.

* :func:`input_schema`: the input must be a batch DataFrame (a streaming one raises
  :class:`windgate.InvalidParameterError` naming the parameter, at call time rather than at ``start()``), the
  executors must be able to import windgate (:func:`check_executors`, a one-row probe job run once per
  SparkContext), and the Arrow schema the tasks will see is returned;
* :func:`output_schema`: the Spark schema of a helper's Arrow output, ``timestamp_ntz`` staying
  ``timestamp_ntz`` (Spark's default conversion would turn it into a session-time-zone ``timestamp``);
* :func:`default_parallelism`: task slots, without ``sparkContext`` on a Spark Connect session;
* :func:`is_connect`: whether a session or DataFrame is a Spark Connect one (no ``sparkContext``, no RDDs).

Example:
    >>> from windgate.spark_session import input_schema, output_schema  # doctest: +SKIP
    >>> arrow_in = input_schema(df)  # doctest: +SKIP
    >>> spark_out = output_schema(arrow_in)  # doctest: +SKIP
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .errors import ColumnTypeError, InvalidParameterError, SparkEnvironmentError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["input_schema", "output_schema", "check_executors", "default_parallelism", "is_connect"]

#: Set to ``"false"`` to skip the executor probe (e.g. when every task slot is taken by a long job).
CHECK_CONF = "spark.windgate.checkExecutors"

# SparkContexts (by application id) whose executors passed the probe, and the sessions already looked up.
_checked_apps: set[str] = set()
_checked_sessions: weakref.WeakSet = weakref.WeakSet()

_HOW_TO_FIX = (
    "Every executor needs a Python interpreter with windgate installed (the same version as the driver): "
    "set PYSPARK_PYTHON (or spark.pyspark.python) to it before the SparkSession starts, or ship a packed "
    "virtualenv with spark.archives=wg-env.tar.gz#environment and "
    "spark.pyspark.python=./environment/bin/python (see the README's 'Running on a cluster')"
)


def is_connect(obj: Any) -> bool:
    """Whether ``obj`` (a SparkSession or DataFrame) belongs to Spark Connect.

    A Connect session has no ``sparkContext`` and no RDDs; everything goes through DataFrame plans.

    Example:
        >>> is_connect(object())
        False
    """
    return type(obj).__module__.startswith("pyspark.sql.connect")


def input_schema(
    df: DataFrame, param: str = "df", *, probe: bool = True, streaming: bool = False
) -> pa.Schema:
    """Checks that ``df`` is a batch Spark DataFrame whose executors can run windgate; returns the Arrow
    schema of its batches in the tasks (timestamps in the session time zone, ``timestamp_ntz`` without one).

    Args:
        df: the helper's input.
        param: the helper's name for it, used in error messages (``df``, ``left_df``, ...).
        probe: run :func:`check_executors` (once per SparkContext).
        streaming: accept a streaming DataFrame (the plans of :mod:`windgate.spark_streaming`).

    Raises:
        ColumnTypeError: ``df`` is not a Spark DataFrame.
        InvalidParameterError: ``df`` is a streaming DataFrame and ``streaming`` is false.
        SparkEnvironmentError: the executors' Python cannot import windgate.

    Example:
        >>> input_schema([1, 2])
        Traceback (most recent call last):
        ...
        windgate.errors.ColumnTypeError: df: expected a pyspark.sql.DataFrame, got list
    """
    if not (hasattr(df, "isStreaming") and hasattr(df, "sparkSession") and hasattr(df, "schema")):
        raise ColumnTypeError(f"{param}: expected a pyspark.sql.DataFrame, got {type(df).__name__}")
    if df.isStreaming and not streaming:
        raise InvalidParameterError(
            f"{param}: streaming DataFrames are not supported yet (windgate.spark helpers run batch plans). "
            "Read the source as a batch DataFrame (spark.read instead of spark.readStream), or call the "
            "helper on each micro-batch inside writeStream.foreachBatch(lambda batch_df, batch_id: ...) "
            "(windows spanning micro-batches then need windgate.WindowAggregator state of your own)"
        )
    from pyspark.sql.pandas.types import to_arrow_schema

    spark = df.sparkSession
    if probe:
        check_executors(spark)
    tz = spark.conf.get("spark.sql.session.timeZone", "UTC")
    return to_arrow_schema(df.schema, timezone=tz)


def output_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of a helper's Arrow output: tz-aware timestamps become ``timestamp``, tz-less ones
    stay ``timestamp_ntz`` (so an NTZ input column comes back NTZ, unshifted in any session time zone).

    Example:
        >>> import pyarrow as pa
        >>> s = output_schema(pa.schema([("t", pa.timestamp("us")), ("u", pa.timestamp("us", tz="UTC"))]))
        >>> [f.dataType.simpleString() for f in s.fields]  # doctest: +SKIP
        ['timestamp_ntz', 'timestamp']
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def default_parallelism(spark: SparkSession) -> int:
    """The session's task slots: ``sparkContext.defaultParallelism`` on a classic session; on Spark Connect
    (no ``sparkContext``) ``spark.default.parallelism`` if set, else ``spark.sql.shuffle.partitions``.

    Example:
        >>> default_parallelism(spark)  # doctest: +SKIP
        2
    """
    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    value = spark.conf.get("spark.default.parallelism", None) or spark.conf.get(
        "spark.sql.shuffle.partitions", "2"
    )
    try:
        return max(1, int(value))
    except ValueError:  # "auto" (adaptive shuffle partitions) and the like
        return 2


def check_executors(spark: SparkSession) -> None:
    """Runs a one-row probe task that imports windgate on an executor, once per SparkContext (cached by
    ``spark.app.id``); raises :class:`windgate.errors.SparkEnvironmentError` saying what to set if the
    executors' Python cannot import windgate or runs another windgate version.

    Without the probe, a missing windgate would surface only when an action runs the plan, as a Python
    worker traceback (``ModuleNotFoundError: No module named 'windgate'``) deep inside a Spark job error.
    Set ``spark.windgate.checkExecutors=false`` to skip it.

    Example:
        >>> check_executors(spark)  # doctest: +SKIP
    """
    if spark in _checked_sessions:
        return
    conf = spark.conf
    if str(conf.get(CHECK_CONF, "true")).strip().lower() == "false":
        _checked_sessions.add(spark)
        return
    app = str(conf.get("spark.app.id", None) or id(spark))
    if app not in _checked_apps:
        _probe_executors(spark)
        _checked_apps.add(app)
    _checked_sessions.add(spark)


def _probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The probe task: unpickling it imports windgate on the executor (this module is pickled by name)."""
    import sys

    import windgate

    for _ in batches:
        pass
    yield pa.record_batch({"version": [windgate.__version__], "python": [sys.executable]})


def _probe_executors(spark: SparkSession) -> None:
    import windgate

    probe = spark.range(1, numPartitions=1).mapInArrow(_probe, "version string, python string")
    try:
        rows = probe.collect()
    except Exception as exc:
        text = str(exc)
        markers = ("No module named", "ModuleNotFoundError", "ImportError", "PYTHON_VERSION_MISMATCH")
        if not any(m in text for m in markers):
            raise
        # The worker's own line (e.g. "ModuleNotFoundError: No module named 'windgate'"), not the JVM trace.
        cause = next(
            (line.strip() for line in text.splitlines() if "Error: " in line and "No module" in line),
            next((line.strip() for line in text.splitlines() if any(m in line for m in markers)), ""),
        )
        raise SparkEnvironmentError(
            f"the Spark executors cannot import windgate ({cause[:300]}). {_HOW_TO_FIX}"
        ) from exc
    version, python = rows[0][0], rows[0][1]
    if version != windgate.__version__:
        raise SparkEnvironmentError(
            f"the Spark executors run windgate {version} ({python}), the driver windgate "
            f"{windgate.__version__}. {_HOW_TO_FIX}"
        )
