"""The ``preference`` suite's peers: the sliding-window skyline and top-k written as DuckDB SQL and as
Polars queries (the Polars ones timed in a subprocess per thread count, so that ``POLARS_MAX_THREADS``
takes effect).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pyarrow as pa

from . import runner
from .preference_common import TOPK_K, TOPK_SCORE, pairs_of
from .report import best_of, log

#: The suite whose ``--worker polars`` runs :func:`polars_worker`.
SUITE = "preference"

# --------------------------------------------------------------------------------------------- SQL


def duckdb_assign(src: str, size: int, slide: int) -> str:
    """Each row of ``src`` once per window it belongs to, as column ``j`` (window j = [j*slide, +size))."""
    return (
        f"SELECT unnest(range((epoch_ms(ts) - {size}) // {slide} + 1, epoch_ms(ts) // {slide} + 1)) AS j, * "
        f"FROM {src}"
    )


def duckdb_dominated(dims: list[str]) -> str:
    """b dominates a (smaller is better)."""
    le = " AND ".join(f"b.{d} <= a.{d}" for d in dims)
    lt = " OR ".join(f"b.{d} < a.{d}" for d in dims)
    return f"{le} AND ({lt})"


def duckdb_bounds(size: int, slide: int) -> str:
    return f"epoch_ms(j * {slide}) AS window_start, epoch_ms(j * {slide} + {size}) AS window_end"


def duckdb_skyline_brute(dims: list[str], size: int, slide: int) -> str:
    return (
        f"WITH a AS ({duckdb_assign('pts', size, slide)}) "
        f"SELECT {duckdb_bounds(size, slide)}, a.* EXCLUDE (j) FROM a "
        f"ANTI JOIN a b ON b.j = a.j AND {duckdb_dominated(dims)} ORDER BY j, ts, id"
    )


def duckdb_skyline_paned(dims: list[str], size: int, slide: int) -> str:
    pane = math.gcd(size, slide)
    return (
        f"WITH p AS (SELECT epoch_ms(ts) // {pane} AS p, * FROM pts), "
        f"ps AS (SELECT a.* EXCLUDE (p) FROM p a ANTI JOIN p b ON b.p = a.p AND {duckdb_dominated(dims)}), "
        f"a AS ({duckdb_assign('ps', size, slide)}) "
        f"SELECT {duckdb_bounds(size, slide)}, a.* EXCLUDE (j) FROM a "
        f"ANTI JOIN a b ON b.j = a.j AND {duckdb_dominated(dims)} ORDER BY j, ts, id"
    )


def duckdb_topk(size: int, slide: int) -> str:
    return (
        f"WITH a AS ({duckdb_assign('pts', size, slide)}) "
        f"SELECT {duckdb_bounds(size, slide)}, a.* EXCLUDE (j) FROM a "
        f"QUALIFY row_number() OVER (PARTITION BY j ORDER BY {TOPK_SCORE} DESC, ts, id) <= {TOPK_K} "
        f"ORDER BY j, {TOPK_SCORE} DESC, ts, id"
    )


# --------------------------------------------------------------------------------------------- Polars


def polars_query(kind: str, df, dims: list[str], size: int, slide: int):
    """The Polars plan of one task (a DataFrame, collected)."""
    import polars as pl

    epoch = pl.col("ts").dt.epoch("ms")

    def assign(lf):
        return lf.with_columns(j=pl.int_ranges((epoch - size) // slide + 1, epoch // slide + 1)).explode("j")

    def bounds(lf):
        return lf.select(
            pl.from_epoch(pl.col("j") * slide, time_unit="ms").alias("window_start"),
            pl.from_epoch(pl.col("j") * slide + size, time_unit="ms").alias("window_end"),
            pl.exclude("j"),
        )

    def anti_skyline(lf, key: str):
        """The rows of ``lf`` no row of the same ``key`` dominates."""
        other = lf.select(key, *dims).rename({c: f"{c}_b" for c in (key, *dims)})
        dominated = (
            lf.select(key, "id", *dims)
            .join_where(
                other,
                pl.col(key) == pl.col(f"{key}_b"),
                *(pl.col(f"{d}_b") <= pl.col(d) for d in dims),
                pl.any_horizontal([pl.col(f"{d}_b") < pl.col(d) for d in dims]),
            )
            .select(key, "id")
            .unique()
        )
        return lf.join(dominated, on=[key, "id"], how="anti")

    lf = df.lazy()
    if kind == "skyline_brute":
        out = bounds(anti_skyline(assign(lf), "j").sort("j", "ts", "id"))
        return out.collect(engine="streaming")
    if kind == "skyline_paned":
        pane = math.gcd(size, slide)
        survivors = anti_skyline(lf.with_columns(p=epoch // pane), "p").drop("p")
        return bounds(anti_skyline(assign(survivors), "j").sort("j", "ts", "id")).collect()
    if kind == "topk":
        top = (
            assign(lf)
            .group_by("j")
            .agg(pl.all().top_k_by([TOPK_SCORE, "ts", "id"], k=TOPK_K, reverse=[False, True, True]))
            .explode(pl.exclude("j"))
            .sort("j", TOPK_SCORE, "ts", "id", descending=[False, True, False, False])
        )
        return bounds(top).collect()
    raise ValueError(kind)


def polars_worker(task_file: str) -> None:
    """Runs in a subprocess with POLARS_MAX_THREADS set: every task of ``task_file`` (JSON), its pairs
    written to an Arrow file; prints one JSON line (a list of results)."""
    import polars as pl

    spec = json.loads(Path(task_file).read_text())
    out = []
    frames: dict[str, object] = {}
    for task in spec["tasks"]:
        path = task["input"]
        if path not in frames:
            frames[path] = pl.read_ipc(path).rechunk()
        df = frames[path]
        try:
            best, runs, res = best_of(
                lambda df=df, task=task: polars_query(
                    task["kind"], df, task["dims"], task["size"], task["slide"]
                ),
                spec["repeat"],
                spec["budget"],
            )
        except BaseException as exc:  # MemoryError, a Polars error: report it, go on
            out.append({"key": task["key"], "error": f"{type(exc).__name__}: {exc}"})
            continue
        pairs = pairs_of(res.select("window_start", "id").to_arrow())
        ppath = Path(spec["dir"]) / f"polars_{task['key']}_{pl.thread_pool_size()}.arrow"
        with pa.OSFile(str(ppath), "wb") as f, pa.ipc.new_file(f, pairs.schema) as w:
            w.write_table(pairs)
        out.append(
            {
                "key": task["key"],
                "seconds": best,
                "runs": runs,
                "out_rows": res.height,
                "pairs": str(ppath),
                "pool": pl.thread_pool_size(),
            }
        )
    print(json.dumps(out))


def run_polars(tasks: list[dict], tmp: Path, threads: list[int], repeat: int, budget: float, timeout: float):
    """Every task at each thread count (a subprocess per count): {(key, threads): result or error}."""
    spec_path = tmp / "polars_tasks.json"
    spec_path.write_text(json.dumps({"tasks": tasks, "dir": str(tmp), "repeat": repeat, "budget": budget}))
    results: dict[tuple[str, int], dict] = {}
    for n in threads:
        cmd, env = runner.worker(
            SUITE, "--worker", "polars", "--tasks", str(spec_path), POLARS_MAX_THREADS=str(n)
        )
        log(f"polars, {n} thread(s): {len(tasks)} queries in a subprocess")
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            for t in tasks:
                results[(t["key"], n)] = {"error": f"timed out after {timeout:.0f} s (all Polars tasks)"}
            continue
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            for t in tasks:
                results[(t["key"], n)] = {"error": f"Polars subprocess failed: {err}"}
            continue
        for r in json.loads(proc.stdout.strip().splitlines()[-1]):
            if "pairs" in r:
                with pa.memory_map(r["pairs"]) as f:
                    r["pairs"] = pa.ipc.open_file(f).read_all()
            results[(r["key"], n)] = r
    return results
