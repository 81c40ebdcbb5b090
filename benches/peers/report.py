"""The report of every peer suite: machine facts, the JSON, the Markdown tables and the PNG (drawn by
:mod:`.plot`), all written into one results directory (default ``bench-results/``).

A result is a plain dict. The keys used here are::

    engine        "duckdb"                 label, e.g. also the variant: "duckdb (SQL range join)"
    threads       2                        cores the engine was allowed to use
    rows          10_000_000               input rows
    seconds       0.81                     best of the timed runs (None when the engine failed)
    runs          [0.85, 0.81, 0.83]       every timed run
    rows_per_s    12_345_679.0
    rows_per_s_per_core
    out_rows      1_005_000
    check         "ok" or "FAIL: ..." or "not checked"
    notes         free text shown in the table
    error         the exception text when the engine failed (seconds is then None)

Other keys are kept in the JSON as they are. ``scaling_group`` (default: ``engine``) names the results that
:func:`add_speedups` compares: ``speedup`` is a result's rows/s over the 1-thread result of its group.

The measuring helpers every suite needs (logging, best-of-N timing, the data generators, the windgate build
check, a failed engine's result) live here too; :mod:`.runner` drives them.
"""

from __future__ import annotations

import datetime as _dt
import gc
import importlib
import importlib.util
import json
import os
import platform
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path

from . import plot as plots

DEFAULT_OUT = "bench-results"
ROOT = Path(__file__).resolve().parents[2]

#: Columns of the Markdown table: (key, header).
COLUMNS: Sequence[tuple[str, str]] = (
    ("engine", "engine"),
    ("threads", "cores"),
    ("rows", "rows in"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("rows_per_s_per_core", "rows/s per core"),
    ("speedup", "vs 1 core"),
    ("out_rows", "output rows"),
    ("check", "check"),
    ("notes", "notes"),
)


# --------------------------------------------------------------------------------------------- helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_snapshot() -> tuple[int, int, float] | None:
    """(total jiffies, idle jiffies, this process's and its reaped children's CPU seconds), for
    :func:`cpu_busy` and :func:`others_busy`; None without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    return sum(v), v[3] + v[4], own + _live_children_cpu()


def _live_children_cpu() -> float:
    """CPU seconds of this process's live descendants (a Spark JVM is not reaped until Python exits)."""
    parent, ticks = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(d)] = int(fields[1])
            ticks[int(d)] = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    mine, total = {os.getpid()}, 0
    for pid in sorted(parent):  # children have larger pids, except after wrap-around (then missed)
        if parent[pid] in mine:
            mine.add(pid)
            total += ticks[pid]
    return total / os.sysconf("SC_CLK_TCK")


def others_busy(start: tuple | None, warn: str = "during the benchmark") -> float | None:
    """Share of all cores that *other* processes kept busy since ``start`` (a :func:`cpu_snapshot`), logged
    with a warning when above 10%: a compiler or a test run next to a benchmark skews its timings. A child
    that is not reaped (Spark's JVM) counts as other."""
    end = cpu_snapshot()
    if start is None or end is None:
        return None
    total, idle = end[0] - start[0], end[1] - start[1]
    own = (end[2] - start[2]) * os.sysconf("SC_CLK_TCK")
    share = round(max(0.0, total - idle - own) / max(total, 1), 3)
    if share > 0.1:
        log(f"WARNING: other processes kept the machine {share:.0%} busy {warn}; timings are skewed")
    return share


def cpu_busy(seconds: float = 1.0) -> float | None:
    """Share of all cores other processes keep busy over the next ``seconds`` (see :func:`others_busy`)."""
    start = cpu_snapshot()
    time.sleep(seconds)
    return others_busy(start, "before the benchmark starts")


def best_of(
    fn: Callable[[], object], repeat: int, budget: float = float("inf"), min_total: float = 0.0
) -> tuple[float, list[float], object]:
    """Run ``fn`` ``repeat`` times, and on until the runs total ``min_total`` seconds (at most
    :data:`MAX_RUNS` runs), stopping early when another run would take the total past ``budget`` seconds;
    return (best seconds, all runs, last output)."""
    runs: list[float] = []
    out = None
    while more_runs(runs, repeat, min_total):
        out = None
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t0)
        if sum(runs) + runs[-1] > budget:
            break
    return min(runs), runs, out


#: The most runs :func:`best_of` makes to fill its ``min_total``.
MAX_RUNS = 60


def more_runs(runs: list[float], repeat: int, min_total: float) -> bool:
    """Whether :func:`best_of` times another run: fewer than ``repeat`` so far, or fewer than ``min_total``
    seconds in all (and fewer than :data:`MAX_RUNS`)."""
    return len(runs) < max(1, repeat) or (sum(runs) < min_total and len(runs) < MAX_RUNS)


