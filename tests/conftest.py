from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local[2] Spark session for every Spark test (JVM start-up is the slow part)."""
    pytest.importorskip("pyspark")
    from windgate.spark import local_session

    os.environ.setdefault("WINDGATE_SPARK_DRIVER_MEMORY", "2g")
    session = local_session(
        "windgate-tests",
        "local[2]",
        **{"spark.sql.execution.arrow.maxRecordsPerBatch": "1000"},
    )
    yield session
    session.stop()
