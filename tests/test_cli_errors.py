"""The command line's errors, run as a subprocess (``python -m windgate ...``): a bad option value, an
unwritable or directory output and a missing or corrupt input are one ``error:`` line naming the option,
exit status 2, never a traceback; Ctrl-C is one ``interrupted`` line, status 130; zero input rows still
write a Parquet file with the output's columns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ENV = {**os.environ, "COLUMNS": "120"}
ENV.pop("WINDGATE_TRACEBACK", None)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "windgate", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


def assert_one_line_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "error" in lines[0], lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def readings(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("in") / "readings.parquet"
    pq.write_table(
        pa.table({"ts": list(range(100)), "k": [i % 3 for i in range(100)], "v": [1.0] * 100}), path
    )
    return str(path)


def aggregate(readings: str, out: str, *extra: str) -> subprocess.CompletedProcess:
    return cli("aggregate", "--input", readings, "--out", out, "--size", "10", "--agg", "v=sum", *extra)


unwritable = pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can write anywhere"
)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--batch-rows", "0"], "--batch-rows"),
        (["--batch-rows", "x"], "--batch-rows"),
        (["--compression", "bogus"], "--compression"),
        (["--threads", "-1"], "--threads"),
    ],
)
def test_bad_option_values_are_one_line(readings, tmp_path, extra, needle):
    assert_one_line_error(aggregate(readings, str(tmp_path / "o.parquet"), *extra), needle)


def test_every_subcommand_checks_its_options(tmp_path):
    out = str(tmp_path / "o")
    cases = [
        (
            ["generate", "smartgrid", "--rows", "10", "--row-group-rows", "0", "--out", out],
            "--row-group-rows",
        ),
        (["generate", "smartgrid", "--rows", "10", "--compression", "bogus", "--out", out], "--compression"),
        (["multiway", "--query", "K-OI", "--data", out, "--out", out, "--compression", "x"], "--compression"),
        (
            ["tpcxbb", "run", "--query", "q1", "--data", out, "--out", out, "--chunk-rows", "0"],
            "--chunk-rows",
        ),
        (["tpcxbb", "generate", "--out", out, "--compression", "nope"], "--compression"),
        (["demo", "--repeat", "0"], "--repeat"),
    ]
    for args, needle in cases:
        assert_one_line_error(cli(*args), needle)


def test_output_that_is_a_directory_or_unwritable(readings, tmp_path):
    assert_one_line_error(aggregate(readings, str(tmp_path)), "--out", "directory")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line_error(aggregate(readings, str(blocker / "o.parquet")), "--out")
    gen = ["generate", "smartgrid", "--rows", "10"]
    assert_one_line_error(cli(*gen, "--out", str(tmp_path)), "--out", "directory")
    assert_one_line_error(cli(*gen, "--out", str(blocker / "o.parquet")), "--out")
    assert_one_line_error(cli("generate", "bandjoin", "--rows", "10", "--out", str(blocker)), "--out")
    assert_one_line_error(cli("tpcxbb", "generate", "--rows", "10", "--out", str(blocker)), "--out")


@unwritable
def test_output_in_a_read_only_directory(readings, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert_one_line_error(aggregate(readings, str(ro / "o.parquet")), "--out")
        assert_one_line_error(
            cli("generate", "points", "--rows", "10", "--out", str(ro / "p.parquet")), "--out"
        )
    finally:
        ro.chmod(0o700)


def test_missing_or_corrupt_input(tmp_path):
    out = str(tmp_path / "o.parquet")
    assert_one_line_error(aggregate(str(tmp_path / "none.parquet"), out), "--input")
    assert_one_line_error(aggregate(str(tmp_path), out), "--input")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet PAR1")
    assert_one_line_error(aggregate(str(bad), out), "--input")
    assert not os.path.exists(out)
    tpc = tmp_path / "tpc"
    tpc.mkdir()
    (tpc / "clickstream.parquet").write_bytes(b"garbage")
    r = cli("tpcxbb", "run", "--query", "q2", "--data", str(tpc), "--out", out)
    assert_one_line_error(r, "--data")


def test_zero_input_rows_keep_the_output_schema(tmp_path):
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"ts": pa.array([], pa.int64()), "k": pa.array([], pa.int64())}), empty)
    out = tmp_path / "o.parquet"
    r = cli(
        "aggregate", "--input", str(empty), "--out", str(out), "--size", "10", "--by", "k", "--agg", "*=count"
    )
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert table.num_rows == 0
    assert "k" in table.column_names and len(table.column_names) >= 3, table.schema


def test_zero_output_rows_keep_the_output_schema(tmp_path):
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"ts": pa.array([None] * 5, pa.int64()), "k": [1, 2, 1, 2, 1]}), nulls)
    out = tmp_path / "o.parquet"
    args = ["--size", "10", "--by", "k", "--agg", "*=count", "--null-time", "drop"]
    r = cli("aggregate", "--input", str(nulls), "--out", str(out), *args)
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert table.num_rows == 0
    assert "k" in table.column_names and len(table.column_names) >= 3, table.schema


def test_ctrl_c_is_one_line_and_status_130(tmp_path):
    data = tmp_path / "big.parquet"
    assert cli("generate", "smartgrid", "--rows", "400000", "--out", str(data)).returncode == 0
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "windgate",
            "aggregate",
            "--input",
            str(data),
            "--out",
            str(tmp_path / "o.parquet"),
        ]
        + ["--size", "60s", "--slide", "1s", "--by", "plug_id", "--agg", "value=sum", "--batch-rows", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert p.stdout is not None
    p.stdout.readline()  # "Aggregating ..." : the run has started
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].endswith("interrupted"), err
    assert not (tmp_path / "o.parquet").exists()
