"""Child processes for the Spark cluster tests: started in their own process group (and, on Linux, told to
die with the test process), and stopped group-wide so that no JVM outlives the test that started it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# Short-lived test JVMs on few cores: the C1 compiler only (a third of the CPU time of a full JIT warm-up
# for these small jobs) and one GC thread.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def java_missing() -> str | None:
    """Why Spark cannot run here, or None."""
    if os.environ.get("JAVA_HOME") and Path(os.environ["JAVA_HOME"], "bin", "java").exists():
        return None
    return (
        None if shutil.which("java") else "Java is not installed (Spark needs Java 17 on PATH or JAVA_HOME)"
    )


def spark_home() -> Path:
    """The installed pyspark package: it ships Spark's jars, bin/ and sbin/."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (Linux prctl PR_SET_PDEATHSIG)."""
    os.setsid()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a Spark child: this interpreter for Python workers, no Connect mode inherited."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(
        SPARK_HOME=str(spark_home()),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Starts ``cmd`` in a new process group, stdout and stderr to ``log``, no stdin."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env or child_env(),
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            start_new_session=not sys.platform.startswith("linux"),
        )


def stop(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM to the whole process group, SIGKILL after ``grace`` seconds; reaps the leader."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _group_alive(proc.pid):
                return
            time.sleep(0.2)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tail(log: Path, chars: int = 4000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def run(cmd: list[str], log: Path, timeout: float, env: dict[str, str] | None = None) -> int:
    """Runs ``cmd`` to completion (or ``timeout``), then stops whatever it left in its process group."""
    proc = start(cmd, log, env)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1
    finally:
        stop(proc, grace=10.0)
