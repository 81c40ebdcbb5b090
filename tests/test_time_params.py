"""Time parameters (docs/time.md): durations only on timestamp columns, integers on integer columns, negative
offsets with Spark's windows, timedelta / numpy / pandas durations, and timestamps that read as ISO 8601."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

import windgate
from windgate import _specs
from windgate.errors import InvalidParameterError, LateRowError

NS = pa.timestamp("ns", tz="UTC")
T0 = 1_717_243_200  # 2024-06-01T12:00:00Z in seconds


def ts_table(unit="ns", tz="UTC", seconds=(0, 30, 65, 130)):
    scale = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    return pa.table(
        {
            "ts": pa.array([(T0 + s) * scale for s in seconds], pa.timestamp(unit, tz=tz)),
            "k": [1, 1, 2, 1][: len(seconds)],
            "v": [0.5, 1.5, 2.0, 3.0][: len(seconds)],
            "x": [1.0, 2.0, 3.0, 4.0][: len(seconds)],
            "y": [4.0, 3.0, 2.0, 1.0][: len(seconds)],
        }
    )


def int_table():
    return pa.table({"ts": [0, 30, 65, 130], "k": [1, 1, 2, 1], "v": [0.5, 1.5, 2.0, 3.0], "x": [1.0] * 4})


# Every windowed operator, called with the window keywords ``kw`` on ``t``.
OPERATORS = {
    "window_aggregate": lambda t, **kw: windgate.window_aggregate(t, time="ts", aggs={"*": "count"}, **kw),
    "skyline": lambda t, **kw: windgate.skyline(t, time="ts", dims=["x"], **kw),
    "topk": lambda t, **kw: windgate.topk(t, time="ts", score="x", k=1, **kw),
    "WindowAggregator": lambda t, **kw: windgate.WindowAggregator(time="ts", aggs={"*": "count"}, **kw).push(
        t
    ),
}


@pytest.mark.parametrize("op", sorted(OPERATORS))
@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("size", 300_000_000_000),
        ("slide", 60_000_000_000),
        ("offset", 5),
        ("lateness", 5),
        ("size", np.int64(7)),
    ],
)
def test_plain_integers_are_rejected_on_timestamp_columns(op, param, value):
    kw = {"size": "10m", param: value}
    with pytest.raises(InvalidParameterError) as e:
        OPERATORS[op](ts_table(), **kw)
    msg = str(e.value)
    assert msg.startswith(f"{param}: the time column 'ts' is a timestamp[ns]"), msg
    assert f"pass a duration such as {param}=" in msg and "instead of a plain integer" in msg, msg


def test_the_error_suggests_the_duration_the_integer_meant():
    with pytest.raises(InvalidParameterError) as e:
        windgate.window_aggregate(ts_table(), time="ts", size=300_000_000_000, aggs={"*": "count"})
    assert str(e.value) == (
        "size: the time column 'ts' is a timestamp[ns]; pass a duration such as size=\"5m\" "
        "(300000000000 ns) instead of a plain integer"
    )
    with pytest.raises(InvalidParameterError, match=r'size="3d12h" \(302400000000 us\)'):
        windgate.window_aggregate(ts_table("us"), time="ts", size=302_400_000_000, aggs={"*": "count"})


def test_unitless_strings_are_rejected_on_timestamp_columns():
    with pytest.raises(InvalidParameterError, match=r'lateness: the time column .* lateness="5ns"'):
        windgate.window_aggregate(ts_table(), time="ts", size="1m", lateness="5", aggs={"*": "count"})


def test_band_join_rejects_plain_integers_on_timestamp_columns():
    t = ts_table()
    for kw in ({"window": 5}, {"lower": -5, "upper": "1s"}, {"window": "1s", "lateness": 3}):
        with pytest.raises(InvalidParameterError, match="instead of a plain integer"):
            windgate.band_join(t, t, time="ts", **kw)
    assert windgate.band_join(t, t, time="ts", window=0).num_rows == 4
    assert windgate.band_join(t, t, time="ts", lower="-30s", upper="0s").num_rows == 5


def test_zero_is_allowed_and_integer_columns_take_integers():
    out = windgate.window_aggregate(
        ts_table(), time="ts", size="1m", offset=0, lateness=0, aggs={"*": "count"}
    )
    assert out["count"].to_pylist() == [2, 1, 1]
    out = windgate.window_aggregate(
        int_table(), time="ts", size=60, offset=-10, lateness=5, aggs={"*": "count"}
    )
    assert out["window_start"].to_pylist() == [-10, 50, 110]
    with pytest.raises(InvalidParameterError, match="plain integers"):
        windgate.window_aggregate(int_table(), time="ts", size="1m", aggs={"*": "count"})


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (dt.timedelta(hours=-1), "-1h"),
        (dt.timedelta(hours=1, minutes=30), "1h30m"),
        (dt.timedelta(milliseconds=250), "250ms"),
        (dt.timedelta(days=7), "7d"),
        (dt.timedelta(0), "0s"),
        (np.timedelta64(5, "m"), "5m"),
        (np.timedelta64(-90, "s"), "-1m30s"),
        (np.timedelta64(1500, "ns"), "1us500ns"),
        ("5m", "5m"),
        (3, 3),
    ],
)
def test_durations_read_as_the_user_would_write_them(value, text):
    assert _specs.span(value, "size") == text


def test_pandas_timedelta_keeps_nanoseconds():
    pd = pytest.importorskip("pandas")
    assert _specs.span(pd.Timedelta("1h30m"), "size") == "1h30m"
    assert _specs.span(pd.Timedelta(nanoseconds=1500), "size") == "1us500ns"
    assert _specs.span(pd.Timedelta(hours=-1), "offset") == "-1h"


def test_timedelta_numpy_and_pandas_durations_give_the_same_windows():
    pd = pytest.importorskip("pandas")
    want = windgate.window_aggregate(ts_table(), time="ts", size="1m", aggs={"*": "count"})
    for size in (dt.timedelta(minutes=1), np.timedelta64(1, "m"), pd.Timedelta(minutes=1)):
        assert windgate.window_aggregate(ts_table(), time="ts", size=size, aggs={"*": "count"}).equals(want)


def test_negative_durations_are_rejected_where_no_sign_makes_sense():
    for param in ("size", "slide", "lateness"):
        kw = {"size": "10m", param: "-1m"}
        with pytest.raises(
            InvalidParameterError, match=f'^{param}: expected a non-negative duration, got "-1m"'
        ):
            windgate.window_aggregate(ts_table(), time="ts", aggs={"*": "count"}, **kw)
    with pytest.raises(InvalidParameterError, match='^size: expected a non-negative duration, got "-1h"'):
        windgate.window_aggregate(ts_table(), time="ts", size=dt.timedelta(hours=-1), aggs={"*": "count"})


def test_errors_quote_what_the_user_typed():
    with pytest.raises(InvalidParameterError, match=r'offset: cannot read duration "-1 fortnight"'):
        windgate.window_aggregate(
            ts_table(), time="ts", size="1h", offset="-1 fortnight", aggs={"*": "count"}
        )


# ------------------------------------------------------------------------------ negative offsets


def spark_windows(t: int, size: int, slide: int, start: int) -> list[int]:
    """The starts of the windows Spark's ``window(t, size, slide, startTime=start)`` puts ``t`` in: windows
    ``[k*slide + start, k*slide + start + size)`` for every integer ``k`` (brute force)."""
    return [
        k * slide + start for k in range(-1000, 1000) if k * slide + start <= t < k * slide + start + size
    ]


@pytest.mark.parametrize(("size", "slide"), [(60, 60), (60, 20), (45, 15)])
@pytest.mark.parametrize("offset", [-50, -15, -1, 0, 7, 25, 130])
def test_negative_offsets_give_sparks_windows(size, slide, offset):
    rng = np.random.default_rng(size * 1000 + slide * 10 + offset)
    secs = sorted(int(s) for s in rng.integers(-200, 400, 40))
    t = pa.table({"ts": pa.array([(T0 + s) * 10**9 for s in secs], NS)})
    out = windgate.window_aggregate(
        t,
        time="ts",
        size=f"{size}s",
        slide=f"{slide}s",
        offset=dt.timedelta(seconds=offset),
        aggs={"*": "count"},
    )
    got = {
        (s.timestamp() - T0, c)
        for s, c in zip(out["window_start"].to_pylist(), out["count"].to_pylist(), strict=True)
    }
    want: dict[int, int] = {}
    for s in secs:
        for w in spark_windows(s, size, slide, offset):
            want[w] = want.get(w, 0) + 1
    assert got == {(float(w), c) for w, c in want.items()}


def test_offset_minus_one_hour():
    t = ts_table(seconds=(0, 3599, 3600, 7300))
    a = windgate.window_aggregate(t, time="ts", size="2h", offset="-1h", aggs={"*": "count"})
    b = windgate.window_aggregate(t, time="ts", size="2h", offset=dt.timedelta(hours=-1), aggs={"*": "count"})
    c = windgate.window_aggregate(t, time="ts", size="2h", offset="1h", aggs={"*": "count"})
    assert a.equals(b) and a.equals(c)  # -1h and +1h are the same grid of 2h windows
    starts = [w.isoformat() for w in a["window_start"].to_pylist()]
    assert starts == ["2024-06-01T11:00:00+00:00", "2024-06-01T13:00:00+00:00"]


# ------------------------------------------------------------------------------ readable timestamps


@pytest.mark.parametrize(
    ("tz", "want"),
    [
        ("UTC", "2024-06-01T12:02:59.810Z"),
        ("Europe/Berlin", "2024-06-01T14:02:59.810+02:00"),
        ("+05:30", "2024-06-01T17:32:59.810+05:30"),
        (None, "2024-06-01T12:02:59.810"),
    ],
)
def test_stats_give_the_watermark_in_the_columns_zone(tz, want):
    ms = (T0 + 180) * 1000 - 190  # 12:02:59.810
    t = pa.table({"ts": pa.array([ms], pa.timestamp("ms", tz=tz)), "x": [1.0]})
    agg = windgate.WindowAggregator(time="ts", size="1m", aggs={"*": "count"}, lateness="0s")
    agg.push(t)
    assert agg.stats["watermark"] == ms
    assert agg.stats["watermark_time"] == want
    q = windgate.SkylineQuery(time="ts", size="1m", dims=["x"], lateness="0s")
    q.push(t)
    assert q.stats["watermark_time"] == want
    j = windgate.BandJoiner(time="ts", window="1s", lateness="0s")
    j.push(t, "left")
    assert j.stats["watermark_time_left"] == want and j.stats["watermark_time_right"] is None


def test_integer_columns_keep_integer_watermarks():
    agg = windgate.WindowAggregator(time="ts", size=60, aggs={"*": "count"}, lateness=5)
    agg.push(int_table())
    assert agg.stats["watermark"] == 125
    assert agg.stats["watermark_time"] == "125"


def test_late_row_errors_print_timestamps():
    t = pa.table(
        {"ts": pa.array([(T0 + 180) * 1000, (T0 + 100) * 1000], pa.timestamp("ms", tz="Europe/Berlin"))}
    )
    agg = windgate.WindowAggregator(
        time="ts", size="1m", aggs={"*": "count"}, lateness="30s", on_late="error"
    )
    with pytest.raises(LateRowError) as e:
        agg.push(t)
    msg = str(e.value)
    assert "ts = 2024-06-01T14:01:40+02:00, below the watermark 2024-06-01T14:02:30+02:00" in msg, msg
    j = windgate.BandJoiner(time="ts", window="1s", lateness="30s", on_late="error")
    with pytest.raises(LateRowError) as e:
        j.push(t, "left")
    msg = str(e.value)
    assert (
        "time 2024-06-01T14:01:40+02:00 below the watermark 2024-06-01T14:02:30+02:00 (lateness 30s)" in msg
    )
    naive = pa.table({"ts": pa.array([(T0 + 180) * 10**6, (T0 + 100) * 10**6], pa.timestamp("us"))})
    agg = windgate.WindowAggregator(
        time="ts", size="1m", aggs={"*": "count"}, lateness="30s", on_late="error"
    )
    with pytest.raises(
        LateRowError, match=r"ts = 2024-06-01T12:01:40, below the watermark 2024-06-01T12:02:30 "
    ):
        agg.push(naive)


# ------------------------------------------------------------------------------ the command line


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "windgate", *args], capture_output=True, text=True, check=False, timeout=120
    )


@pytest.fixture
def parquet_pair(tmp_path):
    import pyarrow.parquet as pq

    ts = tmp_path / "ts.parquet"
    pq.write_table(ts_table(), ts)
    ints = tmp_path / "int.parquet"
    pq.write_table(int_table(), ints)
    return ts, ints


@pytest.mark.parametrize("flag", ["--lateness", "--size", "--offset"])
def test_cli_rejects_numbers_without_a_unit_on_timestamp_columns(tmp_path, parquet_pair, flag):
    ts, _ = parquet_pair
    args = {"--size": "60s", "--lateness": "5s", "--offset": "0", flag: "5"}
    r = run_cli("aggregate", "--input", str(ts), "--out", str(tmp_path / "o.parquet"), "--agg", "*=count",
                *[x for kv in args.items() for x in kv])  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert f"InvalidParameterError: {flag} 5: the time column 'ts' is a timestamp[ns, tz=UTC]" in r.stderr
    assert "would mean 5ns" in r.stderr and f"{flag} 5s" in r.stderr


def test_cli_takes_durations_and_negative_offsets(tmp_path, parquet_pair):
    import pyarrow.parquet as pq

    ts, ints = parquet_pair
    out = tmp_path / "o.parquet"
    r = run_cli("aggregate", "--input", str(ts), "--out", str(out), "--agg", "*=count", "--size", "60s",
                "--offset=-15s", "--lateness", "5s")  # fmt: skip
    assert r.returncode == 0, r.stderr
    starts = [w.timestamp() - T0 for w in pq.read_table(out)["window_start"].to_pylist()]
    assert starts == [-15, 45, 105]
    r = run_cli("aggregate", "--input", str(ints), "--out", str(out), "--agg", "*=count", "--size", "60",
                "--lateness", "5")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out)["window_start"].to_pylist() == [0, 60, 120]
