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
    if ".remote(" in code:
        # A Spark Connect client cannot share a process with the classic session the other tests use;
        # tests/test_spark_cluster.py runs every helper through a Connect server in a process of its own.
        pytest.skip("Spark Connect example: covered by tests/test_spark_cluster.py")
    monkeypatch.chdir(tmp_path)
    if "spark" in code:
        request.getfixturevalue("spark")  # the tests' shared local session; local_session() reuses it
        if "smartgrid.parquet" in code:
            import pyarrow.parquet as pq

            from windgate.datasets import smartgrid

            pq.write_table(smartgrid(20_000), "smartgrid.parquet")
            # Spark resolves relative paths against the JVM's working directory, not this test's.
            code = code.replace('"smartgrid.parquet"', repr(str(tmp_path / "smartgrid.parquet")))
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
