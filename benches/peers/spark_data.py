"""The data of the ``spark`` suite (:mod:`benches.peers.spark`): Parquet datasets written once (and reused
while their parameters match), and the one input that is not a file scan (``spark.range`` with derived
columns).

* window datasets (``window-<rows>-<keys>/``): ``ts`` (``timestamp[ms, UTC]``, uniform over ``rows / rate``
  seconds from 2013-09-01, in random order), ``key`` (int64, uniform on ``[0, keys)``), ``value`` (float64,
  uniform on ``[0, 1000)``): 4 files, each in 4 row groups, so Spark's tasks have something to split;
* join datasets (``join-<clicks>-<impressions>-.../clicks``, ``.../impressions``): ``id`` (int64, unique
  per side), ``ts`` (uniform over ``span_s`` seconds, random order), ``user`` (int64, uniform on
  ``[0, users)``), ``value`` (float64, uniform on ``[0, 1000)``), 2 files a side.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .report import log

START_MS = 1_377_993_600_000  # 2013-09-01T00:00:00Z
TS = pa.timestamp("ms", tz="UTC")
FILES = 4
ROW_GROUPS_PER_FILE = 4


def _cached(path: Path, params: dict) -> bool:
    marker = path / "_PARAMS.json"
    return marker.exists() and json.loads(marker.read_text()) == params


def _write(path: Path, params: dict, parts) -> None:
    """Write the tables of the iterable ``parts`` as ``part-<i>.parquet`` into a fresh ``path`` and mark it
    complete (a half-written dataset is never reused)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    t0 = time.perf_counter()
    for i, table in enumerate(parts):
        groups = max(1, -(-table.num_rows // ROW_GROUPS_PER_FILE))
        pq.write_table(table, path / f"part-{i:03d}.parquet", row_group_size=groups, compression="snappy")
    (path / "_PARAMS.json").write_text(json.dumps(params))
    log(f"wrote {path} in {time.perf_counter() - t0:.1f} s")


def _split(rows: int, parts: int) -> list[int]:
    return [rows // parts + (i < rows % parts) for i in range(parts)]


def window_dataset(root: Path, rows: int, keys: int, *, rate: float = 1000.0, seed: int = 0) -> Path:
    """The directory of the window dataset of ``rows`` rows and ``keys`` keys (written unless cached)."""
    path = Path(root) / f"window-{rows}-{keys}"
    params = {"rows": rows, "keys": keys, "rate": rate, "seed": seed, "files": FILES, "v": 1}
    if _cached(path, params):
        return path
    span_ms = max(1, int(rows / rate * 1000))
    log(f"generating {rows:,} rows, {keys:,} keys over {span_ms / 1000:,.0f} s into {path}")

    def parts():
        for i, n in enumerate(_split(rows, FILES)):
            rng = np.random.default_rng([seed, keys, i])
            yield pa.table(
                {
                    "ts": pa.array(START_MS + rng.integers(0, span_ms, n), TS),
                    "key": rng.integers(0, keys, n),
                    "value": rng.uniform(0.0, 1000.0, n),
                }
            )

    _write(path, params, parts())
    return path


def join_dataset(
    root: Path, clicks: int, impressions: int, *, users: int, span_s: int, seed: int = 0
) -> tuple[Path, Path]:
    """The directories of the clicks and impressions of a join dataset (written unless cached)."""
    base = Path(root) / f"join-{clicks}-{impressions}-{users}-{span_s}"
    out = []
    for side, rows in (("clicks", clicks), ("impressions", impressions)):
        path = base / side
        params = {"rows": rows, "users": users, "span_s": span_s, "seed": seed, "side": side, "v": 1}
        if not _cached(path, params):

            def parts(rows=rows, side=side):
                first = 0
                for i, n in enumerate(_split(rows, 2)):
                    rng = np.random.default_rng([seed, users, rows, i, side == "clicks"])
                    yield pa.table(
                        {
                            "id": np.arange(first, first + n, dtype=np.int64),
                            "ts": pa.array(START_MS + rng.integers(0, span_s * 1000, n), TS),
                            "user": rng.integers(0, users, n),
                            "value": rng.uniform(0.0, 1000.0, n),
                        }
                    )
                    first += n

            _write(path, params, parts())
        out.append(path)
    return out[0], out[1]


def range_frame(spark, rows: int, keys: int, *, rate: float = 1000.0, partitions: int = 4):
    """The window dataset's columns derived from ``spark.range(rows)`` (not a file scan): ``ts``, ``key`` and
    ``value`` from independent 64-bit hashes of the row id, so every run computes the same rows."""
    from pyspark.sql import functions as F

    span_ms = max(1, int(rows / rate * 1000))
    h = [F.xxhash64(F.col("id"), F.lit(salt)) for salt in (1, 2, 3)]
    return spark.range(0, rows, 1, partitions).select(
        F.timestamp_millis(F.lit(START_MS) + F.pmod(h[0], F.lit(span_ms))).alias("ts"),
        F.pmod(h[1], F.lit(keys)).alias("key"),
        (F.pmod(h[2], F.lit(1_000_000_000)) / F.lit(1e6)).alias("value"),
    )
