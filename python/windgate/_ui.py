"""Talking to a person: the console, numbered progress steps, number formatting, exit codes and
:class:`CliError`, shared by the command line (:mod:`windgate.cli`, :mod:`windgate.cli_tpcxbb`) and the demo.

rich is imported lazily (it is in the ``cli`` extra): a missing rich is a :class:`CliError`, not a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "CliError",
    "require_rich",
    "console",
    "progress",
    "step",
    "Steps",
    "one_line",
    "fmt_rate",
    "mib",
]

#: Exit statuses: success, a failed check (the demo's answers differ), bad input, Ctrl-C.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CliError(Exception):
    """A problem with the command line or the files it names: printed as one line, exit status 2."""


def require_rich():
    """rich's ``Console`` class; a :class:`CliError` naming the extra to install when rich is missing."""
    try:
        import rich  # noqa: F401
    except ImportError as exc:  # pragma: no cover - rich is in the cli extra
        raise CliError("the windgate command line needs rich: pip install 'windgate[cli]'") from exc
    from rich.console import Console

    return Console


def console(stderr: bool = False):
    """A rich console; without a terminal, ``$COLUMNS`` wide (default 120), since the reports are wider
    than rich's default of 80 columns."""
    Console = require_rich()
    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "120"))
    return Console(stderr=stderr, width=width, soft_wrap=width is not None, highlight=False)


def progress(console, unit: str = "rows"):
    """A rich progress bar counting ``unit`` with elapsed and remaining time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


@contextlib.contextmanager
def step(console, number: int, total: int, title: str, *, spinner: bool = True) -> Iterator[None]:
    """Print a numbered step, show a spinner while it runs (terminals only) and its duration at the end.
    ``spinner=False`` for steps that show their own progress bar (rich allows one live display at a time)."""
    from rich.markup import escape

    console.print(f"[bold cyan]\\[{number}/{total}][/] {escape(title)} ...")
    t0 = time.perf_counter()
    with console.status(escape(title)) if spinner else contextlib.nullcontext():
        yield
    console.print(f"      [green]done[/] in {time.perf_counter() - t0:.1f} s")


class Steps:
    """Numbered :func:`step` s counted for the caller, each one's duration kept (``times``) for a report."""

    def __init__(self, console, total: int) -> None:
        self.console, self.total, self.n, self.times = console, total, 0, []

    @contextlib.contextmanager
    def __call__(self, title: str, *, spinner: bool = True):
        self.n += 1
        t0 = time.perf_counter()
        with step(self.console, self.n, self.total, title, spinner=spinner):
            yield
        self.times.append({"step": title, "seconds": round(time.perf_counter() - t0, 3)})


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its class name when it has none)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def fmt_rate(rows: float, seconds: float) -> str:
    """``12.35 M rows/s``; ``-`` for a zero duration."""
    if seconds <= 0:
        return "-"
    rate = rows / seconds
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.2f} {unit} rows/s"
    return f"{rate:.0f} rows/s"


def mib(path: Path) -> str:
    """A file's size in MiB (``?`` when it cannot be read)."""
    try:
        return f"{path.stat().st_size / 2**20:,.1f} MiB"
    except OSError:
        return "?"
