"""What Spark users expect of every windgate.spark helper: timestamp_ntz stays timestamp_ntz (unshifted in a
non-UTC session), a streaming DataFrame is refused at call time where it cannot run (and needs a lateness
where it can), and executors without windgate are reported with what to set."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import windgate
from windgate.errors import InvalidParameterError

pytestmark = pytest.mark.spark

NEW_YORK = "America/New_York"


@contextlib.contextmanager
def _new_york(spark):
    """The shared session in America/New_York (timestamps shift there, ntz ones must not)."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", NEW_YORK)
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def _ntz_events(n=600, seed=5, tz=None) -> pa.Table:
    """Wall-clock times across New York's 2024 spring-forward night (02:00-03:00 does not exist there)."""
    rng = np.random.default_rng(seed)
    start = int(dt.datetime(2024, 3, 10, 0, 0).replace(tzinfo=dt.UTC).timestamp()) * 1_000_000
    ts = start + np.sort(rng.choice(4 * 3600 * 1_000_000, n, replace=False))
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", tz=tz)),
            "k": pa.array(rng.integers(0, 3, n), pa.int64()),
            "x": pa.array(rng.integers(0, 40, n), pa.int64()),
            "y": pa.array(rng.integers(0, 40, n), pa.int64()),
        }
    )


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


def _same(df, want: pa.Table, ntz_columns: list[str]) -> None:
    types = dict(df.dtypes)
    for c in ntz_columns:
        assert types[c] == "timestamp_ntz", (c, df.dtypes)
    got = df.toArrow()
    assert got.column_names == want.column_names
    assert want.num_rows > 0
    assert _sorted(got.cast(want.schema)).equals(_sorted(want))


WINDOW = dict(time="ts", size="30 minutes", slide="10 minutes")


def test_timestamp_ntz_stays_ntz_and_unshifted_in_every_helper(spark):
    from windgate import spark as wspark

    t = _ntz_events()
    right = t.slice(0, 200)
    # pyspark reads tz-less Arrow times as `timestamp` unless told otherwise.
    ntz = "ts timestamp_ntz, k long, x long, y long"
    df, right_df = spark.createDataFrame(t, schema=ntz), spark.createDataFrame(right, schema=ntz)
    assert dict(df.dtypes)["ts"] == "timestamp_ntz"
    with _new_york(spark):
        _every_helper(wspark, t, df, right, right_df)


def _every_helper(wspark, t, df, right, right_df):
    aggs = {"*": "count", "ts": ["min", "max"], "x": ["sum"]}
    for by in ("k", None):
        out = wspark.window_aggregate(df, by=by, aggs=aggs, **WINDOW)
        want = windgate.window_aggregate(t, by=by, aggs=aggs, **WINDOW)
        _same(out, want, ["window_start", "window_end", "min_ts", "max_ts"])
    pref = dict(dims=["x", "y"], **WINDOW)
    _same(wspark.skyline(df, by="k", **pref), windgate.skyline(t, by="k", **pref), ["ts", "window_start"])
    _same(wspark.top_dominant(df, delta=2, **pref), windgate.top_dominant(t, delta=2, **pref), ["ts"])
    _same(wspark.topk(df, score="x", k=2, **WINDOW), windgate.topk(t, score="x", k=2, **WINDOW), ["ts"])
    on = [windgate.eq("k", "k")]
    joined = wspark.band_join(df, right_df, time="ts", window="1 minute", on=on)
    want = windgate.band_join(t, right, time="ts", window="1 minute", on=on)
    _same(joined, want, ["left_ts", "right_ts", "ts"])
    sessions = windgate.Pipeline().sessionize(key="k", time="ts", gap="2m")
    out = wspark.run_pipeline(df, sessions, partition_by="k", order_by="ts")
    _same(out, sessions.run(t, sequential=True), ["session_start", "session_end"])


def test_timestamps_with_a_time_zone_stay_instants_in_a_new_york_session(spark):
    from windgate import spark as wspark

    t = _ntz_events(tz="UTC")
    df = spark.createDataFrame(t)
    assert dict(df.dtypes)["ts"] == "timestamp"
    aggs = {"*": "count", "ts": ["max"]}
    with _new_york(spark):
        for by in ("k", None):
            got = wspark.window_aggregate(df, by=by, aggs=aggs, **WINDOW)
            assert dict(got.dtypes)["window_start"] == "timestamp"
            want = windgate.window_aggregate(t, by=by, aggs=aggs, **WINDOW)
            got = got.toArrow()  # New York times of the same instants: cast to UTC, they are equal
            assert _sorted(got.cast(want.schema)).equals(_sorted(want))


