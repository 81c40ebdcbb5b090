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
import math
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from . import plot as plots
from . import report, runner
from .preference_common import (
    STREAM_BATCH,
    TIME,
    TOPK_K,
    TOPK_SCORE,
    Windgate,
    compare_pairs,
    dims_of,
    pairs_of,
    skipped,
)
from .preference_peers import (
    duckdb_skyline_brute,
    duckdb_skyline_paned,
    duckdb_topk,
    polars_worker,
    run_polars,
)
from .preference_schedulers import (
    S3_COLUMNS,
    S3_DIMS,
    S3_RATE,
    S3_SIZE_MS,
    S3_SLIDE_MS,
    S4_COLUMNS,
    S4_DIMS,
    S4_RATE,
    S4_SIZE_MS,
    S4_SLIDE_MS,
    facts_table,
    scheduler_section,
)
from .report import best_of, failure, log

NAME = "preference"

# Section 1: side by side.
S1_SIZE_MS, S1_SLIDE_MS, S1_RATE = 1000, 250, 1000.0
S1_WORKLOADS = (("independent", 2), ("independent", 4), ("anticorrelated", 2))
# Section 2 (Fig. 14): window size and slides (panes per window = size / slide).
S2_SIZE_MS, S2_SLIDES_MS, S2_DIMS, S2_RATE = 1600, (800, 400, 200, 100), 4, 1000.0
SECTIONS = ("1", "2", "3", "4")

#: Section 1's engines, in the order they run (windgate first: it is every other engine's reference).
ENGINES = ("windgate", "duckdb", "polars")


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
                    best, runs, out = best_of(
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
                            best, runs, out = best_of(
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
                best, runs, out = best_of(
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
