"""The README's Python examples run exactly as printed (the PySpark ones on generated smart-grid data)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _ids():
    return [f"block{i}-{b.strip().splitlines()[0][:40]}" for i, b in enumerate(BLOCKS)]


@pytest.mark.parametrize("code", BLOCKS, ids=_ids())
def test_readme_example_runs(code, tmp_path, monkeypatch, request):
    monkeypatch.chdir(tmp_path)
    if "spark" in code:
        request.getfixturevalue("spark")  # the tests' shared local session; local_session() reuses it
        if "smartgrid.parquet" in code:
            import pyarrow.parquet as pq

            from windgate.datasets import smartgrid

            pq.write_table(smartgrid(20_000), "smartgrid.parquet")
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