def failure(engine: str, threads: int | None, exc: BaseException) -> dict:
    """The result of an engine (variant) that raised: logged, with the exception text as ``error``."""
    msg = f"{type(exc).__name__}: {exc}".strip()
    log(f"{engine} ({threads} threads) failed: {msg.splitlines()[0]}")
    if os.environ.get("WINDGATE_BENCH_TRACEBACK"):
        traceback.print_exc()
    return {"engine": engine, "threads": threads, "seconds": None, "error": msg, "notes": ""}


def load_generator(name: str) -> Callable:
    """The generator ``windgate.datasets.<name>``; from the source tree when the installed windgate package
    cannot be imported (for example before its extension is built) or is older than the source and lacks
    it. The generators need only numpy and pyarrow, so the source modules are loaded as a package of their
    own, without ``windgate/__init__.py`` (which imports the extension)."""
    try:
        from windgate import datasets

        return getattr(datasets, name)
    except Exception:  # any import failure, or an installed wheel without this generator: use the source
        pass
    src = ROOT / "python" / "windgate"
    pkg = "_windgate_source"
    if pkg not in sys.modules:
        spec = importlib.util.spec_from_file_location(pkg, src / "__init__.py", submodule_search_locations=[])
        mod = importlib.util.module_from_spec(spec)
        mod.__path__ = [str(src)]  # a package whose __init__ is never run
        sys.modules[pkg] = mod
    mod = importlib.import_module(f"{pkg}.datasets")
    log(f"windgate.datasets.{name} is not importable; loaded it from {src / 'datasets.py'}")
    return getattr(mod, name)


def load_smartgrid() -> Callable:
    """``windgate.datasets.smartgrid`` (see :func:`load_generator`)."""
    return load_generator("smartgrid")


def windgate_build() -> dict | None:
    """Where the windgate extension was loaded from and whether it carries debug info (a hint, not proof, of
    a debug build, whose timings mean little), or None when windgate is not importable."""
    try:
        from windgate import _native
    except Exception:  # any import failure
        return None
    path = Path(_native.__file__)
    return {
        "path": str(path),
        "mb": round(path.stat().st_size / 2**20, 1),
        "debug_info": _elf_has_debug(path),
    }


def _elf_has_debug(path: Path) -> bool | None:
    """Whether a 64-bit little-endian ELF file has a ``.debug_info`` section (None if not such a file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            (shoff,) = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            str_off, str_size = struct.unpack_from("<QQ", table, shstrndx * shentsize + 0x18)
            f.seek(str_off)
            names = f.read(str_size)
        return b".debug_info\x00" in names
    except (OSError, struct.error):
        return None


def add_speedups(results: Iterable[dict]) -> list[str]:
    """Set ``speedup`` (rows/s over the 1-thread rows/s of the same ``scaling_group`` on the same rows) on
    every result that has such a partner, and return one line per group with more than one thread count,
    e.g. ``"duckdb: 1 -> 2 threads 1.85x"``."""
    results = [finish(r) for r in results]
    base: dict[tuple, float] = {}
    for r in results:
        if r.get("threads") == 1 and r.get("rows_per_s"):
            base.setdefault((r.get("scaling_group", r["engine"]), r.get("rows")), r["rows_per_s"])
    lines: dict[str, list[str]] = {}
    for r in results:
        group = r.get("scaling_group", r["engine"])
        one = base.get((group, r.get("rows")))
        if one and r.get("rows_per_s"):
            r["speedup"] = r["rows_per_s"] / one
            if r.get("threads") != 1:
                lines.setdefault(group, []).append(f"1 -> {r['threads']} threads {r['speedup']:.2f}x")
    return [f"{group}: {', '.join(parts)}" for group, parts in lines.items()]


def finish(result: dict) -> dict:
    """Fill ``rows_per_s`` and ``rows_per_s_per_core`` from ``rows``, ``seconds`` and ``threads``."""
    seconds = result.get("seconds")
    rows = result.get("rows")
    if seconds and rows:
        result["rows_per_s"] = rows / seconds
        threads = result.get("threads") or 1
        result["rows_per_s_per_core"] = result["rows_per_s"] / threads
    else:
        result.setdefault("rows_per_s", None)
        result.setdefault("rows_per_s_per_core", None)
    return result


def machine() -> dict:
    """Facts about this machine and the Python environment, for the JSON."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
                    break
    except OSError:
        pass
    versions = {}
    for dist in ("windgate", "pyarrow", "numpy", "polars", "duckdb", "pandas", "pyspark"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "memory_gb": mem_gb,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": versions,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def _fmt_int(x) -> str:
    return "" if x is None else f"{int(x):,}"


def fmt_rate(x) -> str:
    if x is None:
        return ""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f}"