def test_a_streaming_dataframe_is_refused_at_call_time(spark):
    from windgate import spark as wspark

    stream = (
        spark.readStream.format("rate").option("rowsPerSecond", 1).load().withColumnRenamed("timestamp", "ts")
    )
    assert stream.isStreaming
    batch = spark.createDataFrame(_ntz_events(n=10, tz="UTC"))
    # The windowed helpers take a streaming DataFrame, with a lateness bound (Spark's watermark).
    windowed = [
        lambda: wspark.window_aggregate(stream, aggs={"*": "count"}, **WINDOW),
        lambda: wspark.window_aggregate(stream, by="value", aggs={"*": "count"}, **WINDOW),
        lambda: wspark.skyline(stream, dims="value", **WINDOW),
        lambda: wspark.top_dominant(stream, dims="value", delta=1, **WINDOW),
        lambda: wspark.topk(stream, score="value", k=1, **WINDOW),
    ]
    for fn in windowed:
        with pytest.raises(InvalidParameterError, match=r"^lateness: a streaming DataFrame needs a fixed"):
            fn()
    with pytest.raises(InvalidParameterError, match=r"^lateness: only a streaming DataFrame takes it"):
        wspark.window_aggregate(batch, aggs={"*": "count"}, lateness="1s", **WINDOW)
    # The band join takes two streams (with a lateness), not a stream with a batch DataFrame.
    with pytest.raises(InvalidParameterError, match=r"^lateness: a streaming DataFrame needs a fixed"):
        wspark.band_join(stream, stream, time="ts", window="1s")
    with pytest.raises(InvalidParameterError, match=r"^lateness, on_late, shards: only for streaming"):
        wspark.band_join(batch, batch, time="ts", window="1s", lateness="1s")
    for param, fn in {
        "left_df": lambda: wspark.band_join(stream, batch, time="ts", window="1s"),
        "right_df": lambda: wspark.band_join(batch, stream, time="ts", window="1s"),
    }.items():
        with pytest.raises(
            InvalidParameterError, match=rf"^{param}: a streaming DataFrame joins only.*foreachBatch"
        ):
            fn()
    with pytest.raises(
        InvalidParameterError, match=r"^df: streaming DataFrames are not supported yet.*foreachBatch"
    ):
        wspark.run_pipeline(stream, windgate.Pipeline())


def test_a_non_dataframe_is_a_type_error_naming_the_parameter():
    from windgate import spark as wspark

    with pytest.raises(windgate.ColumnTypeError, match="df: expected a pyspark.sql.DataFrame, got list"):
        wspark.run_pipeline([1, 2], windgate.Pipeline())


# A driver whose executors run each given Python: the first helper call must raise SparkEnvironmentError
# saying what to set.
_NO_WINDGATE_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession
    import windgate
    from windgate import spark as wspark

    seen = {}
    for name, python in json.loads(sys.argv[1]).items():
        os.environ["PYSPARK_PYTHON"] = python  # what a SparkContext reads when it starts
        spark = (SparkSession.builder.master("local[1]").config("spark.pyspark.python", python)
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("OFF")
        df = spark.range(10).selectExpr("id AS ts", "id % 2 AS k")
        try:
            wspark.window_aggregate(df, time="ts", size=4, by="k", aggs={"*": "count"})
            seen[name] = "no error"
        except windgate.errors.SparkEnvironmentError as exc:
            seen[name] = "SparkEnvironmentError: " + str(exc)
        except Exception as exc:
            seen[name] = f"{type(exc).__name__}: {exc}"[:2000]
        spark.stop()
    print("RESULT " + json.dumps(seen))
    """
)


def _python_without_windgate(root: Path) -> str:
    """A `python -m venv` with this one's packages (pyarrow, pandas, ...) but not windgate."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    mine = Path(sysconfig.get_paths()["purelib"])
    theirs = next(root.glob("lib/python*/site-packages"))
    for entry in mine.iterdir():
        if not entry.name.lower().startswith("windgate") and not (theirs / entry.name).exists():
            (theirs / entry.name).symlink_to(entry)
    return str(root / "bin" / "python")


def test_executors_without_windgate_are_reported_with_what_to_set(tmp_path):
    pythons = {"venv_without_windgate": _python_without_windgate(tmp_path / "venv")}
    bare = Path(getattr(sys, "_base_executable", "") or "/usr/bin/python3")
    if bare.exists():
        pythons["bare_interpreter"] = str(bare)  # no pyarrow either
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_REMOTE")}
    import json

    proc = subprocess.run(
        [sys.executable, "-c", _NO_WINDGATE_DRIVER, json.dumps(pythons)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, proc.stderr[-4000:]
    seen = json.loads(line[len("RESULT ") :])
    assert "No module named 'windgate'" in seen["venv_without_windgate"], seen
    if "bare_interpreter" in seen:  # here usually earlier, on the Arrow UDF's own "No module named 'pyarrow'"
        assert "No module named" in seen["bare_interpreter"], seen
    for name, message in seen.items():
        assert message.startswith("SparkEnvironmentError: the Spark executors cannot import windgate"), (
            name,
            message,
        )
        assert "PYSPARK_PYTHON" in message and "spark.archives" in message, message
