"""``python -m benches.peers <suite> [options]``: run one peer suite, or ``all`` of them.

Each suite writes ``<out>/<suite>.{json,md,png}`` (default ``bench-results/``); ``<suite> --help`` lists
its options. ``all [--out DIR]`` runs the suites of :data:`ALL` one after the other, each in its own
process (a Spark JVM keeps the settings of the first session of a process), and stops at the first that
fails.
"""

from __future__ import annotations

import contextlib
import importlib
import subprocess
import sys

from .runner import DEFAULT_OUT, worker

#: Every suite: module name -> what it compares.
SUITES = {
    "window_aggregate": "sliding-window aggregation: windgate, Polars, DuckDB, pandas, Spark",
    "agg_scaling": "window aggregation rows/s against panes per window, keys, aggregates, threads; peers",
    "sessions": "session windows (gap=): windgate, DuckDB gaps and islands, Polars, Spark session_window",
    "farm_schedulers": "pane-farm schedulers under bursty arrivals",
    "thesis_approaches": "the disjoint-parallel aggregation approaches in the thesis' three settings",
    "band_join": "band join: windgate, DuckDB, Polars, Spark",
    "preference": "skyline and top-k preference queries: windgate, DuckDB, Polars",
    "multiway": "multiway aggregation designs against sources, windows and keys; peers on the union",
    "pipeline": "ordered-pipeline runtime micro-benchmarks (Rust binary)",
    "tpcxbb": "the TPCx-BB streaming queries: windgate's ordered pipelines, DuckDB, Spark",
    "spark": "windgate.spark against Spark's best plans on the same Parquet data",
    "spark_band_join": "windgate.spark.band_join against Spark's joins (not in all)",
    "streaming": "checkpoint costs; Structured Streaming: windgate against Spark's streaming window()",
}
#: What ``all`` (and ``make bench-peers``) runs, in this order, at each suite's default sizes.
ALL = (
    "window_aggregate",
    "agg_scaling",
    "sessions",
    "farm_schedulers",
    "thesis_approaches",
    "band_join",
    "preference",
    "multiway",
    "pipeline",
    "tpcxbb",
    "spark",
    "streaming",
)


def usage() -> str:
    width = max(map(len, SUITES))
    lines = [f"  {name:<{width}}  {what}" for name, what in SUITES.items()]
    return (
        "usage: python -m benches.peers <suite> [options]   (<suite> --help for its options)\n"
        "       python -m benches.peers all [--out DIR]\n\nsuites:\n" + "\n".join(lines)
    )


def run_all(argv: list[str]) -> int:
    """Run every suite of :data:`ALL` with ``--out`` in its own process; stop at the first failure."""
    out = DEFAULT_OUT
    if argv[:1] == ["--out"] and len(argv) == 2:
        out = argv[1]
    elif argv:
        print(f"all takes only --out DIR, not {' '.join(argv)}\n\n{usage()}", file=sys.stderr)
        return 2
    for suite in ALL:
        cmd, env = worker(suite, "--out", out)
        rc = subprocess.run(cmd, env=env, check=False).returncode
        if rc != 0:
            print(f"benches.peers all: {suite} exited with {rc}; stopped", file=sys.stderr)
            return rc
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    suite, rest = argv[0], argv[1:]
    if suite == "all":
        return run_all(rest)
    if suite not in SUITES:
        print(f"unknown suite {suite!r}\n\n{usage()}", file=sys.stderr)
        return 2
    sys.argv[0] = f"python -m benches.peers {suite}"  # argparse's usage line
    return importlib.import_module(f".{suite}", __package__).main(rest)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
