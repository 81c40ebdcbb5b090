"""windgate inside PySpark: each Spark task runs a windgate operator over its partition through Arrow UDFs.

Spark spreads the work over machines; windgate fills each task's cores. Every helper returns a Spark DataFrame
with the same rows as the local function on the same data (the determinism promise, "Contracts" in
docs/architecture.md):

* keyed window aggregation (``by`` given): ``repartition(by)``, each partition sorted by time, then
  ``mapInArrow`` streams it through a :class:`windgate.WindowAggregator`, so memory per task is bounded
  by the open windows, not the partition;
* unkeyed aggregation: rows are cut into time ranges (a whole number of slides), each row copied into every
  range whose windows it falls in, and each task emits only the windows that start in its own ranges;
* preference queries (:func:`skyline`, :func:`top_dominant`, :func:`topk`): the same two ways, keyed or by
  time ranges, with a :class:`windgate.SkylineQuery` (etc.) per task or range;
* band joins (:func:`band_join`): time buckets, each left row in one bucket and each right row copied into
  every bucket it can match, then a cogrouped ``applyInArrow`` joins each bucket with
  :func:`windgate.band_join`;
* ordered pipelines (:func:`run_pipeline`): a :class:`windgate.Pipeline` per task over its partition, after an
  optional ``repartition``/sort (see :mod:`windgate.spark_pipeline`).

Ties in time are broken by the DataFrame's row order (``monotonically_increasing_id``), which matches the
local call's arrival order for data read in order, so ``first``/``last`` and the top-delta and top-k cuts
agree too.

Example:
    >>> from windgate.spark import local_session, window_aggregate  # doctest: +SKIP
    >>> spark = local_session()  # doctest: +SKIP
    >>> df = spark.read.parquet("smartgrid.parquet")  # doctest: +SKIP
    >>> out = window_aggregate(df, time="ts", size="60s", slide="10s", by="plug_id",
    ...                        aggs={"*": "count", "value": ["sum", "max"]})  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from . import _native, _options, _specs, spark_streaming, spark_twophase
from .errors import ColumnNotFoundError, InvalidParameterError
from .spark_pipeline import run_pipeline
from .spark_session import check_executors, default_parallelism, input_schema, output_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from . import WindowsAndLate

__all__ = [
    "window_aggregate",
    "skyline",
    "top_dominant",
    "topk",
    "band_join",
    "run_pipeline",
    "local_session",
]

_SEQ = "__windgate_seq"
_PREFERENCE_CLASSES = {"skyline": "SkylineQuery", "top_dominant": "TopDominantQuery", "topk": "TopKQuery"}
_RANGE = "__windgate_range"


def local_session(app_name: str = "windgate", master: str = "local[2]", **conf: str) -> SparkSession:
    """A local SparkSession set up for windgate: UTC, Arrow on, UI off, few shuffle partitions, and the
    RocksDB state store that the streaming helpers need (:mod:`windgate.spark_streaming`).

    Extra ``conf`` entries are passed as ``spark.*`` settings (underscores in keys stay as given).
    """
    import sys

    from pyspark.sql import SparkSession

    # Workers must run this interpreter (the one windgate is installed in), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", os.environ.get("WINDGATE_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.sql.streaming.stateStore.providerClass", spark_streaming.ROCKSDB)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def window_aggregate(
    df: DataFrame | str | os.PathLike | Sequence[str | os.PathLike],
    *,
    time: str,
    size: _specs.Span | None = None,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    gap: _specs.Span | None = None,
    rows: int | None = None,
    rows_slide: int | None = None,
    tz: str | None = None,
    by: str | list[str] | None = None,
    aggs: Mapping[str, str | list[str]],
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
    ordered: bool = False,
    range_size: _specs.Span | None = None,
    plan: str = "auto",
    spark: SparkSession | None = None,
    sorted_merge: bool | None = None,
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    shards: int | None = None,
    allowed_lateness: _specs.Span | None = None,
    emit: str = "final",
    interval: _specs.Span | None = None,
) -> DataFrame | WindowsAndLate:
    """:func:`windgate.window_aggregate` over a Spark DataFrame; returns a Spark DataFrame.

    Two plans (``plan=``), both with the local call's rows:

    * ``"two_phase"`` (what ``"auto"`` picks): each task pre-aggregates its rows where they are into exact
      per-(key, pane) partial states, which are shuffled by key and merged into windows
      (:mod:`windgate.spark_twophase`). Parquet input (a path, or a DataFrame that is a plain
      ``spark.read.parquet(...)`` scan, columns selected or not) is read by the tasks with pyarrow, so the raw
      rows never cross the JVM; any other DataFrame goes through ``mapInArrow`` with only the columns the
      query reads.
    * ``"one_phase"``: every raw row shuffled by key (unkeyed: copied into time ranges), sorted by time and
      streamed through one operator per task.

    The returned DataFrame's ``windgate_plan`` attribute says which plan ran and how.

    Args:
        df: the input DataFrame (any columns; the time column is a timestamp, date or integer column), or
            the path(s) of Parquet files or directories (local or any filesystem pyarrow reaches).
        time, size, slide, offset, tz, by, aggs, null_time: as in :func:`windgate.window_aggregate`.
        gap: session windows (as Spark's ``session_window(time, gap)``), instead of ``size``/``slide``.
            Sessions are per key, so the plan is exact with one operator per task: rows shuffled by ``by``
            (all into one task without ``by``), sorted by time in each task and streamed through the
            session engine. On a streaming DataFrame each session comes out once, when Spark's watermark
            passes its end (``on_late`` takes ``"drop"`` or ``"error"``; ``allowed_lateness`` and ``emit``
            are for sliding windows).
        rows, rows_slide: count windows (as Flink's ``countWindow(rows, rows_slide)``; see
            :func:`windgate.window_aggregate`), instead of ``size``/``slide``: the same plan as ``gap``,
            rows of equal time in the DataFrame's order. Batch DataFrames only.
        threads: windgate threads per Spark task (default: ``spark.task.cpus``): with more than one, each task
            runs the pane farm on that many cores.
        strategy, farm: as in :func:`windgate.window_aggregate`.
        ordered: sort the result by ``(window_start, by...)`` like the local call. Spark DataFrames have no
            order of their own, so this is off by default; when on, the aggregated rows are persisted first so
            that the range sort's sampling pass does not run the whole aggregation twice.
        range_size: one-phase, unkeyed only: length of the time ranges each task owns (default: chosen from
            the data's time span so that there are a few ranges per core).
        plan: ``"auto"``, ``"two_phase"`` or ``"one_phase"`` (see above).
        spark: the session to run in when ``df`` is a path (default: the active session).
        sorted_merge: two-phase, keyed: sort each task's partial states by pane and merge them streaming
            (memory bounded by the open panes) instead of in memory (no sort; memory: the task's share of
            the states). ``None``: sorted only for file input of more than 2**22 rows per shuffle partition.
        lateness, on_late: streaming DataFrames only (required there): the disorder bound, from which
            Spark's watermark is set, and what happens to a row behind it (``"drop"``: dropped and counted,
            ``"error"``: the query fails, ``"keep"``: see below), as in :class:`windgate.WindowAggregator`.
        shards: streaming DataFrames only: how many operators the keys are hashed into (default
            ``spark.sql.shuffle.partitions`` with ``by``, 1 without). Keep it across restarts.
        allowed_lateness, emit, interval: streaming DataFrames only: the update mode of
            :func:`windgate.window_aggregate`; revisions (``revision``) and early results (``final``) are
            appended to the output as rows of their own (keep the highest revision of each window).

    A batch DataFrame is one finite stream, so the result is exact (no rows are late). A streaming
    DataFrame (``df.isStreaming``) gives a streaming DataFrame in append mode: each window once, when
    Spark's watermark passes its end, the operators' state in Spark's checkpointed state store
    (:mod:`windgate.spark_streaming`; "Structured Streaming" in ``docs/spark.md``). With ``on_late="keep"``
    it returns a :class:`windgate.WindowsAndLate` pair of streaming DataFrames: the windows, and the late rows
    (every column of ``df``, then the ``watermark`` each met). Both select from one stateful operator's
    output; each started query runs that operator, and as windgate is deterministic the two agree.
    """
    if getattr(df, "isStreaming", False) is True:
        if tz is not None and any(
            isinstance(v, str) and v.strip().endswith(("mo", "month", "months")) for v in (size, slide)
        ):
            raise InvalidParameterError(
                'size: month windows ("1mo") run on batch DataFrames and locally; a streaming DataFrame '
                "takes windows of whole days or weeks with tz="
            )
        names = (*_options.WINDOW_AGGREGATE.shared, *_options.UPDATES)
        given = {**locals(), "threads": _task_threads(df, threads)}
        _options.WINDOW_AGGREGATE.native(given, names)  # every parameter checked before Spark runs
        return spark_streaming.windowed_stream(
            df,
            cls="WindowAggregator",
            kwargs={n: given[n] for n in names if n in given},
            batch="window_aggregate",
            columns=[time, *_specs.by_columns(by), *(c for c in aggs if c != "*")],
            by=_specs.by_columns(by),
            shards=shards,
            carry=on_late == "keep",  # late rows come out whole
        )
    _batch_only(lateness=lateness, on_late=on_late, shards=shards, allowed_lateness=allowed_lateness)
    if emit != "final" or interval is not None:
        raise InvalidParameterError(
            "emit: only a streaming DataFrame fires early (a batch DataFrame is one finite stream), "
            f"got emit={emit!r}"
        )
    if gap is not None or rows is not None:
        return _sessions(df, locals())
    plan = _specs.choice(plan, "plan")
    if plan not in ("auto", "two_phase", "one_phase"):
        raise InvalidParameterError(f'plan: expected "auto", "two_phase" or "one_phase", got {plan!r}')
    files = None
    if isinstance(df, (str, os.PathLike, list, tuple)):
        files = spark_twophase.parquet_input(df)
        spark = spark or _active_session()
        check_executors(spark)
        if plan == "one_phase":
            paths = [df] if isinstance(df, (str, os.PathLike)) else df
            df, files = spark.read.parquet(*[os.fspath(p) for p in paths]), None
    else:
        input_schema(df)  # a batch DataFrame, and executors that can import windgate
        spark = df.sparkSession
    by_cols = _specs.by_columns(by)
    if tz is not None and plan == "one_phase" and not by_cols:
        raise InvalidParameterError(
            "tz: the one-phase plan cuts unkeyed rows into time ranges of the UTC grid, which local days do "
            'not follow: use plan="two_phase" (the default) or by='
        )
    # The tasks stream time-sorted rows: lateness 0 loses none.
    pinned = {"by": by_cols, "lateness": 0, "on_late": "drop", "threads": _task_threads(spark, threads)}
    spec = _options.WINDOW_AGGREGATE.native({**locals(), **pinned}, _options.WINDOW_AGGREGATE.shared)
    agg_list = spec["aggs"]
    columns = [time, *by_cols, *(c for c, _ in agg_list if c != "*")]
    if plan != "one_phase":
        source = files or spark_twophase.plain_parquet_scan(df, columns) or df
        out = spark_twophase.two_phase(spark, source, spec, columns=columns, sorted_merge=sorted_merge)
        if ordered:
            described = out.windgate_plan
            out = out.persist().orderBy("window_start", *by_cols)
            out.windgate_plan = described
        return out
    # Only first/last read the order among rows with equal times; the other functions are order-free, so
    # the tie-breaking column is shuffled and sorted only when needed.
    ordered_funcs = {"first", "last"}
    out = _windowed(
        df,
        spec,
        operator="WindowAggregator",
        batch=lambda empty: _native.window_aggregate([empty], **spec),
        columns=columns,
        ties=any(f.lower() in ordered_funcs for _, fs in agg_list for f in fs),
        range_size=range_size,
    )
    if ordered:
        out = out.persist().orderBy("window_start", *by_cols)
    out.windgate_plan = "one-phase: raw rows shuffled by key (unkeyed: by time range) and sorted by time"
    return out


def _sessions(df: Any, given: dict[str, Any]) -> DataFrame:
    """Session (``gap=``) or count (``rows=``) windows of a batch DataFrame: one operator per task over the
    rows of the keys hashed to it (no key: one task), sorted by time (ties in the DataFrame's order when
    ``first`` or ``last`` read it, and always for count windows, whose rows they count), so every key's rows
    stream through one operator in order and the result is the local call's rows."""
    from pyspark.sql import functions as F

    count = given["rows"] is not None
    kind = "rows: count" if count else "gap: session"
    if given["plan"] not in ("auto", "one_phase") or given["range_size"] is not None:
        raise InvalidParameterError(
            f"{kind} windows have one plan (rows shuffled by key, sorted by time): leave plan and "
            "range_size unset"
        )
    if isinstance(df, (str, os.PathLike, list, tuple)):
        spark = given["spark"] or _active_session()
        paths = [df] if isinstance(df, (str, os.PathLike)) else df
        df = spark.read.parquet(*[os.fspath(p) for p in paths])
    by_cols = _specs.by_columns(given["by"])
    pinned = {"by": by_cols, "lateness": 0, "on_late": "drop", "threads": _task_threads(df, given["threads"])}
    spec = _options.WINDOW_AGGREGATE.native({**given, **pinned}, _options.WINDOW_AGGREGATE.shared)
    arrow_in = input_schema(df)
    time = spec["time"]
    columns = [time, *by_cols, *(c for c, _ in spec["aggs"] if c != "*")]
    for col in columns:
        if col not in df.columns:
            raise ColumnNotFoundError(
                f"column '{col}' is not in the DataFrame (columns: {', '.join(df.columns)})"
            )
    spark_out = output_schema(_native.window_aggregate([arrow_in.empty_table()], **spec).schema)
    ties = count or any(f.lower() in ("first", "last") for _, fs in spec["aggs"] for f in fs)
    seq = df.select(*columns).withColumn(
        _SEQ, F.monotonically_increasing_id() if ties else F.lit(0).cast("long")
    )
    parts = seq.repartition(*by_cols) if by_cols else seq.repartition(1)
    parts = parts.sortWithinPartitions(time, *([_SEQ] if ties else []))
    out = parts.mapInArrow(_keyed_task("WindowAggregator", spec), spark_out)
    if given["ordered"]:
        ends = ("window_last", "window_first") if count else ("window_end", "window_start")
        out = out.persist().orderBy(*ends, *by_cols)
    what = "count windows" if count else "sessions"
    out.windgate_plan = f"{what}: raw rows shuffled by key (no key: one task), sorted by time"
    return out


def _batch_only(**given: Any) -> None:
    """The streaming-only keywords must keep their defaults on a batch DataFrame."""
    for name, value in given.items():
        if value is not None and not (name == "on_late" and value == "drop"):
            raise InvalidParameterError(
                f"{name}: only a streaming DataFrame takes it (a batch DataFrame is one finite stream: "
                f"nothing is late), got {name}={value!r}"
            )


def _active_session() -> SparkSession:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise InvalidParameterError(
            "spark: a path was given and there is no active SparkSession; pass spark="
        )
    return session


def skyline(
    df: DataFrame,
    *,
    time: str,
    size: _specs.Span,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    dims: str | Sequence[str],
    prefer: str | Sequence[str] = "min",
    by: str | list[str] | None = None,
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
    range_size: _specs.Span | None = None,
    plan: str = "auto",
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    shards: int | None = None,
) -> DataFrame:
    """:func:`windgate.skyline` over a Spark DataFrame; returns a Spark DataFrame with the same rows.

    Keyed (``by`` given): ``repartition(by)`` and one :class:`windgate.SkylineQuery` per task over its rows
    sorted by time. Unkeyed: time ranges as in :func:`window_aggregate`, each row copied into every range
    whose windows hold it. The whole input is one finite stream, so the result is exact (no rows are late).
    Spark DataFrames have no order: sort the result if you need one (the local call's order is
    ``(window_start, by..., time, arrival)``).

    Args:
        df: the input DataFrame (any columns).
        time, size, slide, offset, dims, prefer, by, null_time, strategy, farm: as in
            :func:`windgate.skyline`.
        threads: windgate threads per Spark task (default: ``spark.task.cpus``).
        range_size: unkeyed only: length of the time ranges each task owns (default: a few ranges per core).
        lateness, on_late, shards: streaming DataFrames only, as in :func:`window_aggregate`: a streaming
            DataFrame gives a streaming DataFrame in append mode (:mod:`windgate.spark_streaming`).

    Example:
        >>> from windgate.spark import local_session, skyline  # doctest: +SKIP
        >>> hotels = local_session().read.parquet("hotels.parquet")  # doctest: +SKIP
        >>> out = skyline(hotels, time="ts", size="1h", slide="10 minutes", dims=["price", "stars"],
        ...               prefer=["min", "max"], by="city")  # doctest: +SKIP
    """
    return _preference(
        df,
        "skyline",
        threads=threads,
        range_size=range_size,
        plan=plan,
        lateness=lateness,
        on_late=on_late,
        shards=shards,
        time=time,
        size=size,
        slide=slide,
        offset=offset,
        dims=dims,
        prefer=prefer,
        by=by,
        null_time=null_time,
        strategy=strategy,
        farm=farm,
    )


def top_dominant(
    df: DataFrame,
    *,
    time: str,
    size: _specs.Span,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    dims: str | Sequence[str],
    delta: int,
    prefer: str | Sequence[str] = "min",
    by: str | list[str] | None = None,
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
    range_size: _specs.Span | None = None,
    plan: str = "auto",
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    shards: int | None = None,
) -> DataFrame:
    """:func:`windgate.top_dominant` over a Spark DataFrame; returns a Spark DataFrame with the same rows.

    Works like :func:`skyline`. Ties in ``kappa`` at the ``delta`` boundary are broken by time and then by
    the DataFrame's row order (``monotonically_increasing_id``), which is the local call's arrival order for
    data read in order.

    Args:
        df: the input DataFrame (any columns).
        time, size, slide, offset, dims, delta, prefer, by, null_time, strategy, farm: as in
            :func:`windgate.top_dominant`.
        threads, range_size, lateness, on_late, shards: as in :func:`skyline`.
    """
    return _preference(
        df,
        "top_dominant",
        threads=threads,
        range_size=range_size,
        plan=plan,
        lateness=lateness,
        on_late=on_late,
        shards=shards,
        time=time,
        size=size,
        slide=slide,
        offset=offset,
        dims=dims,
        delta=delta,
        prefer=prefer,
        by=by,
        null_time=null_time,
        strategy=strategy,
        farm=farm,
    )


def topk(
    df: DataFrame,
    *,
    time: str,
    size: _specs.Span,
    slide: _specs.Span | None = None,
    offset: _specs.Span = 0,
    score: str,
    k: int,
    descending: bool = True,
    by: str | list[str] | None = None,
    null_time: str = "error",
    threads: int | None = None,
    strategy: str = "auto",
    farm: Mapping[str, Any] | None = None,
    range_size: _specs.Span | None = None,
    plan: str = "auto",
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    shards: int | None = None,
) -> DataFrame:
    """:func:`windgate.topk` over a Spark DataFrame; returns a Spark DataFrame with the same rows.

    Works like :func:`skyline`. Equal scores at the ``k`` boundary are broken by time and then by the
    DataFrame's row order (``monotonically_increasing_id``), as in :func:`top_dominant`.

    Args:
        df: the input DataFrame (any columns).
        time, size, slide, offset, score, k, descending, by, null_time, strategy, farm: as in
            :func:`windgate.topk`.
        threads, range_size, lateness, on_late, shards: as in :func:`skyline`.
    """
    return _preference(
        df,
        "topk",
        threads=threads,
        range_size=range_size,
        plan=plan,
        lateness=lateness,
        on_late=on_late,
        shards=shards,
        time=time,
        size=size,
        slide=slide,
        offset=offset,
        score=score,
        k=k,
        descending=descending,
        by=by,
        null_time=null_time,
        strategy=strategy,
        farm=farm,
    )


def _preference(
    df: DataFrame,
    query: str,
    *,
    threads: int | None,
    range_size: _specs.Span | None,
    plan: str,
    lateness: _specs.Span | None,
    on_late: str,
    shards: int | None,
    **params: Any,
) -> DataFrame:
    """The preference queries through :func:`_windowed`, after the two-phase plan's per-pane prefilter
    (:func:`windgate.spark_twophase.prefilter`) unless ``plan="one_phase"``; a streaming DataFrame through
    :func:`windgate.spark_streaming.windowed_stream`."""
    if getattr(df, "isStreaming", False) is True:
        live = {**params, "lateness": lateness, "on_late": on_late, "threads": _task_threads(df, threads)}
        spec = _options.preference_spec(query, live)  # every parameter checked before Spark runs
        scored = [spec["score"]] if "score" in spec else []
        return spark_streaming.windowed_stream(
            df,
            cls=_PREFERENCE_CLASSES[query],
            kwargs=live,
            batch=query,
            columns=[spec["time"], *spec["by"], *spec.get("dims", ()), *scored],
            by=list(spec["by"]),
            shards=shards,
            carry=True,
        )
    _batch_only(lateness=lateness, on_late=on_late, shards=shards)
    plan = _specs.choice(plan, "plan")
    if plan not in ("auto", "two_phase", "one_phase"):
        raise InvalidParameterError(f'plan: expected "auto", "two_phase" or "one_phase", got {plan!r}')
    pinned = {"lateness": 0, "on_late": "drop", "threads": _task_threads(df, threads)}
    spec = _options.preference_spec(query, {**params, **pinned})
    scored = [spec["score"]] if "score" in spec else []
    columns = [spec["time"], *spec["by"], *spec.get("dims", ()), *scored]
    described = "one-phase: raw rows shuffled by key (unkeyed: by time range) and sorted by time"
    if plan != "one_phase":
        for col in columns:
            if col not in df.columns:
                raise ColumnNotFoundError(
                    f"column '{col}' is not in the DataFrame (columns: {', '.join(df.columns)})"
                )
        arrow_in = input_schema(df)
        _native.preference(arrow_in.empty_table(), **spec)  # every parameter checked before Spark runs
        unit = _specs.time_unit(arrow_in.field(spec["time"]).type)
        size_u, slide_u, offset_u = _specs.window_units(spec, unit)
        df = spark_twophase.prefilter(df, spec, size=size_u, slide=slide_u, offset=offset_u, unit=unit)
        described = (
            "two-phase: each partition's rows cut to the per-pane candidates (pane skylines; top-k per "
            "pane) before the shuffle, then " + described.removeprefix("one-phase: ")
        )
    out = _windowed(
        df,
        spec,
        operator="PreferenceQuery",
        batch=lambda empty: _native.preference(empty, **spec),
        columns=columns,
        # A skyline is a set whatever the order of rows with equal times; top-delta and top-k cut at ties.
        ties=query != "skyline",
        range_size=range_size,
    )
    out.windgate_plan = described
    return out


def _task_threads(df_or_spark: Any, threads: int | None) -> int:
    """windgate threads per Spark task: ``spark.task.cpus`` unless given."""
    if threads is not None:
        return threads
    spark = getattr(df_or_spark, "sparkSession", df_or_spark)
    return int(spark.conf.get("spark.task.cpus", "1") or 1)


def _windowed(
    df: DataFrame,
    spec: dict[str, Any],
    *,
    operator: str,
    batch: Callable[[pa.Table], pa.Table],
    columns: Sequence[str],
    ties: bool,
    range_size: _specs.Span | None,
) -> DataFrame:
    """Runs the windowed streaming operator ``_native.<operator>(**spec)`` over ``df`` (``spec`` with
    ``lateness=0``: each task's rows arrive sorted by time).

    Keyed (``spec["by"]`` non-empty): ``repartition(by)``, each partition sorted by time, one operator per
    task. Unkeyed: rows copied into the time ranges whose windows they fall in, one operator per range, each
    emitting only the windows that start in its range. ``batch`` is the batch call on an empty table: it
    checks every parameter and gives the output schema before Spark runs anything. ``ties``: rows of equal
    time keep the DataFrame's row order (``monotonically_increasing_id``), for operators whose answer
    depends on it; otherwise their order is left to the shuffle.
    """
    from pyspark.sql import functions as F

    arrow_in = input_schema(df)
    spark = df.sparkSession
    for col in columns:
        if col not in df.columns:
            raise ColumnNotFoundError(
                f"column '{col}' is not in the DataFrame (columns: {', '.join(df.columns)})"
            )
    arrow_out = batch(arrow_in.empty_table()).schema
    spark_out = output_schema(arrow_out)

    time = spec["time"]
    seq = df.withColumn(_SEQ, F.monotonically_increasing_id() if ties else F.lit(0).cast("long"))
    tie = [_SEQ] if ties else []
    if spec["by"]:
        parts = seq.repartition(*spec["by"]).sortWithinPartitions(time, *tie)
        return parts.mapInArrow(_keyed_task(operator, spec), spark_out)
    unit = _specs.time_unit(arrow_in.field(time).type)
    size_u, slide_u, offset_u = _specs.window_units(spec, unit)
    range_u = _range_length(seq, time, unit, size_u, slide_u, spark, range_size)
    ranged = _with_ranges(seq, time, unit, size_u, slide_u, offset_u, range_u)
    parts = ranged.repartition(_RANGE).sortWithinPartitions(_RANGE, time, *tie)
    return parts.mapInArrow(_ranged_task(operator, spec, range_u, offset_u), spark_out)


def _open(operator: str, spec: dict[str, Any]):
    """A fresh streaming operator for a task."""
    return getattr(_native, operator)(**spec)


def _keyed_task(operator: str, spec: dict[str, Any]):
    """One windgate operator per task: the task's rows, sorted by time, stream through it."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        op = _open(operator, spec)
        for batch in batches:
            out = op.push(batch.drop_columns([_SEQ]))
            if out.num_rows:
                yield out
        last = op.flush()
        if last.num_rows:
            yield last

    return run


def _ranged_task(operator: str, spec: dict[str, Any], range_u: int, offset_u: int):
    """One operator per time range; only windows starting inside the range are this task's to emit.

    Rows with a null time have no range: they go through an operator of their own, which raises the local
    call's ``NullTimeError`` (or drops them under ``null_time="drop"``).
    """
    import pyarrow.compute as pc

    def own(out: pa.RecordBatch, r: int) -> pa.RecordBatch:
        start = out.column("window_start").cast(pa.int64())
        lo = r * range_u + offset_u
        mask = pc.and_(pc.greater_equal(start, lo), pc.less(start, lo + range_u))
        return out.filter(mask)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        op, current = None, None
        for batch in batches:
            if batch.column(_RANGE).null_count:
                nulls = batch.filter(pc.is_null(batch.column(_RANGE)))
                stray = _open(operator, spec)
                stray.push(nulls.drop_columns([_SEQ, _RANGE]))
                stray.flush()
                batch = batch.filter(pc.is_valid(batch.column(_RANGE)))
            ranges = batch.column(_RANGE).to_numpy()
            cuts = [0, *(np.flatnonzero(np.diff(ranges)) + 1).tolist(), len(ranges)]
            for a, b in zip(cuts[:-1], cuts[1:], strict=True):
                if a == b:
                    continue
                r = int(ranges[a])
                if r != current:
                    if op is not None:
                        out = own(op.flush(), current)
                        if out.num_rows:
                            yield out
                    op, current = _open(operator, spec), r
                piece = batch.slice(a, b - a).drop_columns([_SEQ, _RANGE])
                out = own(op.push(piece), r)
                if out.num_rows:
                    yield out
        if op is not None:
            out = own(op.flush(), current)
            if out.num_rows:
                yield out

    return run


def _floor_div(a, b: int):
    """floor(a / b) for b > 0 in exact long arithmetic (Spark's `div` truncates towards zero)."""
    from pyspark.sql import functions as F

    return (a - F.pmod(a, F.lit(b))).cast("long") / F.lit(b)


def _with_ranges(df, time: str, unit: str, size: int, slide: int, offset: int, range_u: int):
    """Copies each row into every time range whose windows contain it."""
    from pyspark.sql import functions as F

    t = _specs.spark_time_units(time, unit)
    per_range = range_u // slide
    hi = _floor_div(t - F.lit(offset), slide).cast("long")
    lo = (_floor_div(t - F.lit(offset + size), slide) + F.lit(1)).cast("long")
    r_lo = _floor_div(lo, per_range).cast("long")
    r_hi = _floor_div(hi, per_range).cast("long")
    # explode_outer: a null time (a null sequence) keeps its row, with a null range.
    return df.withColumn(_RANGE, F.explode_outer(F.sequence(r_lo, r_hi)))


def _range_length(df, time: str, unit: str, size: int, slide: int, spark, range_size) -> int:
    """A whole number of slides, at least one window long, giving a few ranges per core."""
    from pyspark.sql import functions as F

    if range_size is not None:
        r = _specs.units(_specs.span(range_size, "range_size"), unit, "range_size", time)
        if r <= 0:
            raise InvalidParameterError(f"range_size: expected a positive length, got {r}")
        return max(1, math.ceil(r / slide)) * slide
    t = _specs.spark_time_units(time, unit)
    lo, hi = df.agg(F.min(t), F.max(t)).first()
    if lo is None:
        return max(size, slide) // slide * slide + slide
    target = 4 * default_parallelism(spark)
    span = max(1, hi - lo + 1)
    r = max(size, math.ceil(span / target))
    return max(1, math.ceil(r / slide)) * slide


def band_join(
    left_df: DataFrame,
    right_df: DataFrame,
    *,
    time: str | Sequence[str],
    window: _specs.Span | None = None,
    lower: _specs.Span | None = None,
    upper: _specs.Span | None = None,
    how: str = "inner",
    on: Any = (),
    bucket: _specs.Span | None = None,
    partitions: int | None = None,
    threads: int | None = None,
    index: bool = True,
    semantics: str = "interval",
    lateness: _specs.Span | None = None,
    on_late: str = "drop",
    shards: int | None = None,
) -> DataFrame:
    """:func:`windgate.band_join` over two Spark DataFrames; returns a Spark DataFrame with the same rows.

    Rows are grouped by ``(time bucket, pmod(hash(equality columns), P))``, a bounded number of groups, and
    each group runs ONE :func:`windgate.band_join` over all of its keys (``lateness=None``, so exact whatever
    the row order). Each left row lives in the one bucket ``floor(l.ts / bucket)``; each right row is copied
    into every bucket it can match, ``floor((r.ts - upper) / bucket)`` to ``floor((r.ts - lower) / bucket)``.
    Equal keys hash alike on both sides, so a matching pair meets in the left row's group only: every pair
    comes out exactly once. Implementation: :mod:`windgate.spark_join`.

    Groups: with equality predicates, ``P = spark.sql.shuffle.partitions`` key-hash groups per bucket and
    buckets ``64 * (upper - lower)`` wide, chosen without running anything; without, ``P = 1`` and one Spark
    job reads the inputs' time span and size to cut it into about ``min(spark.sql.shuffle.partitions,
    4 x defaultParallelism)`` buckets (more for large inputs), each at least ``2 * (upper - lower)`` wide.
    See :mod:`windgate.spark_join`.

    Parameters and column types are checked on the driver (the local call on empty inputs), raising the
    local call's errors. A null time fails the Spark job with windgate's ``NullTimeError`` message.

    Args:
        left_df, right_df: the two inputs (any columns).
        time: the time column of both sides, or a ``(left, right)`` pair of names: integer or timestamp
            columns of the same type on both sides.
        window: the time band ``|l.ts - r.ts| <= window``, an int in the time column's unit or, for timestamp
            columns, a duration string (``"5s"``) or a ``timedelta``.
        lower, upper: instead of ``window``: ``l.ts + lower <= r.ts <= l.ts + upper`` (Spark's
            ``r.ts BETWEEN l.ts + lower AND l.ts + upper``); negative durations allowed (``"-30s"``).
        how: ``"inner"`` or ``"left"``: also every left row without a partner, with null right columns (all
            of a left row's possible partners are in its group, so "no partner in the group" is global).
        on: :func:`windgate.band` and :func:`windgate.eq` predicates, as in :func:`windgate.band_join`. Rows
            with a null or NaN in a predicate column match nothing and are dropped before the shuffle (left
            rows of a left outer join are kept: they come out unmatched).
        bucket: bucket width, an int in the time column's unit or a duration (default: see above). Each
            right row is copied into about ``1 + (upper - lower) / bucket`` buckets. A group holds all of its
            rows in memory.
        partitions: ``P``, the key-hash groups of each bucket (default ``spark.sql.shuffle.partitions``;
            ignored without equality predicates).
        threads: windgate threads per group (default: ``spark.task.cpus``).
        index: as in :func:`windgate.band_join`.
        semantics: only ``"interval"``. The ``"scalejoin"`` semantics depends on the global order in which
            each side purges its window, which time buckets cannot reproduce: it raises
            :class:`windgate.InvalidParameterError`; run :func:`windgate.band_join` locally instead.
        lateness, on_late, shards: only when both DataFrames are streaming (a batch DataFrame refuses
            them). Then the result is a streaming DataFrame in append mode: ``lateness`` (required) bounds
            each side's disorder and builds Spark's watermark, ``on_late`` is the joiner's (``"drop"`` or
            ``"error"``), ``shards`` the number of joiners (default ``spark.sql.shuffle.partitions`` with
            equality predicates, else 1), keyed by a hash of the equality columns. See
            :mod:`windgate.spark_join_stream`.

    Returns:
        A Spark DataFrame with the columns of :func:`windgate.band_join` (``left_<col>``...,
        ``right_<col>``..., ``ts``) and the same rows as the local call on the same data. Spark DataFrames
        have no order: sort the result if you need one (the local call's order is
        ``(ts, trigger, partner)``).

    Example:
        >>> import windgate
        >>> from windgate.spark import band_join, local_session  # doctest: +SKIP
        >>> spark = local_session()  # doctest: +SKIP
        >>> clicks = spark.read.parquet("clicks.parquet")  # ts, user  # doctest: +SKIP
        >>> views = spark.read.parquet("impressions.parquet")  # ts, user, ad  # doctest: +SKIP
        >>> out = band_join(clicks, views, time="ts", lower="-30s", upper="0s", how="left",
        ...                 on=windgate.eq("user", "user"))  # doctest: +SKIP
        >>> out.orderBy("ts").show()  # doctest: +SKIP
    """
    from .spark_join import band_join as spark_band_join
    from .spark_join_stream import band_join_stream

    common = dict(time=time, window=window, lower=lower, upper=upper, how=how, on=on, threads=threads)
    common.update(index=index, semantics=semantics)
    if all(getattr(df, "isStreaming", False) is True for df in (left_df, right_df)):
        stream = dict(lateness=lateness, on_late=on_late, shards=shards)
        return band_join_stream(left_df, right_df, **common, **stream)
    if lateness is not None or on_late != "drop" or shards is not None:
        raise InvalidParameterError(
            "lateness, on_late, shards: only for streaming DataFrames (a batch join is exact whatever the "
            "row order)"
        )
    return spark_band_join(left_df, right_df, **common, bucket=bucket, partitions=partitions)
