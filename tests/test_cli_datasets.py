"""The smart-grid generator and the CLI's generate and aggregate commands."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import windgate
from windgate import datasets
from windgate.cli import main


def test_smartgrid_is_deterministic_and_disorder_stays_within_bound():
    a = datasets.smartgrid(20_000, households=4, plugs_per_household=5, seed=7)
    b = datasets.smartgrid(20_000, households=4, plugs_per_household=5, seed=7)
    assert a.equals(b)
    assert a.column("plug_id").to_numpy().max() < 20
    d = datasets.smartgrid(20_000, households=4, plugs_per_household=5, seed=7, disorder=3.0)
    agg = windgate.WindowAggregator(time="ts", size="10s", by="plug_id", aggs={"*": "count"}, lateness="3s")
    agg.push(d)
    assert agg.stats["late_rows"] == 0
    sources = datasets.smartgrid_sources(10_000, sources=3, households=2, plugs_per_household=5)
    assert sum(s.num_rows for s in sources) == 10_000


def test_cli_generate_and_aggregate(tmp_path, capsys):
    data = tmp_path / "sg.parquet"
    out = tmp_path / "agg.parquet"
    assert main(["generate", "smartgrid", "--rows", "30000", "--households", "2", "--out", str(data)]) == 0
    code = main(
        [
            "aggregate",
            "--input",
            str(data),
            "--out",
            str(out),
            "--time",
            "ts",
            "--size",
            "60s",
            "--slide",
            "10s",
            "--by",
            "plug_id",
            "--agg",
            "*=count",
            "--agg",
            "value=sum,max",
        ]
    )
    assert code == 0
    got = pq.read_table(out)
    want = windgate.window_aggregate(
        pq.read_table(data),
        time="ts",
        size="60s",
        slide="10s",
        by="plug_id",
        aggs={"*": "count", "value": ["sum", "max"]},
    )
    assert got.equals(want.cast(got.schema))


def test_cli_bad_input_is_one_clean_line(tmp_path):
    data = tmp_path / "sg.parquet"
    pq.write_table(pa.table({"ts": [1, 2]}), data)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "windgate",
            "aggregate",
            "--input",
            str(data),
            "--out",
            str(tmp_path / "o.parquet"),
            "--time",
            "ts",
            "--size",
            "0",
            "--agg",
            "*=count",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "size: expected a positive window size" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("bad", [["generate", "smartgrid", "--rows", "-5", "--out", "x.parquet"]])
def test_cli_rejects_bad_generator_arguments(bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(bad) == 2
