"""Micro-benchmarks of the ordered-pipeline runtime (B2, B3, B5, B6), after the evaluation of Prasaad,
Ramalingam and Rajan, *Scaling Ordered Stream Processing on Shared-Memory Multicores*; run by the Rust binary
``benches/src/bin/pipeline_micro.rs`` and reported here as Markdown tables and a PNG.

The binary's operators busy-wait a set time per item, so each figure isolates the runtime's overhead:

* **B2** (paper Fig. 9, skew): one partitioned operator (20 µs an item), keys from N(-0.5, σ) over a range
  partitioner; HYBRID (p = 100) against PARTITIONED (p = threads); speed-up of 2 threads over 1, per σ.
  Paper: equal when keys are near uniform (large σ); PARTITIONED falls as skew grows (small σ).
* **B3** (Fig. 10, latency vs cost): one partitioned operator, uniform keys, 10, 100 and 1000 µs an item,
  2 threads; the markers' processing latency (20-80th percentile mean). Paper: HYBRID's latency is close to
  the cost, PARTITIONED's much higher (outputs wait in the reorder buffer).
* **B5** (Fig. 12, light stateless operator): 0, 2 and 10 µs an item; NON-BLOCKING against LOCK-BASED
  reordering; speed-up and the operator's average cost per item (including time blocked). Paper:
  NON-BLOCKING scales better, LOCK-BASED's cost rises more steeply.
* **B6** (Fig. 13, selectivity 50): a stateless operator (20 µs, 50 outputs an input) into a partitioned one
  (4 µs); both reorder schemes; pipeline speed-up and the first operator's cost. Paper: NON-BLOCKING better.

Every row also carries the sequential executor's time on the same input; "overhead" is the parallel
executor on 1 thread over it. Items are the binary's input items; this machine has 2 cores, so the paper's
sweeps to 16 cores are cut to 1 and 2 threads.

    .venv/bin/python -m benches.peers pipeline --out bench-results            # about 2 minutes
    .venv/bin/python -m benches.peers pipeline --out bench-results --quick    # about 20 seconds

The script builds the binary (``cargo build --release -p windgate-benches --bin pipeline_micro``), then runs
it as ``pipeline_micro <bench> [--quick]``, which is what ``cargo run --release -p windgate-benches --bin
pipeline_micro -- <bench> [--quick]`` runs, and parses its JSON lines. Results:
``<out>/pipeline.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from . import plot as plots
from . import report, runner
from .report import ROOT, fmt_rate, log

NAME = "pipeline"
BENCHES = ("b2", "b3", "b5", "b6")
BUILD = ["cargo", "build", "--release", "-p", "windgate-benches", "--bin", "pipeline_micro"]
#: The binary's "bench" field per benchmark.
FIELD = {"b2": "b2_skew", "b3": "b3_latency", "b5": "b5_light_stateless", "b6": "b6_high_selectivity"}
TITLES = {
    "b2_skew": "B2 (Fig. 9): skewed keys, HYBRID (p = 100) vs PARTITIONED (p = threads), 20 µs an item",
    "b3_latency": "B3 (Fig. 10): processing latency vs per-item cost, uniform keys, 2 threads",
    "b5_light_stateless": "B5 (Fig. 12): light stateless operator, NON-BLOCKING vs LOCK-BASED reordering",
    "b6_high_selectivity": "B6 (Fig. 13): stateless (20 µs, selectivity 50) -> partitioned (4 µs)",
}


def build() -> Path:
    """``cargo build --release`` of ``pipeline_micro``; returns the executable's path (from cargo's JSON
    messages, so ``CARGO_TARGET_DIR`` is honoured). The benchmark then runs that file, not ``cargo run``: a
    ``cargo run`` could wait for another build's lock or rebuild sources edited meanwhile, inside the timed
    part."""
    cmd = [*BUILD, "--message-format=json-render-diagnostics"]
    log("building: " + " ".join(BUILD))
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
    for line in proc.stdout.splitlines():
        msg = json.loads(line) if line.startswith("{") else {}
        artifact = msg.get("reason") == "compiler-artifact" and msg.get("executable")
        if artifact and msg["target"]["name"] == "pipeline_micro":
            return Path(msg["executable"])
    raise RuntimeError("cargo build did not report the pipeline_micro executable")


def run_binary(exe: Path, bench: str, quick: bool) -> list[dict]:
    """Run ``pipeline_micro`` and return its JSON objects (other stdout lines are logged and skipped)."""
    cmd = [str(exe), bench, *(["--quick"] if quick else [])]
    log("running " + " ".join(cmd))
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
    rows = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            log(f"skipped a line that is not JSON: {line[:120]}")
    return rows


def enrich(r: dict) -> dict:
    """Adds ``overhead`` (parallel over sequential seconds, on 1 thread only) and the columns the report
    helpers know (``engine``, ``seconds``)."""
    r = dict(r)
    r["engine"] = r["bench"]
    r["threads"] = int(r["threads"])
    if r["threads"] == 1 and r.get("sequential_seconds"):
        r["overhead"] = r["seconds"] / r["sequential_seconds"]
    return r


# --------------------------------------------------------------------------------------------- tables


def _f(digits: int):
    return lambda v: f"{v:.{digits}f}"


def _x(v) -> str:
    return f"{v:.2f}x"


COMMON = (
    ("threads", "threads"),
    ("items_per_s", "items/s", fmt_rate),
    ("seconds", "seconds", _f(3)),
    ("sequential_seconds", "sequential s", _f(3)),
    ("overhead", "1-thread overhead", _x),
)
COLUMNS = {
    "b2_skew": (
        ("sigma", "σ", lambda v: f"{v:g}"),
        ("partitioning", "partitioning"),
        ("partitions", "p", lambda v: f"{v:.0f}"),
        *COMMON,
        ("speedup", "speed-up vs 1 thread", _x),
        ("latency_ms", "latency ms", _f(3)),
    ),
    "b3_latency": (
        ("cost_us", "cost µs", lambda v: f"{v:.0f}"),
        ("partitioning", "partitioning"),
        ("partitions", "p", lambda v: f"{v:.0f}"),
        *COMMON,
        ("latency_ms", "latency ms", _f(3)),
        ("latency_over_cost", "latency / cost", _x),
    ),
    "b5_light_stateless": (
        ("cost_us", "cost µs", lambda v: f"{v:.0f}"),
        ("reorder", "reorder"),
        *COMMON,
        ("speedup", "speed-up vs 1 thread", _x),
        ("first_op_cost_us", "cost per item µs (incl. blocked)", _f(3)),
        ("refused", "refused deposits", lambda v: f"{v:,.0f}"),
    ),
    "b6_high_selectivity": (
        ("reorder", "reorder"),
        *COMMON,
        ("speedup", "speed-up vs 1 thread", _x),
        ("first_op_cost_us", "first operator's cost µs", _f(2)),
        ("refused", "refused deposits", lambda v: f"{v:,.0f}"),
    ),
}

SUMMARY_COLUMNS = (
    ("bench", "benchmark"),
    ("paper", "the paper says"),
    ("measured", "measured here"),
)


def summary(results: list[dict]) -> list[dict]:
    """One row per benchmark: what the paper says and the numbers that test it."""
    by = {b: [r for r in results if r["bench"] == b] for b in TITLES}
    out = []

    def find(rows, **kv):
        return next((r for r in rows if all(r.get(k) == v for k, v in kv.items())), None)

    if rows := by["b2_skew"]:
        parts = []
        for sigma in sorted({r["sigma"] for r in rows}):
            h = find(rows, sigma=sigma, partitioning="hybrid", threads=2)
            p = find(rows, sigma=sigma, partitioning="partitioned", threads=2)
            if h and p:
                parts.append(f"σ={sigma:g}: hybrid {h['speedup']:.2f}x, partitioned {p['speedup']:.2f}x")
        out.append(
            {
                "bench": "B2 skew",
                "paper": "similar when near uniform; PARTITIONED's scaling drops as skew grows",
                "measured": "speed-up 1 -> 2 threads; " + "; ".join(parts),
            }
        )
    if rows := by["b3_latency"]:
        parts = [
            f"{r['cost_us']:.0f} µs: {r['partitioning']} {r['latency_ms']:.3f} ms"
            for r in sorted(rows, key=lambda r: (r["cost_us"], r["partitioning"]))
        ]
        out.append(
            {
                "bench": "B3 latency vs cost",
                "paper": "HYBRID's latency close to the cost; PARTITIONED much higher",
                "measured": "2 threads; " + "; ".join(parts),
            }
        )
    if rows := by["b5_light_stateless"]:
        parts = []
        for cost in sorted({r["cost_us"] for r in rows}):
            nb = find(rows, cost_us=cost, reorder="nonblocking", threads=2)
            lk = find(rows, cost_us=cost, reorder="locked", threads=2)
            if nb and lk:
                parts.append(
                    f"{cost:.0f} µs: non-blocking {nb['speedup']:.2f}x "
                    f"({nb['first_op_cost_us']:.2f} µs/item), locked {lk['speedup']:.2f}x "
                    f"({lk['first_op_cost_us']:.2f} µs/item)"
                )
        out.append(
            {
                "bench": "B5 light stateless",
                "paper": "NON-BLOCKING scales better; LOCK-BASED's per-item cost rises more steeply",
                "measured": "speed-up 1 -> 2 threads; " + "; ".join(parts),
            }
        )
    if rows := by["b6_high_selectivity"]:
        parts = []
        for reorder in ("nonblocking", "locked"):
            r = find(rows, reorder=reorder, threads=2)
            if r:
                parts.append(
                    f"{reorder} {r['speedup']:.2f}x (first operator {r['first_op_cost_us']:.1f} µs/item)"
                )
        out.append(
            {
                "bench": "B6 selectivity 50",
                "paper": "NON-BLOCKING better, even for heavier operators",
                "measured": "speed-up 1 -> 2 threads; " + "; ".join(parts),
            }
        )
    return out


def sections(results: list[dict]) -> list[str]:
    out = []
    for bench, title in TITLES.items():
        rows = [r for r in results if r["bench"] == bench]
        if not rows:
            continue
        if bench == "b3_latency":
            for r in rows:
                r["latency_over_cost"] = r["latency_ms"] * 1e3 / r["cost_us"]
        out.append(f"## {title}\n\n" + report.markdown_table(rows, COLUMNS[bench]))
    return out


# --------------------------------------------------------------------------------------------- plot


def plot(results, path, title):
    """B2: speed-up against skew; B3: latency against cost; B5, B6: speed-up per reorder scheme."""
    schemes = {"hybrid": "-o", "partitioned": "--s"}
    b2 = [r for r in results if r["bench"] == "b2_skew" and r["threads"] == 2]
    b3 = [r for r in results if r["bench"] == "b3_latency"]
    costs = sorted({r["cost_us"] for r in b3})
    panels: list[plots.Panel] = [
        plots.Lines(
            "B2 skew",
            {s: plots.points(b2, "sigma", "speedup", partitioning=s) for s in schemes},
            xlabel="σ (smaller = more skew)",
            ylabel="speed-up, 2 threads over 1",
            xscale="log",
            styles=schemes,
            hlines=[(1.0, "")],
            xticks=(),
        ),
        plots.Lines(
            "B3 latency vs cost",
            {
                **{s: plots.points(b3, "cost_us", "latency_ms", partitioning=s) for s in schemes},
                "latency = cost": [(c, c / 1e3) for c in costs],
            },
            xlabel="cost per item µs",
            ylabel="latency ms",
            xscale="log",
            yscale="log",
            styles={**schemes, "latency = cost": ":"},
            xticks=(),
        ),
    ]
    colors = {"nonblocking": "tab:orange", "locked": "tab:blue"}
    for bench, group in (("b5_light_stateless", "cost_us"), ("b6_high_selectivity", None)):
        rows = [r for r in results if r["bench"] == bench and r["threads"] == 2]
        keys = sorted({r[group] for r in rows}) if group else [None]

        def speedup(scheme, k, rows=rows, group=group):
            r = next((x for x in rows if x["reorder"] == scheme and (group is None or x[group] == k)), None)
            return r["speedup"] if r else 0.0

        panels.append(
            plots.Bars(
                TITLES[bench].split(":")[0],
                [f"{k:.0f} µs" for k in keys] if group else ["SL x50 -> PS"],
                {scheme: [speedup(scheme, k) for k in keys] for scheme in colors},
                ylabel="speed-up, 2 threads over 1",
                colors=colors,
                hline=1.0,
            )
        )
    return plots.figure(path, title, panels, ncols=2, panel_size=(5.5, 4.0), dpi=110)


# --------------------------------------------------------------------------------------------- main


def parse_args(argv):
    p = runner.parser(__doc__, quick="the binary's --quick sizes (smoke test)", seed=False)
    p.add_argument("--bench", default="all", choices=["all", *BENCHES], help="one benchmark or all (default)")
    p.add_argument(
        "--no-build",
        action="store_true",
        help="run target/release/pipeline_micro as it is, without cargo build",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.no_build:
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        exe = target / "release" / "pipeline_micro"
        if not exe.exists():
            log(f"--no-build: {exe} does not exist; build it first")
            return 1
        log(f"--no-build: running {exe} as built (not rebuilt; it may be older than the sources)")
    else:
        try:
            exe = build()
        except subprocess.CalledProcessError as exc:
            log(
                f"cargo build failed (exit {exc.returncode}); fix the build, or pass --no-build to run the "
                "binary built last"
            )
            return 1
    run = runner.Run(NAME, args.out, build=False)  # a compiler or a test next to the benchmark skews it
    results = [enrich(r) for r in run_binary(exe, args.bench, args.quick)]
    load = run.load()
    busy = load["cpu_busy_by_others"]
    if not results:
        log("the binary printed no results")
        return 1
    params = {
        "bench": args.bench,
        "quick": args.quick,
        "cpu_busy_at_start": load["cpu_busy_at_start"],
        "cpu_busy_by_others": busy,
        "command": " ".join([str(exe), args.bench, *(["--quick"] if args.quick else [])]),
        "built_now": not args.no_build,
    }
    notes = [
        "Items/s and seconds are one run each (the binary measures wall time of the whole run); compare the "
        "ratios within this run, not absolute numbers across runs.",
        "Latency: mean of the markers between the 20th and 80th percentile of arrival, from the first "
        "operator's start to leaving the last operator, as in the paper; B2/B5/B6 use a marker every 100 "
        "items, B3 about 50 markers a run. A marker costs nothing itself, so its latency is the time it "
        "waits behind earlier items (in queues and the reorder buffer), not an item's cost.",
        "1-thread overhead: the parallel executor on 1 worker over the sequential executor on the same input "
        "(the caller's thread feeds and collects besides the worker).",
        "Defaults: scheduler CT, S = 1024 reorder slots, τ = 500 µs, W = 20 ms (PipelineOptions::default).",
        f"Other processes kept the machine {busy:.0%} busy during the run." if busy is not None else "",
    ]
    paths = run.write(
        title="Ordered pipelines: the runtime's micro-benchmarks (B2, B3, B5, B6)",
        params=params,
        notes=[n for n in notes if n],
        columns=SUMMARY_COLUMNS,
        sections=sections(results),
        plot=lambda _summary, path, title: plot(results, path, title),
        results=summary(results),
        extra={"rows": results},  # the JSON keeps every row of the binary, not just the summary
    )
    print(paths["md"].read_text())
    return run.done(paths)
