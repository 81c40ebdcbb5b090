"""Continuous preference queries as in Mencagli, Torquati, Danelutto and De Matteis, *Parallel Continuous
Preference Queries over Out-of-Order and Bursty Data Streams*: windgate side by side with DuckDB and Polars,
then the paper's pane-vs-window (Fig. 14), pane-level query (PLQ) scheduler (Fig. 8) and window-level query
(WLQ) scheduler (Figs. 12-13) experiments on windgate.

Data: :func:`windgate.datasets.points` (``ts`` timestamp[ms], ``id`` = the row's position, ``d0..d{d-1}``
float64; independent points uniform on [0, 1000), anticorrelated ones multivariate normal with correlation
-0.9/(d-1)), in event-time order (no disorder), windows aligned like Spark's ``window()``: window ``j``
covers ``[j*slide, j*slide + size)`` in epoch ms and is emitted when it holds a row. Preference: smaller is
better in every dimension (``prefer="min"``); t dominates u iff t <= u everywhere and t < u somewhere.

1. **Side by side** (one run, same rows, same windows): the sliding-window skyline of independent d=2,
   independent d=4 and anticorrelated d=2 points (default 200,000 rows at 1000 rows/s, windows of 1000 ms
   sliding by 250 ms: ~1000 points per window, 4 panes per window) and the top-10 by ``d0`` (descending) of
   the independent d=2 points:

   * windgate ``skyline()`` / ``topk()``: strategy "pane" (1 thread) and "farm" (AS_PID + WIN_FB; 1 and 2
     threads);
   * DuckDB, brute force: each row is copied to the windows it belongs to (``unnest(range(...))``), then an
     ``ANTI JOIN`` on the same window with the dominance predicate (DuckDB plans a hash anti join on the
     window with the predicate as residual, which stops at a row's first dominator; ``NOT EXISTS`` is planned
     as a mark join that compares every pair and is ~100x slower); ``SET threads`` 1 and 2;
   * DuckDB, pane-reduced: the same anti join per pane first (``L = gcd(size, slide)``), then per window over
     the pane survivors (exact: Sky(U Sky(P_i)) = Sky(U P_i));
   * Polars (a subprocess per ``POLARS_MAX_THREADS``), brute force: the same window assignment
     (``int_ranges`` + ``explode``), ``join_where`` on the window and the dominance predicate (streaming
     engine: the per-window pairs would not fit in memory), ``unique``, then an anti join; and pane-reduced
     as for DuckDB;
   * top-k: DuckDB ``QUALIFY row_number() OVER (PARTITION BY window ORDER BY d0 DESC, ts, id) <= 10``, Polars
     ``group_by(window).agg(pl.all().top_k_by([d0, ts, id], 10, reverse=[False, True, True]))``.

   Every engine returns the window bounds and all input columns of the selected rows. Check: every engine's
   set of (window_start, id) pairs equals windgate pane's, windgate pane's equals DuckDB brute force's, and
   the farm's output equals the pane engine's exactly (Arrow ``Table.equals``). Any difference prints FAIL
   and the script exits 1.
2. **Fig. 14**: strategy "pane" (pane skylines merged per window) vs "recompute" (every window's skyline
   recomputed from its rows with the same BNL kernel), 1 thread, skyline d=4 independent, windows of 1600 ms
   sliding by 800/400/200/100 ms (2, 4, 8, 16 panes per window). The paper's metric is the execution-time
   ratio paned / windowed (< 1, falling with the overlap).
3. **Fig. 8**: the pane farm's PLQ schedulers PB_RR, TB_RR and AS_PID (all with WIN_FB) at 2 threads under
   no (Poisson), low, medium and high burstiness (index of dispersion 1, 1000, 2500, 6000, the paper's),
   skyline d=8 independent, 100,000 rows/s, panes of 100 ms (~10,000 points: the paper's setting; the
   bursts make some panes several times larger), tumbling windows (one pane per window keeps the WLQ's
   work small, so the PLQ is the bottleneck), streamed through
   ``SkylineQuery.push`` in batches with ``lateness=0`` so that the farm's monitor and AS_PID's controller
   sample while it runs (``sample_interval`` 0.05 s). Reported: rows/s, utilisation (mean PLQ rho), split
   factor, panes split, PLQ unbalance ``(1 - min/max)*100``.
4. **Figs. 12-13**: WIN_RR vs WIN_FB (AS_PID in the PLQ) at 2 threads, skyline d=4 independent, 10,000
   rows/s, with many panes per window (2000 ms sliding by 100 ms: 20 panes of ~1000 points per window, so
   merging pane results into windows, the WLQ's work, dominates), under no, medium and high burstiness
   (index of dispersion 1, 100, 1000), streamed as in 3. Reported: rows/s, windows/s, window tasks, WLQ
   unbalance.

Per-point cost vs pane size and dimensions (Figs. 6-7) is the criterion bench
``benches/benches/preference.rs``.

Timing: best of ``--repeat`` runs (slow configurations stop repeating once another run would exceed
``--budget`` seconds), input already in each engine's memory (loading is not timed), output materialised
(windgate and DuckDB: Arrow; Polars: a DataFrame). rows/s = input rows over the seconds.

    .venv/bin/python -m benches.peers preference                  # ~3-5 minutes on 2 cores
    .venv/bin/python -m benches.peers preference --quick          # smoke test, well under a minute
    .venv/bin/python -m benches.peers preference --sections 1,2   # only some sections

Results: ``<out>/preference.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import plot as plots
from . import report, runner
from .report import failure, fmt_rate, log

NAME = "preference"
TIME = "ts"
TOPK_K, TOPK_SCORE = 10, "d0"

# Section 1: side by side.
S1_SIZE_MS, S1_SLIDE_MS, S1_RATE = 1000, 250, 1000.0
S1_WORKLOADS = (("independent", 2), ("independent", 4), ("anticorrelated", 2))
# Section 2 (Fig. 14): window size and slides (panes per window = size / slide).
S2_SIZE_MS, S2_SLIDES_MS, S2_DIMS, S2_RATE = 1600, (800, 400, 200, 100), 4, 1000.0
# Section 3 (Fig. 8): PLQ schedulers under burstiness.
# The paper's setting (d=8, lambda = 100K/s, L_p = 100 ms: panes of ~10K points; I = 1K, 2.5K, 6K), with
# tumbling windows so that the PLQ is the bottleneck (with 4 panes per window the WLQ's merge of four
# ~1K-point pane skylines per window dominates and the whole runs at ~6K rows/s on 2 cores).
S3_SIZE_MS, S3_SLIDE_MS, S3_DIMS, S3_RATE = 100, 100, 8, 100_000.0
S3_BURSTINESS = (("none", None), ("low", 1000.0), ("medium", 2500.0), ("high", 6000.0))
S3_SCHEDULERS = ("pb_rr", "tb_rr", "as_pid")
# Section 4 (Figs. 12-13): WLQ schedulers with many panes per window.
# Panes of ~1000 points, 20 per window: the WLQ's merge work is >10x the PLQ's. At 1000 points per pane,
# I = 100 and 1000 give pane-size CVs of ~0.3 and ~0.9 (the paper's I = 2.5K-8K at 10K points per pane).
S4_SIZE_MS, S4_SLIDE_MS, S4_DIMS, S4_RATE = 2000, 100, 4, 10_000.0
S4_BURSTINESS = (("none", None), ("medium", 100.0), ("high", 1000.0))
S4_WINDOW_SCHEDULERS = ("win_rr", "win_fb")
STREAM_BATCH = 10_000
SECTIONS = ("1", "2", "3", "4")

#: Section 1's engines, in the order they run (windgate first: it is every other engine's reference).
ENGINES = ("windgate", "duckdb", "polars")


# --------------------------------------------------------------------------------------------- helpers


def timed(fn: Callable[[], object], repeat: int, budget: float) -> tuple[float, list[float], object]:
    """Best of up to ``repeat`` runs of ``fn``; stops early when another run would take the total past
    ``budget`` seconds. Returns (best seconds, every run, the last output)."""
    runs: list[float] = []
    out = None
    for _ in range(max(1, repeat)):
        out = None
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t0)
        if sum(runs) + runs[-1] > budget:
            break
    return min(runs), runs, out


def ms_int(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A timestamp column (any unit) as int64 epoch milliseconds; an integer column as int64."""
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz=col.type.tz))
    return col.cast(pa.int64())