def _fmt_cell(key: str, value) -> str:
    if value is None:
        return ""
    if key in ("rows", "out_rows"):
        return _fmt_int(value)
    if key == "seconds":
        return f"{value:.3f}"
    if key in ("rows_per_s", "rows_per_s_per_core"):
        return fmt_rate(value)
    if key == "speedup":
        return f"{value:.2f}x"
    return str(value).replace("|", "\\|").replace("\n", " ")


RIGHT_ALIGNED = {"threads", "rows", "seconds", "rows_per_s", "rows_per_s_per_core", "speedup", "out_rows"}


def markdown_table(results: Iterable[dict], columns: Sequence[tuple] = COLUMNS) -> str:
    """A GitHub Markdown table of the results; a failed engine shows its error in the check column.

    A column is ``(key, header)`` or ``(key, header, fmt)`` with ``fmt`` a callable from the value (never
    None) to the cell text; columns with a ``fmt`` are right-aligned."""
    lines = [
        "| " + " | ".join(c[1] for c in columns) + " |",
        "|" + "|".join("---:" if c[0] in RIGHT_ALIGNED or len(c) > 2 else "---" for c in columns) + "|",
    ]
    for r in results:
        cells = []
        for key, _, *fmt in columns:
            value = r.get(key)
            if key == "check" and r.get("error"):
                value = "ERROR: " + str(r["error"]).strip().splitlines()[0][:160]
            cells.append(fmt[0](value) if fmt and value is not None else _fmt_cell(key, value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def json_default(obj):
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
    except ImportError:
        pass
    return str(obj)


def write_report(
    name: str,
    results: Sequence[dict],
    *,
    out_dir: str | Path = DEFAULT_OUT,
    title: str,
    params: dict | None = None,
    notes: Sequence[str] = (),
    columns: Sequence[tuple] = COLUMNS,
    sections: Sequence[str] = (),
    plot: Callable[[Sequence[dict], Path, str], Path | None] = plots.rows_per_s,
    groups: Sequence[tuple[str, Sequence[dict]]] | None = None,
    extra: dict | None = None,
) -> dict[str, Path]:
    """Write ``<name>.json``, ``<name>.md`` and ``<name>.png`` into ``out_dir``; return their paths.

    The Markdown holds the parameters, the machine, the table of ``columns``, the ``notes`` as a list and then
    the ``sections`` (Markdown text) as they are; ``plot(results, path, title)`` draws the PNG. With
    ``groups`` (``(heading, results)`` pairs, e.g. one per query family), one table per group under its own
    heading replaces the single table; the JSON still holds ``results``. ``extra`` adds top-level keys to
    the JSON (e.g. the results of a suite's other sections)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = [finish(dict(r)) for r in results]
    meta = machine()
    doc = {
        "benchmark": name,
        "title": title,
        "params": params or {},
        "machine": meta,
        "notes": list(notes),
        "results": results,
        **(extra or {}),
    }
    paths = {"json": out / f"{name}.json", "md": out / f"{name}.md"}
    paths["json"].write_text(json.dumps(doc, indent=2, default=json_default) + "\n")

    md = [f"# {title}", ""]
    if params:
        shown = (f"`{k}={json.dumps(v) if isinstance(v, dict | list) else v}`" for k, v in params.items())
        md.append("Parameters: " + ", ".join(shown) + ".")
        md.append("")
    md.append(
        f"Machine: {meta['cpu'] or 'unknown CPU'}, {meta['cores']} cores, {meta['memory_gb']} GB, "
        f"Python {meta['python']}; load average {meta['load_average']} at the end; {meta['date']}."
    )
    md.append("")
    if groups is None:
        md.append(markdown_table(results, columns))
    for heading, group in groups or ():
        md.extend([f"## {heading}", "", markdown_table([finish(dict(r)) for r in group], columns), ""])
    if notes:
        md.append("")
        md.extend(f"* {n}" for n in notes)
    for section in sections:
        md.extend(["", section])
    paths["md"].write_text("\n".join(md) + "\n")

    png = plot(results, out / f"{name}.png", title)
    if png is not None:
        paths["png"] = png
    return paths


def describe_difference(out, ref, ref_name: str) -> str:
    """What differs between an output table and the reference one (for a FAIL message)."""
    if out.schema != ref.schema:
        return f"schema {out.schema} != {ref.schema}"
    if out.num_rows != ref.num_rows:
        return f"{out.num_rows:,} output rows != {ref.num_rows:,} ({ref_name})"
    bad = [c for c in ref.column_names if not out.column(c).equals(ref.column(c))]
    return f"columns differ from {ref_name}'s: " + ", ".join(bad)
