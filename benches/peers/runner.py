"""The one runner of the peer suites: the options they share, the Polars worker subprocess, and a
:class:`Run` that measures the machine's load, records the results with a progress line each and ends the
run (report written, console summary, exit code).

A suite module declares its data, engines, checks, tables and plot, and calls these pieces from its
``main(argv)``; ``python -m benches.peers <suite>`` (see :mod:`benches.peers.__main__`) runs it. Timing
is :func:`report.best_of` (best of N after a garbage collection), failures :func:`report.failure`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from . import plot as plots
from . import report
from .report import DEFAULT_OUT, ROOT, log

# --------------------------------------------------------------------------------------------- options


def parser(
    doc: str | None,
    *,
    rows: int | None = None,
    rows_help: str | None = None,
    quick: str | None = None,
    repeat: int | None = None,
    repeat_flag: str = "--repeat",
    repeat_help: str | None = None,
    threads: str | None = None,
    threads_help: str | None = None,
    seed: bool = True,
    out: bool = True,
) -> argparse.ArgumentParser:
    """An argument parser holding the options common to the suites: ``--out`` and ``--seed`` unless
    ``out`` or ``seed`` is false, and ``--rows``, ``--quick``, ``--repeat`` (or ``repeat_flag``) and
    ``--threads`` when their default (or, for ``--quick``, its help text) is given. The description is the
    first paragraph of ``doc`` (the suite's docstring)."""
    p = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    if rows is not None:
        p.add_argument("--rows", type=int, default=rows, help=rows_help or f"input rows (default {rows:,})")
    if quick is not None:
        p.add_argument("--quick", action="store_true", help=quick)
    if repeat is not None:
        p.add_argument(
            repeat_flag,
            type=int,
            default=repeat,
            help=repeat_help or f"timed runs per configuration, best kept (default {repeat})",
        )
    if threads is not None:
        threads_help = threads_help or f"thread counts (default {threads})"
        p.add_argument("--threads", default=threads, help=threads_help)
    if seed:
        p.add_argument("--seed", type=int, default=0)
    if out:
        p.add_argument("--out", default=DEFAULT_OUT, help="results directory (default bench-results/)")
    return p


def thread_counts(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``."""
    return [int(x) for x in text.split(",") if x.strip()]


def engine_list(p: argparse.ArgumentParser, text: str, choices: Sequence[str]) -> list[str]:
    """The engines of a comma list, in its order; an unknown name exits with status 2 naming the choices."""
    engines = [e.strip() for e in text.split(",") if e.strip()]
    if unknown := sorted(set(engines) - set(choices)):
        p.error(f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(choices)}")
    return engines


def add_worker_options(p: argparse.ArgumentParser, *hidden: str) -> None:
    """The hidden ``--worker polars`` option (and the ``hidden`` ones that pass its input) of a suite that
    times Polars in a subprocess, so that ``POLARS_MAX_THREADS`` takes effect."""
    p.add_argument("--worker", choices=["polars"], help=argparse.SUPPRESS)
    for flag in hidden:
        p.add_argument(flag, help=argparse.SUPPRESS)


def worker(suite: str, *args: str, **env: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``python -m benches.peers <suite> <args>`` in a subprocess
    (with ``env`` added), importable from any working directory."""
    path = os.environ.get("PYTHONPATH")
    full = dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + path if path else ""), **env)
    return [sys.executable, "-m", "benches.peers", suite, *args], full


# --------------------------------------------------------------------------------------------- the run


class Run:
    """One suite's run: measures how busy the machine is and which windgate build runs at the start,
    collects the result dicts, and ends with the report and the exit code."""

    def __init__(self, name: str, out: str | Path, *, build: bool = True) -> None:
        self.name = name
        self.out = out
        self.results: list[dict] = []
        self.busy_at_start = report.cpu_busy()  # a compiler or a test next to a benchmark skews it
        self.cpu_start = report.cpu_snapshot()
        self.build = report.windgate_build() if build else None
        if self.build:
            b = self.build
            log(f"windgate extension: {b['path']} ({b['mb']} MB, debug info: {b['debug_info']})")

    def add(self, result: dict, progress: str | None = None) -> dict:
        """Record a result (rates filled in by :func:`report.finish`) and log a progress line:
        ``progress``, nothing when it is ``""``, or by default (for a timed result) the engine, threads,
        seconds, rows/s and check."""
        r = report.finish(result)
        self.results.append(r)
        if progress:
            log(progress)
        elif progress is None and r.get("seconds"):
            rate = f", {r['rows_per_s'] / 1e6:.2f} M rows/s" if r.get("rows_per_s") else ""
            log(f"  {r['engine']} ({r.get('threads')} threads): {r['seconds']:.3f} s{rate}, {r.get('check')}")
        return r

    def load(self) -> dict:
        """The machine facts every report's parameters carry: the windgate build measured and how busy
        other processes kept the cores before and during the run (logged when above 10%)."""
        return {
            "windgate_extension": self.build,
            "cpu_busy_at_start": self.busy_at_start,
            "cpu_busy_by_others": report.others_busy(self.cpu_start),
        }

    def failed(self, results: Iterable[dict] | None = None, *, errors: bool = False) -> list[dict]:
        """The results whose check failed (and, with ``errors``, those whose engine raised)."""
        return [
            r
            for r in (self.results if results is None else results)
            if str(r.get("check", "")).startswith("FAIL") or (errors and r.get("error"))
        ]

    def write(
        self,
        *,
        title: str,
        params: dict,
        notes: Sequence[str] = (),
        columns: Sequence[tuple] = report.COLUMNS,
        sections: Sequence[str] = (),
        plot: Callable[[Sequence[dict], Path, str], Path | None] = plots.rows_per_s,
        groups: Sequence[tuple[str, Sequence[dict]]] | None = None,
        results: Sequence[dict] | None = None,
        extra: dict | None = None,
    ) -> dict[str, Path]:
        """Write ``<out>/<name>.{json,md,png}`` (see :func:`report.write_report`) from the recorded
        results, or from ``results`` when a suite reports a summary of them."""
        return report.write_report(
            self.name,
            self.results if results is None else results,
            out_dir=self.out,
            title=title,
            params=params,
            notes=notes,
            columns=columns,
            sections=sections,
            plot=plot,
            groups=groups,
            extra=extra,
        )

    def done(self, paths: dict[str, Path], failed: Sequence[dict] = (), *, what: str = "") -> int:
        """Print where the report went and one FAIL line per failed result (its field ``what`` names the
        case); 1 when something failed, else 0."""
        print("wrote " + ", ".join(str(p) for p in paths.values()))
        for r in failed:
            case = f", {r.get(what)}" if what else ""
            print(f"FAIL: {r['engine']}, {r.get('threads')} threads{case}: {r.get('error') or r['check']}")
        return 1 if failed else 0
