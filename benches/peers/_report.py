"""Shared reporting for the peer benchmarks in ``benches/peers/``: machine facts, JSON, a Markdown table and a
PNG bar plot of rows/s per engine, all written into one results directory (default ``bench-results/``).

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

Other keys are kept in the JSON as they are.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

DEFAULT_OUT = "bench-results"

#: Columns of the Markdown table: (key, header).
COLUMNS: Sequence[tuple[str, str]] = (
    ("engine", "engine"),
    ("threads", "cores"),
    ("rows", "rows in"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("rows_per_s_per_core", "rows/s per core"),
    ("out_rows", "output rows"),
    ("check", "check"),
    ("notes", "notes"),
)


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
        "memory_gb": mem_gb,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": versions,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def _fmt_int(x) -> str:
    return "" if x is None else f"{int(x):,}"


def _fmt_rate(x) -> str:
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
        return _fmt_rate(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(results: Iterable[dict], columns: Sequence[tuple[str, str]] = COLUMNS) -> str:
    """A GitHub Markdown table of the results; a failed engine shows its error in the check column."""
    lines = [
        "| " + " | ".join(h for _, h in columns) + " |",
        "|"
        + "|".join(
            "---:"
            if k in ("threads", "rows", "seconds", "rows_per_s", "rows_per_s_per_core", "out_rows")
            else "---"
            for k, _ in columns
        )
        + "|",
    ]
    for r in results:
        cells = []
        for key, _ in columns:
            value = r.get(key)
            if key == "check" and r.get("error"):
                value = "ERROR: " + str(r["error"]).strip().splitlines()[0][:160]
            cells.append(_fmt_cell(key, value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_rows_per_s(results: Sequence[dict], path: str | Path, title: str) -> Path | None:
    """A horizontal bar plot of rows/s per engine (failed engines left out); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ok = [r for r in results if r.get("rows_per_s")]
    path = Path(path)
    fig, ax = plt.subplots(figsize=(9, 0.45 * max(len(ok), 1) + 1.6))
    if ok:
        labels = [f"{r['engine']} ({r.get('threads') or 1}c)" for r in ok]
        values = [r["rows_per_s"] / 1e6 for r in ok]
        colors = ["tab:orange" if str(r["engine"]).startswith("windgate") else "tab:blue" for r in ok]
        bars = ax.barh(range(len(ok)), values, color=colors)
        ax.set_yticks(range(len(ok)), labels)
        ax.invert_yaxis()
        for bar, v in zip(bars, values, strict=True):
            ax.text(
                bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:,.1f}", va="center", fontsize=8
            )
        ax.set_xscale("log")
        ax.set_xlim(right=max(values) * 3)
    else:
        ax.text(0.5, 0.5, "no engine succeeded", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("M rows/s (log scale; higher is better)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _json_default(obj):
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
) -> dict[str, Path]:
    """Write ``<name>.json``, ``<name>.md`` and ``<name>.png`` into ``out_dir``; return their paths."""
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
    }
    paths = {"json": out / f"{name}.json", "md": out / f"{name}.md"}
    paths["json"].write_text(json.dumps(doc, indent=2, default=_json_default) + "\n")

    md = [f"# {title}", ""]
    if params:
        shown = (f"`{k}={json.dumps(v) if isinstance(v, dict | list) else v}`" for k, v in params.items())
        md.append("Parameters: " + ", ".join(shown) + ".")
        md.append("")
    md.append(
        f"Machine: {meta['cpu'] or 'unknown CPU'}, {meta['cores']} cores, {meta['memory_gb']} GB, "
        f"Python {meta['python']}; {meta['date']}."
    )
    md.append("")
    md.append(markdown_table(results))
    if notes:
        md.append("")
        md.extend(f"* {n}" for n in notes)
    paths["md"].write_text("\n".join(md) + "\n")

    png = plot_rows_per_s(results, out / f"{name}.png", title)
    if png is not None:
        paths["png"] = png
    return paths
