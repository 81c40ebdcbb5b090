"""``windgate demo`` at a tiny size: every plan runs, every answer equals Spark's, the report and the plot are
written, and a second run reuses the Parquet file instead of generating it again."""

from __future__ import annotations

import json

import pytest

from windgate.cli import main


@pytest.mark.spark
def test_demo_at_a_tiny_size(spark, tmp_path, capsys):
    # The `spark` fixture's session is running: the demo reuses it and must not stop it.
    args = ["demo", "--rows", "20000", "--out", str(tmp_path), "--repeat", "1", "--k", "2"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "generate 20,000 smart-grid rows" in first
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["all_equal"] and report["rows"] == 20_000
    engines = [(r["family"], r["engine"]) for r in report["results"]]
    assert len(engines) == 6 and sum(e == "windgate.spark" for _, e in engines) == 2
    for r in report["results"]:
        assert r["ok"] and r["seconds"] > 0 and r["out_rows"] > 0, r
        assert r["check"] == "reference" or r["check"].startswith("equal"), r
    assert (tmp_path / "demo.png").stat().st_size > 0
    assert any(s["step"].startswith("write Parquet") for s in report["steps"])

    assert main([*args, "--check-every", "3"]) == 0  # the file is reused; answers compared on a sample
    second = capsys.readouterr().out
    assert "reusing" in second and "generate 20,000" not in second
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["all_equal"] and "key % 3 == 0" in report["checked"]
    assert not any(s["step"].startswith("write Parquet") for s in report["steps"])
    assert spark.range(3).count() == 3  # the shared session still works
