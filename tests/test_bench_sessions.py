"""Smoke test of the session-window benchmark (benches.peers.sessions): a tiny run writes the JSON and the
Markdown, and DuckDB's and Polars' sessions equal windgate's."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("polars")
pytest.importorskip("windgate")

from benches.peers import sessions  # noqa: E402  (after the skips above)


def test_tiny_run_checks_every_peer(tmp_path):
    argv = ["--rows", "20000", "--keys", "50", "--gap", "3000", "--repeat", "1", "--out", str(tmp_path)]
    rc = sessions.main([*argv, "--engines", "windgate,duckdb,polars"])
    doc = json.loads((tmp_path / "sessions.json").read_text())
    assert rc == 0
    assert (tmp_path / "sessions.md").exists()
    checks = {r["engine"]: r["check"] for r in doc["results"]}
    assert checks == {"windgate": "reference", "duckdb": "ok", "polars": "ok"}
