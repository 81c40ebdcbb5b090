"""The ``preference`` suite's sections 3 and 4: the pane farm's pane-level query (PLQ) schedulers (Fig. 8)
and window-level query (WLQ) schedulers (Figs. 12-13) of Mencagli, Torquati, Danelutto and De Matteis,
*Parallel Continuous Preference Queries over Out-of-Order and Bursty Data Streams*, under burstiness.
"""

from __future__ import annotations

import gc
import math
import time

import numpy as np
import pyarrow as pa

from . import report
from .preference_common import STREAM_BATCH, TIME, Windgate, dims_of, ms_int, unbalance
from .report import failure, fmt_rate, log

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
