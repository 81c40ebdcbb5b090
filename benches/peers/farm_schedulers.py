"""Pane-farm schedulers under bursty arrivals: the shape of Fig. 8 of Mencagli, Torquati, Danelutto and
De Matteis, *Parallel Continuous Preference Queries over Out-of-Order and Bursty Data Streams*, for window
aggregation.

The pane farm (``strategy="farm"``) splits each pane's rows over pane-level query (PLQ) workers with a pane
scheduler and combines partitions into windows on window-level query (WLQ) workers with a window
scheduler. This compares

* the pane schedulers PB_RR, TB_RR, AS and AS_PID, all with WIN_FB, and
* the window schedulers WIN_FB and WIN_RR, both with AS_PID,

at 1, 2 and 4 threads (4 is oversubscribed on a 2-core machine and marked so) under no, low, medium and high
burstiness: :func:`windgate.datasets.smartgrid` rows with ``dispersion`` None (regular arrivals), 1000, 2500
and 6000 (the index of dispersion of the reading arrivals, the paper's measure of burstiness), at the same
mean rate.

The query: 1000 plugs keyed by ``plug_id``, windows of 60 s sliding by 10 s on ``ts`` (so 10 s panes: at the
default 1000 rows/s of event time, 4 M rows span ~4000 s, i.e. ~400 panes of ~10,000 rows on average, and
bursts make some panes many times larger), ``{"*": "count", "value": ["sum", "max"]}``, ``lateness=0``, rows
pushed through :class:`windgate.WindowAggregator` in 65,536-row batches so that the farm's ``stats`` are
available. Per configuration: rows/s (best of ``--repeats``), mean PLQ utilisation, split factor, panes
split, and load unbalance ``(1 - min/max) * 100`` over the PLQ workers' busy seconds. Every run's output
must equal ``strategy="pane"``'s on the same batches (exactly, as Arrow tables); any difference prints FAIL
and the script exits 1.

    .venv/bin/python -m benches.peers farm_schedulers            # 4 M rows per burstiness level
    .venv/bin/python -m benches.peers farm_schedulers --quick    # 1 M rows

Results: ``<out>/farm_schedulers.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import plot as plots
from . import report, runner
from .report import failure, log

NAME = "farm_schedulers"
TIME, KEY = "ts", "plug_id"
SIZE, SLIDE, PANE_MS = "60s", "10s", 10_000
AGGS = {"*": "count", "value": ["sum", "max"]}
BATCH = 65_536
#: (label, index of dispersion passed to smartgrid)
BURSTINESS = (("none", None), ("low", 1000), ("medium", 2500), ("high", 6000))
#: (pane scheduler, window scheduler): the four pane schedulers with WIN_FB, then AS_PID with WIN_RR.
CONFIGS = (
    ("pb_rr", "win_fb"),
    ("tb_rr", "win_fb"),
    ("as", "win_fb"),
    ("as_pid", "win_fb"),
    ("as_pid", "win_rr"),
)

COLUMNS = (
    ("burst", "burstiness"),
    ("threads_label", "threads"),
    ("engine", "scheduler"),
    ("workers", "PLQ+WLQ"),
    ("rows_per_s", "rows/s (best)"),
    ("speedup", "vs 1 thread"),
    ("vs_pane", "vs pane", lambda x: f"{x:.2f}x"),
    ("utilisation", "utilisation", lambda x: f"{x:.2f}"),
    ("split_factor", "split factor", lambda x: f"{x:.2f}"),
    ("panes_split", "panes split", lambda x: f"{x:,}"),
    ("unbalance_pct", "unbalance %", lambda x: f"{x:.1f}"),
    ("check", "check"),
)


def label(sched: str, win: str) -> str:
    return f"{sched.upper()} + {win.upper()}"


def run_stream(batches: list[pa.RecordBatch], threads: int, strategy: str, farm: dict | None):
    """Push every batch, flush; return (seconds, output table, stats)."""
    import windgate

    t0 = time.perf_counter()
    agg = windgate.WindowAggregator(
        time=TIME,
        size=SIZE,
        slide=SLIDE,
        by=KEY,
        aggs=AGGS,
        lateness=0,
        threads=threads,
        strategy=strategy,
        farm=farm,
    )
    parts = [o for o in map(agg.push, batches) if o.num_rows]
    parts.append(agg.flush())
    seconds = time.perf_counter() - t0
    return seconds, pa.Table.from_batches(parts), agg.stats


def measure(batches, threads, strategy, farm, repeats, ref: pa.Table) -> dict:
    """Best of ``repeats`` runs; the stats are the best run's. ``check`` compares every run's output with
    ``ref``, the output of strategy='pane'."""
    runs, best, problems, out = [], None, [], None
    for _ in range(max(1, repeats)):
        out = None
        gc.collect()
        seconds, out, stats = run_stream(batches, threads, strategy, farm)
        runs.append(seconds)
        if not out.equals(ref):
            problems.append(report.describe_difference(out, ref, "pane"))
        if best is None or seconds < best[0]:
            best = (seconds, stats)
    busy = best[1].get("plq_busy_s") or []
    r = {
        "threads": threads,
        "seconds": best[0],
        "runs": runs,
        "out_rows": out.num_rows,
        "stats": best[1],
        "utilisation": best[1].get("utilisation"),
        "split_factor": best[1].get("split_factor"),
        "panes_split": best[1].get("panes_split"),
        "workers": f"{len(busy)}+{len(best[1].get('wlq_busy_s') or [])}" if busy else None,
        "unbalance_pct": (1 - min(busy) / max(busy)) * 100 if busy and max(busy) > 0 else None,
        "check": "ok (= pane)",
    }
    if problems:
        r["check"] = f"FAIL in {len(problems)} of {len(runs)} runs: {problems[0]}"
    return r


def workload(table: pa.Table) -> dict:
    """Facts about one data set: event-time span, panes and rows per pane, measured index of dispersion."""
    from windgate.bursty import estimate_dispersion

    ts = table.column(TIME).cast(pa.int64()).to_numpy()
    per_pane = np.bincount((ts - ts[0] // PANE_MS * PANE_MS) // PANE_MS)
    per_pane = per_pane[per_pane > 0]
    try:
        measured = float(f"{estimate_dispersion(ts[::2] / 1000.0):.3g}")  # readings: 2 rows share a ts
    except Exception:  # too short a trace
        measured = None
    return {
        "span_s": round((int(ts[-1]) - int(ts[0])) / 1000, 1),
        "panes": int(per_pane.size),
        "rows_per_pane_mean": round(float(per_pane.mean()), 1),
        "rows_per_pane_max": int(per_pane.max()),
        "rows_per_pane_cv": round(float(per_pane.std() / per_pane.mean()), 3),
        "measured_dispersion": measured,
    }


def plot(results, path: Path, title: str) -> Path | None:
    """Throughput vs threads, one line per scheduler, one panel per burstiness level."""
    cores = os.cpu_count() or 1
    panels = []
    for burst, _ in BURSTINESS:
        mine = [r for r in results if r["burst"] == burst and r.get("rows_per_s")]
        threads = sorted({r["threads"] for r in mine})
        names = [label(s, w) for s, w in CONFIGS]
        pane = [r["rows_per_s"] / 1e6 for r in mine if r["engine"] == "pane (reference)"]
        panels.append(
            plots.Lines(
                mine[0]["burst_title"] if mine else burst,
                {n: plots.points(mine, "threads", "rows_per_s", scale=1e6, engine=n) for n in names},
                xlabel=f"threads (* > {cores} cores)",
                ylabel="M rows/s (higher is better)",
                xscale=("log", 2),
                styles={label(s, w): "--o" if w == "win_rr" else "-o" for s, w in CONFIGS},
                hlines=[(pane[0], "pane, 1 thread")] if pane else (),
                xticks=threads,
                xtick_labels=[f"{t}*" if t > cores else str(t) for t in threads],
                shade_after=cores,
                ymin=0,
            )
        )
    return plots.figure(
        path, title, panels, ncols=len(panels), panel_size=(4, 4.2), shared_legend=True, sharey=True
    )


def workload_table(workloads: dict) -> str:
    """Markdown: the data sets, one row per burstiness level."""
    lines = [
        "| burstiness | dispersion | measured | panes | rows/pane (mean) | rows/pane (max) | CV rows/pane |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for burst, w in workloads.items():
        lines.append(
            f"| {burst} | {w['dispersion'] or 'regular'} | {w['measured_dispersion']} | {w['panes']} | "
            f"{w['rows_per_pane_mean']:,.0f} | {w['rows_per_pane_max']:,} | {w['rows_per_pane_cv']} |"
        )
    return "Workloads (index of dispersion of the reading arrivals, measured on the trace):\n\n" + "\n".join(
        lines
    )


def pivot(results, threads: list[int]) -> str:
    """Markdown: M rows/s per scheduler (rows) and burstiness x threads (columns), like Fig. 8."""
    cols = [(b, t) for b, _ in BURSTINESS for t in threads]
    cores = os.cpu_count() or 1
    head = ["scheduler"] + [f"{b} {t}t{'*' if t > cores else ''}" for b, t in cols]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(cols)]
    for name in ["pane (reference)"] + [label(s, w) for s, w in CONFIGS]:
        cells = []
        for b, t in cols:
            hit = [r for r in results if r["engine"] == name and r["burst"] == b and r["threads"] == t]
            cells.append(f"{hit[0]['rows_per_s'] / 1e6:.1f}" if hit and hit[0].get("rows_per_s") else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return (
        f"Throughput in M rows/s (best of the repeats; * = more threads than the {cores} cores):\n\n"
        + "\n".join(lines)
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runner.parser(
        __doc__,
        rows=4_000_000,
        rows_help="rows per burstiness level (default 4,000,000)",
        quick="1,000,000 rows (smoke test); overrides --rows",
        repeat=3,
        repeat_flag="--repeats",
        threads="1,2,4",
    )
    p.add_argument(
        "--sample-interval",
        type=float,
        default=0.01,
        help="farm monitor/PID period in seconds (default 0.01: a run lasts ~0.1-0.5 s, and the engine's\n"
        "default of 1 s would take no sample at all, leaving utilisation 0 and AS_PID's alpha at 1)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 1_000_000
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import windgate  # noqa: F401  (fail early, before generating data, when the wheel is missing)
    from windgate.datasets import smartgrid

    threads = runner.thread_counts(args.threads)
    cores = os.cpu_count() or 1
    run = runner.Run(NAME, args.out)
    workloads = {}
    for burst, dispersion in BURSTINESS:
        t0 = time.perf_counter()
        table = smartgrid(args.rows, seed=args.seed, dispersion=dispersion).combine_chunks()
        batches = table.to_batches(max_chunksize=BATCH)
        w = workloads[burst] = {"dispersion": dispersion, **workload(table)}
        title = (
            f"{burst}: I={dispersion}, measured {w['measured_dispersion']}" if dispersion else "none: regular"
        )
        log(
            f"{burst}: {args.rows:,} rows, dispersion {dispersion} (measured {w['measured_dispersion']}), "
            f"{w['panes']} panes of {w['rows_per_pane_mean']:,.0f} rows (max {w['rows_per_pane_max']:,}, "
            f"CV {w['rows_per_pane_cv']}), generated in {time.perf_counter() - t0:.1f} s"
        )
        common = {"burst": burst, "burst_title": title, "dispersion": dispersion, "rows": args.rows}
        ref = run_stream(batches, 1, "pane", None)[1]  # untimed: the reference output, and a warm-up
        r = measure(batches, 1, "pane", None, args.repeats, ref)
        pane_rate = args.rows / r["seconds"]
        pane = {**common, "engine": "pane (reference)", "scaling_group": f"{burst} pane", **r}
        run.add(
            {**pane, "threads_label": "1"},
            f"  pane, 1 thread: {pane_rate / 1e6:.2f} M rows/s, {ref.num_rows:,} rows out",
        )
        for sched, win in CONFIGS:
            name = label(sched, win)
            farm = {"scheduler": sched, "window_scheduler": win, "sample_interval": args.sample_interval}
            for n in threads:
                row = {**common, "engine": name, "scaling_group": f"{burst} {name}", "farm": farm}
                row["threads_label"] = f"{n} (oversubscribed)" if n > cores else str(n)
                try:
                    r = measure(batches, n, "farm", farm, args.repeats, ref)
                except Exception as exc:  # report this configuration, go on
                    r = failure(name, n, exc)
                row.update(r)
                progress = ""
                if r.get("seconds"):
                    row["vs_pane"] = args.rows / r["seconds"] / pane_rate
                    progress = (
                        f"  {name}, {n} threads: {args.rows / r['seconds'] / 1e6:.2f} M rows/s, "
                        f"utilisation {r['utilisation']:.2f}, split factor {r['split_factor']:.2f}, "
                        f"unbalance {r['unbalance_pct'] or 0:.1f}%, {r['check']}"
                    )
                if r.get("check", "").startswith("FAIL"):
                    print(f"FAIL: {name}, {n} threads, burstiness {burst}: {r['check']}", flush=True)
                run.add(row, progress or None)
        del table, batches, ref

    results = run.results
    report.add_speedups(results)
    failed = run.failed(errors=True)
    params = {
        "rows": args.rows,
        "keys": 1000,
        "size": SIZE,
        "slide": SLIDE,
        "aggs": "count, sum(value), max(value)",
        "lateness": 0,
        "batch_rows": BATCH,
        "threads": threads,
        "repeats": args.repeats,
        "sample_interval": args.sample_interval,
        "seed": args.seed,
        **run.load(),
        "workloads": workloads,
    }
    notes = [
        "rows/s: rows over the wall time of building a WindowAggregator, pushing every batch and flushing "
        "(best of the repeats; data generation and batch slicing are not timed). Stats are the best run's.",
        "vs 1 thread: over the same scheduler at 1 thread (same burstiness); vs pane: over strategy='pane' "
        "(the single-threaded pane engine) on the same batches.",
        "threads=n runs n PLQ workers and the WLQ workers of the PLQ+WLQ column (from the stats), plus the "
        "WLQ emitter and the caller (PLQ emitter and collector), so even 2 threads oversubscribe the "
        f"{cores} cores somewhat; 'oversubscribed' marks n > {cores}.",
        "utilisation: the farm's mean PLQ rho (busy share of each sampling period) as sampled by its monitor "
        f"every {args.sample_interval} s; split factor: mean PLQ partitions per pane; unbalance: "
        "(1 - min/max) * 100 over the PLQ workers' busy seconds (0 with 1 thread).",
        "check: every run's output equals the output of strategy='pane' exactly (pyarrow Table.equals).",
    ]
    paths = run.write(
        title=f"Pane-farm schedulers under burstiness: {args.rows:,} rows, 1k keys, 60s/10s windows",
        params=params,
        notes=notes,
        columns=COLUMNS,
        sections=[pivot(results, threads), workload_table(workloads)],
        plot=plot,
    )
    print(report.markdown_table(results, COLUMNS))
    print()
    print(pivot(results, threads))
    print()
    print(workload_table(workloads))
    print()
    return run.done(paths, failed, what="burst")
