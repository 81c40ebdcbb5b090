"""The core crate's modules import downward only: `tools/check_layers.py` passes on the sources, and fails
on a copy with a forbidden import (so the check is not vacuous)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "check_layers.py"
SRC = ROOT / "crates" / "windgate-core" / "src"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


@pytest.fixture
def src_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "src"
    shutil.copytree(SRC, dst)
    return dst


def inject(path: Path, line: str) -> None:
    """Puts `line` after the file's module docs (where imports go)."""
    text = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, t in enumerate(text) if not t.startswith("//!"))
    text.insert(at, line + "\n")
    path.write_text("".join(text), encoding="utf-8")


def test_core_layers_hold():
    r = run()
    assert r.returncode == 0, r.stderr
    assert "layers: ok" in r.stdout


def test_graph_lists_every_layer():
    r = run("--graph", "--depth", "2")
    assert r.returncode == 0, r.stderr
    assert "# foundation" in r.stdout and "# operators" in r.stdout
    assert any(line.startswith("aggregate::") for line in r.stdout.splitlines())


def test_catches_an_upward_import(src_copy: Path):
    inject(src_copy / "order" / "kslack.rs", "use crate::aggregate::WindowAggregateOptions;")
    r = run("--src", str(src_copy))
    assert r.returncode == 1
    assert "order/kslack.rs" in r.stderr
    assert "crate::aggregate::WindowAggregateOptions" in r.stderr
    assert "higher layer" in r.stderr


def test_catches_a_grouped_inline_and_super_import(src_copy: Path):
    # A `use crate::{a, b}` group, an inline path, and a `super::super::` path out of the operator.
    inject(src_copy / "time.rs", "use crate::{error::Result, runtime::farm::Farm};")
    inject(src_copy / "threads.rs", "const _: usize = crate::order::admission::DEFAULT_CREDITS as usize;")
    inject(src_copy / "join" / "options.rs", "use super::super::aggregate::Strategy;")
    r = run("--src", str(src_copy))
    assert r.returncode == 1
    assert "time.rs" in r.stderr and "crate::runtime::farm::Farm" in r.stderr
    assert "threads.rs" in r.stderr and "crate::order::admission::DEFAULT_CREDITS" in r.stderr
    assert "join/options.rs" in r.stderr and "another operator" in r.stderr
    assert "error::Result" not in r.stderr


def test_catches_an_operator_importing_another(src_copy: Path):
    inject(src_copy / "preference" / "options.rs", "use crate::join::options::Bounds;")
    r = run("--src", str(src_copy))
    assert r.returncode == 1
    assert "preference/options.rs" in r.stderr and "another operator" in r.stderr


def test_ignores_comments_and_strings(src_copy: Path):
    inject(
        src_copy / "order" / "kslack.rs",
        '// use crate::aggregate::Strategy;\nconst _: &str = "crate::aggregate";',
    )
    r = run("--src", str(src_copy))
    assert r.returncode == 0, r.stderr


def test_unplaced_module_is_an_error(src_copy: Path):
    (src_copy / "stray.rs").write_text("use crate::error::Result;\n", encoding="utf-8")
    r = run("--src", str(src_copy))
    assert r.returncode == 1
    assert "in no layer" in r.stderr