def pairs_of(table: pa.Table) -> pa.Table:
    """The sorted (window_start in epoch ms, id) pairs of an engine's output."""
    t = pa.table(
        {"window_start": ms_int(table.column("window_start")), "id": table.column("id").cast(pa.int64())}
    )
    return t.sort_by([("window_start", "ascending"), ("id", "ascending")])


def compare_pairs(pairs: pa.Table, ref: pa.Table, ref_name: str) -> str | None:
    """None when equal, else what differs (counts of pairs only on one side, and one example)."""
    if pairs.equals(ref):
        return None
    a = {(w, i) for w, i in zip(*(pairs.column(c).to_pylist() for c in ("window_start", "id")), strict=True)}
    b = {(w, i) for w, i in zip(*(ref.column(c).to_pylist() for c in ("window_start", "id")), strict=True)}
    extra, missing = sorted(a - b), sorted(b - a)
    msg = f"{pairs.num_rows:,} (window, id) pairs vs {ref.num_rows:,} ({ref_name}): "
    msg += f"{len(extra):,} not in {ref_name}'s, {len(missing):,} missing"
    if extra:
        msg += f"; e.g. extra (window_start={extra[0][0]}, id={extra[0][1]})"
    if missing:
        msg += f"; e.g. missing (window_start={missing[0][0]}, id={missing[0][1]})"
    if not extra and not missing:
        msg += " (duplicate pairs)"
    return msg


def dims_of(d: int) -> list[str]:
    return [f"d{k}" for k in range(d)]


def skipped(engine: str, why: str, **extra) -> dict:
    log(f"{engine}: skipped: {why}")
    return {"engine": engine, "threads": None, "seconds": None, "check": "skipped", "notes": why, **extra}


def unbalance(busy) -> float | None:
    """(1 - min/max) * 100 over per-worker busy seconds (None without them)."""
    busy = [b for b in (busy or []) if b is not None]
    if len(busy) < 1 or max(busy) <= 0:
        return None
    return (1 - min(busy) / max(busy)) * 100


# --------------------------------------------------------------------------------------------- windgate


