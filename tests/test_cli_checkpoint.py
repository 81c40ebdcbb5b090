"""``windgate aggregate --checkpoint``: killed (SIGKILL) or interrupted (Ctrl-C) mid-run, the same command
resumes from the checkpoint and writes the same output file as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

QUERY = [
    "--size", "60s", "--slide", "10s", "--by", "plug_id",
    "--agg", "*=count", "--agg", "value=sum,max,first", "--lateness", "5s",
]  # fmt: skip


def windgate(*args: str) -> list[str]:
    return [sys.executable, "-m", "windgate", *args]


@pytest.fixture(scope="module")
def readings(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ckpt") / "in.parquet"
    cmd = windgate("generate", "smartgrid", "--rows", "400000", "--disorder", "5", "--out", str(path))
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return path


@pytest.fixture(scope="module")
def uninterrupted(readings: Path) -> Path:
    out = readings.with_name("whole.parquet")
    subprocess.run(
        windgate("aggregate", "--input", str(readings), "--out", str(out), *QUERY),
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def checkpointed(readings: Path, out: Path, ckpt: Path, *extra: str) -> list[str]:
    return windgate(
        "aggregate", "--input", str(readings), "--out", str(out), *QUERY,
        "--batch-rows", "2000", "--checkpoint", str(ckpt), "--checkpoint-interval", "0", *extra,
    )  # fmt: skip


def stop_after_progress(cmd: list[str], ckpt: Path, sig: int) -> subprocess.CompletedProcess:
    """Starts ``cmd`` and sends ``sig`` once a few checkpoints were committed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        state = ckpt / "state"
        if state.exists() and len(list(ckpt.glob("part-*.parquet"))) >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill", "ctrl-c"])
def test_a_stopped_run_resumes_to_the_same_output(readings, uninterrupted, tmp_path, sig):
    out, ckpt = tmp_path / "out.parquet", tmp_path / "ckpt"
    stopped = stop_after_progress(checkpointed(readings, out, ckpt), ckpt, sig)
    assert stopped.returncode != 0, "the run finished before it could be stopped"
    assert not out.exists()
    if sig == signal.SIGINT:
        assert stopped.returncode == 130
        assert "run the same command to resume" in stopped.stderr
    rerun_cmd = checkpointed(readings, out, ckpt, "--threads", "1")
    rerun = subprocess.run(rerun_cmd, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert "Resuming from the checkpoint" in rerun.stdout
    assert pq.read_table(out).equals(pq.read_table(uninterrupted))
    assert not ckpt.exists()


def test_a_checkpoint_of_another_query_is_refused(readings, tmp_path):
    out, ckpt = tmp_path / "out.parquet", tmp_path / "ckpt"
    stopped = stop_after_progress(checkpointed(readings, out, ckpt), ckpt, signal.SIGKILL)
    assert stopped.returncode != 0
    cmd = checkpointed(readings, out, ckpt)
    cmd[cmd.index("60s")] = "30s"
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 2
    assert "--checkpoint" in r.stderr and "other arguments (size)" in r.stderr
