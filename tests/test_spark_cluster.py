"""Every windgate.spark helper on a multi-process cluster and through Spark Connect, against the local call.

* ``local-cluster[2,1,1024]``: Spark's standalone deploy code (a Master and two Workers inside the driver
  JVM) with each executor its own JVM and its own Python workers, started from the installed pyspark;
* Spark Connect: a local Connect server (``spark-submit --class ...SparkConnectServer``) on a free port and
  a ``SparkSession.builder.remote("sc://127.0.0.1:PORT")`` client.

Each runs tests/spark_cluster_job.py in a subprocess (a process holds one SparkContext, and a Connect client
must not share a process with the classic local[2] session of the other Spark tests), once per module; each
helper is one test over its result. Processes are started in their own process group and stopped group-wide
at the end, pass or fail.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from pathlib import Path

import pytest

import spark_procs

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(spark_procs.java_missing() is not None, reason=str(spark_procs.java_missing())),
]

JOB = Path(__file__).with_name("spark_cluster_job.py")
HELPERS = [
    "window_aggregate_keyed",
    "window_aggregate_unkeyed",
    "skyline",
    "top_dominant",
    "topk",
    "band_join",
    "run_pipeline",
]
JOB_TIMEOUT = 900.0
SERVER_TIMEOUT = 300.0


def _run_job(where: list[str], tmp: Path) -> dict:
    out, log = tmp / "results.json", tmp / "job.log"
    code = spark_procs.run([sys.executable, str(JOB), *where, "--out", str(out)], log, JOB_TIMEOUT)
    if not out.exists():
        pytest.fail(f"the cluster job exited with {code} and no results:\n{spark_procs.tail(log)}")
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def cluster_results(tmp_path_factory):
    pytest.importorskip("pyspark")
    results = _run_job(["--master", "local-cluster[2,1,1024]"], tmp_path_factory.mktemp("cluster"))
    # local-cluster's Workers keep each executor's directory (logs) under $SPARK_HOME/work, here inside the
    # installed pyspark package, and take no other work directory: remove this run's.
    app = results.get("session", {}).get("app_id")
    if app:
        work = spark_procs.spark_home() / "work"
        shutil.rmtree(work / app, ignore_errors=True)
        with contextlib.suppress(OSError):
            work.rmdir()  # only if no other run's directory is left
    return results


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """A Spark Connect server (local[2]) on a free port; its URL; stopped (workers too) at the end."""
    pytest.importorskip("pyspark")
    pytest.importorskip("grpc", reason="Spark Connect needs the spark extra's grpcio")
    home = spark_procs.spark_home()
    port = spark_procs.free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    cmd = [
        str(home / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        "windgate-connect-tests",
        "--master",
        "local[2]",
        "--driver-memory",
        "1g",
        "--driver-java-options",
        spark_procs.QUICK_JVM,
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        "spark.sql.shuffle.partitions=4",
        "--conf",
        "spark.ui.enabled=false",
    ]
    proc = spark_procs.start(cmd, log)
    try:
        deadline = time.monotonic() + SERVER_TIMEOUT
        while "Spark Connect server started" not in spark_procs.tail(log, 20_000):
            if proc.poll() is not None:
                pytest.fail(
                    f"the Spark Connect server exited with {proc.returncode}:\n{spark_procs.tail(log)}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"no Spark Connect server after {SERVER_TIMEOUT:.0f}s:\n{spark_procs.tail(log)}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        spark_procs.stop(proc)


@pytest.fixture(scope="module")
def connect_results(connect_server, tmp_path_factory):
    return _run_job(["--remote", connect_server], tmp_path_factory.mktemp("connect-job"))


def test_cluster_runs_tasks_in_two_executor_processes(cluster_results):
    assert cluster_results["executors"]["ok"], cluster_results["executors"]["detail"]


@pytest.mark.parametrize("helper", HELPERS)
def test_cluster_helper_matches_local_call(cluster_results, helper):
    result = cluster_results[helper]
    assert result["ok"], result["detail"]


def test_connect_session_is_a_connect_session(connect_results):
    assert connect_results["session"]["detail"].startswith("pyspark.sql.connect"), connect_results["session"]


@pytest.mark.parametrize("helper", HELPERS)
def test_connect_helper_matches_local_call(connect_results, helper):
    result = connect_results[helper]
    assert result["ok"], result["detail"]