class Windgate:
    """The windgate preference API: ``windgate.skyline`` / ``topk`` / ``SkylineQuery`` when the Python
    wrappers exist, else the extension's ``_native.preference`` (batch only) with the same keywords."""

    def __init__(self) -> None:
        import windgate

        self.wg = windgate
        self.native = getattr(windgate, "_native", None)
        self.has_wrappers = hasattr(windgate, "skyline")
        self.has_native = self.native is not None and hasattr(self.native, "preference")
        self.available = self.has_wrappers or self.has_native
        self.why = (
            "" if self.available else "the installed windgate has no skyline() (nor _native.preference)"
        )
        self.via = "windgate.skyline/topk" if self.has_wrappers else "windgate._native.preference"

    def query(self, query: str, data: pa.Table, **kw) -> pa.Table:
        if self.has_wrappers:
            fn = {"skyline": self.wg.skyline, "topk": self.wg.topk, "top_dominant": self.wg.top_dominant}[
                query
            ]
            return fn(data, **kw)
        from windgate import _args

        kw = dict(kw)
        for key in ("dims", "by"):
            if key in kw and kw[key] is not None and isinstance(kw[key], str):
                kw[key] = [kw[key]]
        if isinstance(kw.get("prefer"), str):
            kw["prefer"] = [kw["prefer"]] * len(kw.get("dims") or [1])
        return self.native.preference(_args.sources(data), query=query, **kw)

    @property
    def streaming(self) -> bool:
        return hasattr(self.wg, "SkylineQuery")

    def stream(self, batches: list[pa.RecordBatch], **kw) -> tuple[float, pa.Table, dict]:
        """Push every batch into a SkylineQuery and flush; (seconds, output, stats)."""
        t0 = time.perf_counter()
        q = self.wg.SkylineQuery(**kw)
        parts = [o for o in map(q.push, batches) if o.num_rows]
        parts.append(q.flush())
        seconds = time.perf_counter() - t0
        return seconds, pa.Table.from_batches(parts), dict(q.stats)


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
            best, runs, res = timed(
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
            NAME, "--worker", "polars", "--tasks", str(spec_path), POLARS_MAX_THREADS=str(n)
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


# --------------------------------------------------------------------------------------------- section 1

S1_COLUMNS = (
    ("workload", "workload"),
    ("engine", "engine"),
    ("threads", "cores"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("speedup", "vs 1 core"),
    ("vs_windgate", "windgate pane is", lambda x: f"{x:,.1f}x faster" if x >= 1 else f"{1 / x:,.1f}x slower"),
    ("out_rows", "output rows"),
    ("check", "check"),
    ("notes", "notes"),
)


def section1(args, wg: Windgate | None, tmp: Path) -> list[dict]:
    """Side by side: every engine on the same rows and windows; see the module docstring."""
    import duckdb

    size, slide = S1_SIZE_MS, S1_SLIDE_MS
    threads = args.threads
    wg_kw = {"time": TIME, "size": f"{size}ms", "slide": f"{slide}ms", "lateness": args.lateness}
    farm = {"scheduler": "as_pid", "window_scheduler": "win_fb", "sample_interval": args.sample_interval}
    # (workload label, query, distribution, d, table)
    jobs = []
    for dist, d in S1_WORKLOADS:
        t0 = time.perf_counter()
        table = report.load_generator("points")(
            args.rows, dims=d, distribution=dist, rate=S1_RATE, seed=args.seed
        ).combine_chunks()
        log(f"generated {args.rows:,} {dist} points, d={d}, in {time.perf_counter() - t0:.2f} s")
        jobs.append((f"skyline {dist[:5]}. d={d}", "skyline", dist, d, table))
    jobs.append((f"top-{TOPK_K} by {TOPK_SCORE} indep. d=2", "topk", "independent", 2, jobs[0][4]))

    results: list[dict] = []
    refs: dict[str, pa.Table] = {}  # workload -> reference pairs (windgate pane's, else DuckDB brute's)
    wg_tables: dict[str, pa.Table] = {}  # workload -> windgate pane's output table
    duck_brute: dict[str, pa.Table] = {}
    ref_names: dict[str, str] = {}  # workload -> the reference's name when it is not windgate pane

    def record(workload: str, r: dict, pairs: pa.Table | None, extra_ref: tuple | None = None) -> None:
        r.update(workload=workload, rows=args.rows, scaling_group=f"{workload} {r['engine']}", section="1")
        if r.get("seconds") is not None and pairs is not None:
            problems = []
            ref = refs.get(workload)
            ref_name = ref_names.get(workload, "windgate pane")
            if (
                ref is not None
                and ref is not pairs
                and (p := compare_pairs(pairs, ref, ref_name)) is not None
            ):
                problems.append(p)
            if extra_ref is not None and (p := compare_pairs(pairs, *extra_ref)) is not None:
                problems.append(p)
            checks = r.pop("_checks", [])
            problems += [c for c in checks if c]
            if problems:
                r["check"] = "FAIL: " + "; ".join(problems)
            else:
                r["check"] = r.get("check") or (f"ok (= {ref_name})" if ref is not None else "reference")
            log(
                f"  {workload}: {r['engine']} ({r['threads']} threads): {r['seconds']:.3f} s, "
                f"{args.rows / r['seconds'] / 1e6:.2f} M rows/s, {r['out_rows']:,} rows out, {r['check']}"
            )
        results.append(report.finish(r))

    # windgate
    if "windgate" in args.engines:
        for workload, query, _, d, table in jobs:
            if wg is None or not wg.available:
                record(workload, skipped("windgate", wg.why if wg else "windgate is not importable"), None)
                continue
            kw = dict(wg_kw)
            kw.update({"dims": dims_of(d)} if query == "skyline" else {"score": TOPK_SCORE, "k": TOPK_K})
            variants = [("windgate pane", "pane", 1, None)]
            variants += [("windgate farm", "farm", n, farm) for n in threads]
            for label, strategy, n, fknobs in variants:
                try:
                    best, runs, out = timed(
                        lambda kw=kw, s=strategy, n=n, f=fknobs, q=query, t=table: wg.query(
                            q, t, **kw, threads=n, strategy=s, farm=f
                        ),
                        args.repeat,
                        args.budget,
                    )
                except Exception as exc:  # report it, go on
                    record(workload, failure(label, n, exc), None)
                    continue
                r = {
                    "engine": label,
                    "threads": n,
                    "seconds": best,
                    "runs": runs,
                    "out_rows": out.num_rows,
                    "notes": f"{wg.via}(strategy={strategy!r}, threads={n}"
                    + (", farm AS_PID + WIN_FB)" if fknobs else ")"),
                }
                pairs = pairs_of(out)
                if strategy == "pane":
                    refs[workload] = pairs
                    wg_tables[workload] = out
                    r["check"] = "reference"
                elif workload in wg_tables:
                    if out.equals(wg_tables[workload]):
                        r["check"] = "ok (= pane exactly)"
                    else:
                        r["_checks"] = [
                            "output != pane's (Table.equals): "
                            + report.describe_difference(out, wg_tables[workload], "pane")
                        ]
                record(workload, r, pairs)
            del out

    # DuckDB
    if "duckdb" in args.engines:
        for workload, query, _, d, table in jobs:
            con = duckdb.connect()
            try:
                con.register("src", table)
                con.execute("CREATE TABLE pts AS SELECT * FROM src")  # native storage, not timed
                con.unregister("src")
                if query == "skyline":
                    variants = [
                        ("duckdb brute force", duckdb_skyline_brute(dims_of(d), size, slide), "brute"),
                        ("duckdb pane-reduced", duckdb_skyline_paned(dims_of(d), size, slide), "paned"),
                    ]
                else:
                    variants = [("duckdb QUALIFY", duckdb_topk(size, slide), "topk")]
                for label, sql, kind in variants:
                    for n in threads:
                        try:
                            con.execute(f"SET threads={n}")
                            best, runs, out = timed(
                                lambda sql=sql, con=con: con.sql(sql).to_arrow_table(),
                                args.repeat,
                                args.budget,
                            )
                        except Exception as exc:
                            record(workload, failure(label, n, exc), None)
                            continue
                        pairs = pairs_of(out)
                        notes = {
                            "brute": "windows by unnest(range()), ANTI JOIN on window + dominance",
                            "paned": "ANTI JOIN per pane, then per window over the pane survivors",
                            "topk": f"QUALIFY row_number() OVER (PARTITION BY window ORDER BY "
                            f"{TOPK_SCORE} DESC, ts, id) <= {TOPK_K}",
                        }[kind]
                        r = {
                            "engine": label,
                            "threads": n,
                            "seconds": best,
                            "runs": runs,
                            "out_rows": out.num_rows,
                            "notes": f"{notes}; SET threads={n}; to Arrow",
                        }
                        if kind in ("brute", "topk") and workload not in duck_brute:
                            duck_brute[workload] = pairs
                            if workload not in refs:  # windgate did not run: DuckDB is the reference
                                refs[workload] = pairs
                                ref_names[workload] = label
                                r["check"] = "reference (windgate did not run)"
                        record(workload, r, pairs)
                        del out
            finally:
                con.close()
        # windgate pane against DuckDB's brute force (the definition, in SQL)
        for r in results:
            w = r["workload"]
            if r["engine"] == "windgate pane" and r.get("seconds") and w in duck_brute:
                problem = compare_pairs(refs[w], duck_brute[w], "duckdb brute force")
                if problem:
                    r["check"] = "FAIL: " + problem
                else:
                    r["check"] = "ok (= duckdb " + ("brute force)" if "skyline" in w else "QUALIFY)")

    # Polars
    if "polars" in args.engines:
        tasks, inputs = [], {}
        for workload, query, _, d, table in jobs:
            path = tmp / f"points_{id(table)}.arrow"
            if id(table) not in inputs:
                with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
                    w.write_table(table)
                inputs[id(table)] = path
            kinds = ("skyline_brute", "skyline_paned") if query == "skyline" else ("topk",)
            for kind in kinds:
                tasks.append(
                    {
                        "key": f"{len(tasks)}",
                        "workload": workload,
                        "kind": kind,
                        "input": str(inputs[id(table)]),
                        "dims": dims_of(d),
                        "size": size,
                        "slide": slide,
                    }
                )
        got = run_polars(tasks, tmp, threads, args.repeat, args.budget, args.polars_timeout)
        labels = {
            "skyline_brute": "polars brute force",
            "skyline_paned": "polars pane-reduced",
            "topk": "polars top_k_by",
        }
        notes = {
            "skyline_brute": "int_ranges + explode, join_where(window, dominance) (streaming engine), "
            "unique, anti join",
            "skyline_paned": "the same per pane, then per window over the pane survivors",
            "topk": f"group_by(window).agg(pl.all().top_k_by([{TOPK_SCORE}, ts, id], {TOPK_K}))",
        }
        for task in tasks:
            for n in threads:
                res = got.get((task["key"], n), {"error": "no result"})
                label = labels[task["kind"]]
                if "error" in res:
                    record(task["workload"], failure(label, n, RuntimeError(res["error"])), None)
                    continue
                r = {
                    "engine": label,
                    "threads": n,
                    "seconds": res["seconds"],
                    "runs": res["runs"],
                    "out_rows": res["out_rows"],
                    "notes": f"{notes[task['kind']]}; POLARS_MAX_THREADS={n} in a subprocess",
                }
                record(task["workload"], r, res["pairs"])

    report.add_speedups(results)
    pane = {
        r["workload"]: r["seconds"] for r in results if r["engine"] == "windgate pane" and r.get("seconds")
    }
    for r in results:
        if r.get("seconds") and r["workload"] in pane:
            r["vs_windgate"] = r["seconds"] / pane[r["workload"]]
    return results


# --------------------------------------------------------------------------------------------- section 2

S2_COLUMNS = (
    ("panes_per_window", "panes per window"),
    ("slide_ms", "slide (ms)"),
    ("engine", "strategy"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("ratio", "paned / windowed time", lambda x: f"{x:.3f}"),
    ("out_rows", "output rows"),
    ("check", "check"),
)


def section2(args, wg: Windgate) -> list[dict]:
    """Fig. 14: pane vs recompute, 1 thread, vs panes per window."""
    rows = args.rows_fig14
    table = report.load_generator("points")(rows, dims=S2_DIMS, rate=S2_RATE, seed=args.seed).combine_chunks()
    log(f"Fig. 14: {rows:,} independent points, d={S2_DIMS}, windows of {S2_SIZE_MS} ms")
    results = []
    for slide in S2_SLIDES_MS:
        ppw = S2_SIZE_MS // math.gcd(S2_SIZE_MS, slide)
        kw = {
            "time": TIME,
            "size": f"{S2_SIZE_MS}ms",
            "slide": f"{slide}ms",
            "dims": dims_of(S2_DIMS),
            "lateness": args.lateness,
            "threads": 1,
        }
        common = {"section": "2", "panes_per_window": ppw, "slide_ms": slide, "rows": rows, "threads": 1}
        ref = None
        for strategy in ("pane", "recompute"):
            try:
                best, runs, out = timed(
                    lambda s=strategy, kw=kw: wg.query("skyline", table, **kw, strategy=s),
                    args.repeat,
                    args.budget,
                )
            except Exception as exc:
                results.append({**common, **failure(strategy, 1, exc)})
                continue
            r = {**common, "engine": strategy, "seconds": best, "runs": runs, "out_rows": out.num_rows}
            if strategy == "pane":
                ref, r["check"] = out, "reference"
            elif ref is None:
                r["check"] = "not checked (pane failed)"
            elif out.equals(ref):
                r["check"] = "ok (= pane exactly)"
            else:
                r["check"] = "FAIL: " + report.describe_difference(out, ref, "pane")
            results.append(report.finish(r))
            log(
                f"  {ppw:>2} panes/window: {strategy}: {best:.3f} s, {rows / best / 1e6:.2f} M rows/s, "
                f"{out.num_rows:,} rows out, {r['check']}"
            )
        got = {r["engine"]: r for r in results if r.get("slide_ms") == slide and r.get("seconds")}
        if "pane" in got and "recompute" in got:
            ratio = got["pane"]["seconds"] / got["recompute"]["seconds"]
            got["pane"]["ratio"] = got["recompute"]["ratio"] = ratio
    return results


# --------------------------------------------------------------------------------------------- sections 3, 4

S3_COLUMNS = (
    ("burst", "burstiness"),
    ("dispersion", "I", lambda x: f"{x:g}"),
    ("engine", "scheduler"),
    ("threads", "threads"),
    ("workers", "PLQ+WLQ"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("vs_pane", "vs pane 1t", lambda x: f"{x:.2f}x"),
    ("utilisation", "utilisation", lambda x: f"{x:.2f}"),
    ("split_factor", "split factor", lambda x: f"{x:.2f}"),
    ("panes_split", "panes split", lambda x: f"{x:,}"),
    ("plq_unbalance", "PLQ unbalance %", lambda x: f"{x:.1f}"),
    ("check", "check"),
)
S4_COLUMNS = (
    ("burst", "burstiness"),
    ("dispersion", "I", lambda x: f"{x:g}"),
    ("engine", "scheduler"),
    ("threads", "threads"),
    ("workers", "PLQ+WLQ"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("windows_per_s", "windows/s", fmt_rate),
    ("vs_pane", "vs pane 1t", lambda x: f"{x:.2f}x"),
    ("window_tasks", "window tasks", lambda x: f"{x:,}"),
    ("wlq_unbalance", "WLQ unbalance %", lambda x: f"{x:.1f}"),
    ("split_factor", "split factor", lambda x: f"{x:.2f}"),
    ("check", "check"),
)


def workload_facts(table: pa.Table, pane_ms: int) -> dict:
    """Panes, rows per pane (mean, max, coefficient of variation), measured index of dispersion."""
    ts = ms_int(table.column(TIME)).to_numpy()
    per_pane = np.bincount((ts - ts.min() // pane_ms * pane_ms) // pane_ms)
    if per_pane.size > 2:  # the first and last panes are cut short by the data's ends
        per_pane = per_pane[1:-1]
    try:
        from windgate.bursty import estimate_dispersion

        measured = float(f"{estimate_dispersion(np.sort(ts) / 1000.0):.3g}")
    except Exception:  # windgate.bursty missing, or too short a trace
        measured = None
    return {
        "panes": int(per_pane.size),
        "rows_per_pane_mean": round(float(per_pane.mean()), 1),
        "rows_per_pane_max": int(per_pane.max()),
        "rows_per_pane_cv": round(float(per_pane.std() / per_pane.mean()), 3),
        "measured_dispersion": measured,
    }


def stream_measure(wg: Windgate, batches, kw: dict, repeat: int, budget: float, ref: pa.Table | None) -> dict:
    """Best of the runs of SkylineQuery(**kw) over ``batches``; stats of the best run; every run's output
    checked against ``ref`` (exactly)."""
    runs, best, problems, out = [], None, [], None
    for _ in range(max(1, repeat)):
        out = None
        gc.collect()
        seconds, out, stats = wg.stream(batches, **kw)
        runs.append(seconds)
        if ref is not None and not out.equals(ref):
            problems.append(report.describe_difference(out, ref, "pane"))
        if best is None or seconds < best[0]:
            best = (seconds, stats)
        if sum(runs) + runs[-1] > budget:
            break
    stats = best[1]
    plq, wlq = stats.get("plq_busy_s") or [], stats.get("wlq_busy_s") or []
    r = {
        "threads": kw.get("threads"),
        "seconds": best[0],
        "runs": runs,
        "out_rows": out.num_rows,
        "out": out,
        "stats": stats,
        "utilisation": stats.get("utilisation"),
        "split_factor": stats.get("split_factor"),
        "panes_split": stats.get("panes_split"),
        "window_tasks": stats.get("window_tasks"),
        "windows_out": stats.get("windows_out"),
        "late_rows": stats.get("late_rows"),
        "workers": f"{len(plq)}+{len(wlq)}" if plq or wlq else None,
        "plq_unbalance": unbalance(plq) if len(plq) > 1 else None,
        "wlq_unbalance": unbalance(wlq) if len(wlq) > 1 else None,
        "check": "reference" if ref is None else "ok (= pane exactly)",
    }
    if problems:
        r["check"] = f"FAIL in {len(problems)} of {len(runs)} runs: {problems[0]}"
    elif r["late_rows"]:
        r["check"] += f"; {r['late_rows']:,} late rows dropped"
    return r


def scheduler_section(args, wg: Windgate, section: str) -> tuple[list[dict], dict]:
    """Fig. 8 (section "3": PLQ schedulers) or Figs. 12-13 (section "4": WLQ schedulers)."""
    if section == "3":
        size, slide, d, rate, levels = S3_SIZE_MS, S3_SLIDE_MS, S3_DIMS, S3_RATE, S3_BURSTINESS
        rows = args.rows_fig8
        configs = [(s.upper(), {"scheduler": s, "window_scheduler": "win_fb"}) for s in S3_SCHEDULERS]
    else:
        size, slide, d, rate, levels = S4_SIZE_MS, S4_SLIDE_MS, S4_DIMS, S4_RATE, S4_BURSTINESS
        rows = args.rows_fig12
        configs = [(w.upper(), {"scheduler": "as_pid", "window_scheduler": w}) for w in S4_WINDOW_SCHEDULERS]
    fig = "Fig. 8" if section == "3" else "Figs. 12-13"
    pane_ms = math.gcd(size, slide)
    base = {
        "time": TIME,
        "size": f"{size}ms",
        "slide": f"{slide}ms",
        "dims": dims_of(d),
        "lateness": 0,
    }
    results, facts = [], {}
    threads = max(args.threads)
    for burst, dispersion in levels:
        t0 = time.perf_counter()
        table = report.load_generator("points")(
            rows, dims=d, rate=rate, dispersion=dispersion, seed=args.seed
        ).combine_chunks()
        f = facts[burst] = {"dispersion": dispersion or 1, **workload_facts(table, pane_ms)}
        log(
            f"{fig}, {burst} burstiness (I={dispersion or 1}, measured {f['measured_dispersion']}): "
            f"{rows:,} rows, "
            f"{f['panes']} panes of {f['rows_per_pane_mean']:,.0f} rows (max {f['rows_per_pane_max']:,}, "
            f"CV {f['rows_per_pane_cv']}), generated in {time.perf_counter() - t0:.1f} s"
        )
        batches = table.to_batches(max_chunksize=STREAM_BATCH)
        common = {"section": section, "burst": burst, "dispersion": dispersion or 1, "rows": rows}
        try:
            ref = wg.stream(batches, **base, threads=1, strategy="pane")[1]  # untimed: reference + warm-up
            r = stream_measure(
                wg, batches, {**base, "threads": 1, "strategy": "pane"}, args.repeat, args.budget, None
            )
        except Exception as exc:
            results.append({**common, **failure("pane", 1, exc)})
            continue
        r.pop("out")
        results.append(report.finish({**common, "engine": "pane (1 thread)", **r, "vs_pane": 1.0}))
        pane_rate = rows / r["seconds"]
        log(f"  pane, 1 thread: {pane_rate / 1e6:.2f} M rows/s, {ref.num_rows:,} rows out")
        for label, knobs in configs:
            farm = {**knobs, "sample_interval": args.sample_interval}
            try:
                r = stream_measure(
                    wg,
                    batches,
                    {**base, "threads": threads, "strategy": "farm", "farm": farm},
                    args.repeat,
                    args.budget,
                    ref,
                )
            except Exception as exc:
                results.append({**common, **failure(label, threads, exc)})
                continue
            r.pop("out")
            r["vs_pane"] = rows / r["seconds"] / pane_rate
            r["farm"] = farm
            results.append(report.finish({**common, "engine": label, **r}))
            if r.get("windows_out") is not None:
                results[-1]["windows_per_s"] = r["windows_out"] / r["seconds"]
            log(
                f"  {label}, {threads} threads: {rows / r['seconds'] / 1e6:.2f} M rows/s "
                f"({r['vs_pane']:.2f}x pane), utilisation {r['utilisation']}, "
                f"split factor {r['split_factor']}, "
                f"panes split {r['panes_split']}, workers {r['workers']}, {r['check']}"
            )
        for res in results:
            if res.get("burst") == burst and res["engine"].startswith("pane") and res.get("windows_out"):
                res["windows_per_s"] = res["windows_out"] / res["seconds"]
        del table, batches, ref
    return results, facts


def facts_table(facts: dict, pane_ms: int) -> str:
    lines = [
        f"| burstiness | index of dispersion | measured | panes ({pane_ms} ms; ends left out) | "
        "rows/pane (mean) | rows/pane (max) | CV rows/pane |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for burst, f in facts.items():
        lines.append(
            f"| {burst} | {f['dispersion']:g} | {f['measured_dispersion']} | {f['panes']:,} | "
            f"{f['rows_per_pane_mean']:,.0f} | {f['rows_per_pane_max']:,} | {f['rows_per_pane_cv']} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- plot


def plot(sections: dict[str, list[dict]], path: Path, title: str) -> Path | None:
    """Four panels: side by side (log rows/s), Fig. 14, Fig. 8, Figs. 12-13."""
    panels: list[plots.Panel] = []
    s1 = [r for r in sections.get("1", []) if r.get("rows_per_s")]
    workloads = list(dict.fromkeys(r["workload"] for r in s1))
    engines = list(dict.fromkeys(f"{r['engine']} ({r['threads']}c)" for r in s1))
    rates = {(r["workload"], f"{r['engine']} ({r['threads']}c)"): r["rows_per_s"] / 1e6 for r in s1}
    panels.append(
        plots.Bars(
            "1. side by side, same windows",
            engines,
            {w: [rates.get((w, e), 0) for e in engines] for w in workloads},
            ylabel="M rows/s (log; higher is better)",
            yscale="log" if s1 else None,
            plain_log_labels=True,
            rotate=True,
        )
    )
    s2 = [r for r in sections.get("2", []) if r.get("rows_per_s")]
    panels.append(
        plots.Lines(
            "2. Fig. 14: pane-based vs per-window recomputation (1 thread)",
            {
                e: plots.points(s2, "panes_per_window", "rows_per_s", scale=1e6, engine=e)
                for e in ("pane", "recompute")
            },
            xlabel="panes per window",
            ylabel="M rows/s",
            xscale=("log", 2) if s2 else None,
            styles={"pane": "-o", "recompute": "--s"},
            twin={
                "time ratio paned/windowed": sorted(
                    {(r["panes_per_window"], r["ratio"]) for r in s2 if r.get("ratio")}
                )
            },
            twin_label="paned / windowed time (grey)",
            ymin=0,
        )
    )
    for key, name in (("3", "3. Fig. 8: PLQ schedulers"), ("4", "4. Figs. 12-13: WLQ schedulers")):
        rs = [r for r in sections.get(key, []) if r.get("rows_per_s")]
        bursts = list(dict.fromkeys(r["burst"] for r in rs))
        rates = {(r["engine"], r["burst"]): r["rows_per_s"] / 1e6 for r in rs}
        farm_threads = max((r.get("threads") or 1) for r in rs) if rs else "?"
        panels.append(
            plots.Bars(
                f"{name} (farm at {farm_threads} threads)",
                bursts,
                {e: [rates.get((e, b), 0) for b in bursts] for e in dict.fromkeys(r["engine"] for r in rs)},
                xlabel="burstiness",
                ylabel="M rows/s",
            )
        )
    return plots.figure(path, title, panels, ncols=2, panel_size=(7.5, 5.25), dpi=110)


# --------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runner.parser(
        __doc__,
        rows=200_000,
        rows_help="section 1 rows per workload (default 200,000)",
        quick="smoke test: 20,000 / 30,000 / 60,000 / 100,000 rows (sections 1-4)",
        repeat=3,
        threads="1,2",
        threads_help="thread counts for the farm, DuckDB, Polars (default 1,2)",
    )
    p.add_argument("--rows-fig14", type=int, default=200_000, help="section 2 rows (default 200,000)")
    p.add_argument(
        "--rows-fig8", type=int, default=300_000, help="section 3 rows per level (default 300,000)"
    )
    p.add_argument(
        "--rows-fig12", type=int, default=1_000_000, help="section 4 rows per level (default 1,000,000)"
    )
    p.add_argument(
        "--budget",
        type=float,
        default=8.0,
        help="seconds per configuration: no further run once another would exceed it (default 8)",
    )
    p.add_argument("--sections", default=",".join(SECTIONS), help="comma list of 1,2,3,4 (default all)")
    p.add_argument(
        "--engines", default=",".join(ENGINES), help=f"section 1 engines (default {','.join(ENGINES)})"
    )
    p.add_argument(
        "--lateness",
        default="0",
        help="windgate lateness in sections 1-2 (default 0: the rows are in event-time order, so nothing is "
        "late; 'none' for lateness=None)",
    )
    p.add_argument(
        "--sample-interval",
        type=float,
        default=0.05,
        help="farm monitor/PID period in seconds (default 0.05; a run lasts ~0.1-1 s)",
    )
    p.add_argument("--polars-timeout", type=float, default=900.0, help="seconds per Polars subprocess")
    runner.add_worker_options(p, "--tasks")
    args = p.parse_args(argv)
    args.threads = runner.thread_counts(args.threads)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if unknown := sorted(set(args.sections) - set(SECTIONS)):
        p.error(f"unknown section(s) {', '.join(unknown)}; choose from 1,2,3,4")
    args.engines = runner.engine_list(p, args.engines, ENGINES)
    args.lateness = (
        None
        if args.lateness.lower() == "none"
        else (int(args.lateness) if args.lateness.lstrip("-").isdigit() else args.lateness)
    )
    if args.quick:
        args.rows, args.rows_fig14, args.rows_fig8, args.rows_fig12 = 20_000, 30_000, 60_000, 100_000
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker == "polars":
        polars_worker(args.tasks)
        return 0

    run = runner.Run(NAME, args.out)
    try:
        wg = Windgate()
    except Exception as exc:  # the wheel may be missing or half-built
        log(f"windgate is not importable: {type(exc).__name__}: {exc}")
        wg = None
    if wg is not None and not wg.available:
        log(f"windgate: {wg.why}; its rows are skipped")
    sections: dict[str, list[dict]] = {}
    facts: dict[str, dict] = {}
    tmp = Path(tempfile.mkdtemp(prefix="windgate-pref-"))
    t_start = time.perf_counter()
    try:
        if "1" in args.sections:
            log("section 1: side by side")
            sections["1"] = section1(args, wg, tmp)
        wg_ok = wg is not None and wg.available
        if "2" in args.sections:
            if wg_ok:
                log("section 2: Fig. 14, pane vs recompute")
                sections["2"] = section2(args, wg)
            else:
                sections["2"] = [
                    skipped("windgate", "windgate's preference API is not installed", section="2")
                ]
        for s in ("3", "4"):
            if s not in args.sections:
                continue
            if wg_ok and wg.streaming:
                log(f"section {s}: {'Fig. 8, PLQ' if s == '3' else 'Figs. 12-13, WLQ'} schedulers")
                sections[s], facts[s] = scheduler_section(args, wg, s)
            else:
                sections[s] = [skipped("windgate", "windgate.SkylineQuery is not installed", section=s)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - t_start

    s1 = sections.get("1", [])
    load = run.load()
    busy_at_start, others = load["cpu_busy_at_start"], load["cpu_busy_by_others"]
    params = {
        "sections": args.sections,
        "rows_side_by_side": args.rows,
        "side_by_side": f"size {S1_SIZE_MS} ms, slide {S1_SLIDE_MS} ms, {S1_RATE:g} rows/s; top-{TOPK_K} by "
        f"{TOPK_SCORE} descending",
        "rows_fig14": args.rows_fig14,
        "fig14": f"d={S2_DIMS}, size {S2_SIZE_MS} ms, slides {list(S2_SLIDES_MS)} ms",
        "rows_fig8": args.rows_fig8,
        "fig8": f"d={S3_DIMS}, {S3_RATE:g} rows/s, size {S3_SIZE_MS} ms, slide {S3_SLIDE_MS} ms",
        "rows_fig12": args.rows_fig12,
        "fig12_13": f"d={S4_DIMS}, {S4_RATE:g} rows/s, size {S4_SIZE_MS} ms, slide {S4_SLIDE_MS} ms",
        "threads": args.threads,
        "repeat": args.repeat,
        "budget_s": args.budget,
        "lateness": args.lateness,
        "sample_interval": args.sample_interval,
        "stream_batch_rows": STREAM_BATCH,
        "seed": args.seed,
        "elapsed_s": round(elapsed, 1),
        "cpu_busy_at_start": busy_at_start,
        "cpu_busy_by_others": others,
    }
    load = (
        f"Machine load: other processes kept {busy_at_start:.0%} of the cores busy just before the run and "
        f"{others:.0%} during it"
        if busy_at_start is not None and others is not None
        else "Machine load: unknown (no /proc/stat)"
    )
    if others is not None and others > 0.1:
        load += " (more than 10%: the timings are skewed)"
    notes = [
        load + ".",
        "rows/s: input rows over the best wall time (data already in each engine's memory format; output "
        "materialised: windgate and DuckDB to Arrow, Polars to a DataFrame). 'vs 1 core': over the same "
        "engine's 1-thread rows/s; 'windgate pane is': the engine's seconds over windgate pane's.",
        "check: (window_start, id) pairs equal to windgate pane's; windgate pane's equal to DuckDB's brute "
        "force (the definition in SQL); the farm's output equal to the pane engine's exactly.",
        "DuckDB: the brute force is an ANTI JOIN (a hash join on the window with the dominance predicate "
        "as a residual, stopping at the first dominator); written as NOT EXISTS it becomes a mark join that "
        "compares every pair of a window (~100x slower).",
        "Polars: join_where on the window and the dominance predicate materialises the dominated pairs; the "
        "brute force runs on the streaming engine to bound its memory.",
        "Pane-reduced SQL/Polars: Sky(U Sky(P_i)) = Sky(U P_i), the same decomposition windgate uses, "
        "written by hand; shows how much of windgate's lead is the algorithm and how much the engine.",
        f"windgate calls: {wg.via if wg is not None and wg.available else 'none (not installed)'}.",
    ]
    md_sections = []
    if "2" in sections:
        md_sections.append(
            "## 2. Fig. 14: pane-based vs per-window recomputation\n\n"
            f"{args.rows_fig14:,} independent points, d={S2_DIMS}, windows of {S2_SIZE_MS} ms, 1 thread; "
            "ratio = pane seconds / recompute seconds "
            "(the paper's metric, < 1 means the pane-based approach is faster).\n\n"
            + report.markdown_table(sections["2"], S2_COLUMNS)
        )
    for key, cols, title, rows in (
        ("3", S3_COLUMNS, "## 3. Fig. 8: PLQ schedulers under burstiness", args.rows_fig8),
        ("4", S4_COLUMNS, "## 4. Figs. 12-13: WLQ schedulers (WIN_RR vs WIN_FB)", args.rows_fig12),
    ):
        if key not in sections:
            continue
        spec = (
            f"skyline d={S3_DIMS}, {S3_RATE:g} rows/s, windows {S3_SIZE_MS} ms / {S3_SLIDE_MS} ms, WIN_FB"
            if key == "3"
            else f"skyline d={S4_DIMS}, {S4_RATE:g} rows/s, windows {S4_SIZE_MS} ms / {S4_SLIDE_MS} ms "
            f"({S4_SIZE_MS // S4_SLIDE_MS} panes per window), AS_PID"
        )
        text = (
            f"{title}\n\n{rows:,} rows per level, {spec}; SkylineQuery.push in {STREAM_BATCH:,}-row batches, "
            f"lateness=0, sample_interval {args.sample_interval} s; 'vs pane 1t' = over strategy='pane' on 1 "
            "thread on the same batches; unbalance = (1 - min/max) * 100 over the workers' busy seconds.\n\n"
            + report.markdown_table(sections[key], cols)
        )
        if facts.get(key):
            pane_ms = math.gcd(S3_SIZE_MS, S3_SLIDE_MS) if key == "3" else math.gcd(S4_SIZE_MS, S4_SLIDE_MS)
            text += "\n\nWorkloads:\n\n" + facts_table(facts[key], pane_ms)
        md_sections.append(text)

    title = (
        f"Preference queries: skyline and top-{TOPK_K}, {args.rows:,} points, windows "
        f"{S1_SIZE_MS} ms / {S1_SLIDE_MS} ms"
    )
    # The other sections' results go into the JSON next to section 1's.
    extra = {"windgate_extension": run.build, "workloads": facts}
    for key, name in (("2", "fig14"), ("3", "fig8"), ("4", "fig12_13")):
        if key in sections:
            extra[name] = [report.finish(dict(r)) for r in sections[key]]
    paths = run.write(
        title=title,
        params=params,
        notes=notes,
        columns=S1_COLUMNS,
        sections=md_sections,
        plot=lambda _s1, path, title: plot(sections, path, title),
        results=s1,
        extra=extra,
    )

    if s1:
        print(report.markdown_table(s1, S1_COLUMNS))
    for text in md_sections:
        print()
        print(text)
    print()
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    bad = [  # a wrong result anywhere, or windgate raising (sections 2-4 run windgate only)
        r
        for key, rs in sections.items()
        for r in rs
        if str(r.get("check", "")).startswith("FAIL")
        or (r.get("error") and (key != "1" or str(r.get("engine", "")).startswith("windgate")))
    ]
    for r in bad:
        print(
            f"FAIL: section {r.get('section')}, {r.get('workload') or r.get('burst') or ''} {r['engine']} "
            f"({r.get('threads')} threads): {r.get('error') or r['check']}"
        )
    return 1 if bad else 0
