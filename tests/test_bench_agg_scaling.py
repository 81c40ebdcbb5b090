"""Smoke test of the window-aggregation scaling benchmark (benches.peers.agg_scaling): its quick mode on a
tiny row count writes the JSON and the Markdown, and every peer's answer matches windgate's."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("polars")
pytest.importorskip("windgate")

from benches.peers import agg_scaling  # noqa: E402  (after the skips above)


def test_quick_run_writes_reports_without_mismatch(tmp_path):
    rc = agg_scaling.main(["--quick", "--rows", "20000", "--out", str(tmp_path)])
    md = (tmp_path / "agg_scaling.md").read_text()
    doc = json.loads((tmp_path / "agg_scaling.json").read_text())
    assert "| MISMATCH |" not in md  # a cell of a table (the notes explain the word)
    assert rc == 0
    tables = {r["table"] for r in doc["results"]}
    assert tables == {"1", "2", "3", "4"}
    for r in doc["results"]:
        assert not r.get("error"), f"{r['engine']} in table {r['table']} {r['case']}: {r['error']}"
        if r["engine"] != "windgate" and r.get("seconds") and not r["engine"].startswith("numpy"):
            assert r["check"].startswith("ok"), (
                f"{r['engine']} in table {r['table']} {r['case']}: {r['check']}"
            )
    for heading in ("panes per window", "against keys", "against aggregates", "against threads"):
        assert heading in md
    assert "windgate / best peer" in md
