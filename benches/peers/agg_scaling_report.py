"""The ``agg_scaling`` suite's report: the Markdown tables (:func:`pivot` for tables 1-3, one row per cell
with windgate beside every peer and the numpy reference; :func:`thread_table` for table 4, one row per
engine at each thread count with the speed-up), the ratio of windgate to the best peer that matched, and
the four-panel plot (:func:`plot`, colours :data:`CYCLE` and :data:`COLORS`).
"""

from __future__ import annotations

from pathlib import Path

from . import plot as plots
from . import report
from .agg_scaling_peers import ORDERS, PEERS, REFS, Case
from .report import fmt_rate


def _rate(value) -> str:
    """A pivot cell: rows/s, or the text of a failed, timed-out or mismatching run."""
    return value if isinstance(value, str) else fmt_rate(value)


def cell_value(r: dict | None) -> float | str | None:
    if r is None:
        return None
    if r.get("skipped"):
        return f"skipped ({r['skipped']})"
    if r.get("timeout"):
        return f"timeout (> {r['timeout']:.1f} s)"
    if r.get("error"):
        return "error"
    if str(r.get("check", "")).startswith("FAIL"):
        return "MISMATCH"
    return r.get("rows_per_s")


def peer_ratio(results: list[dict], case: Case, threads: int) -> tuple[str | None, str | None]:
    """(best peer's name, windgate auto's rows/s over it as text) for one cell and thread count: peers that
    mismatched or failed are left out; when every peer timed out the ratio is a lower bound."""
    mine = [
        r for r in results if r["case"] == case.label and r["table"] == case.table and r["threads"] == threads
    ]
    wg = next((r for r in mine if r["engine"] == "windgate" and r.get("rows_per_s")), None)
    ok = [
        r
        for r in mine
        if r["engine"] in PEERS and r.get("rows_per_s") and r.get("check", "").startswith("ok")
    ]
    if wg is None:
        return None, None
    if ok:
        best = max(ok, key=lambda r: r["rows_per_s"])
        return best["engine"], f"{wg['rows_per_s'] / best['rows_per_s']:.2f}x"
    slow = [r for r in mine if r["engine"] in PEERS and r.get("timeout")]
    if slow:
        bound = max(r["rows"] / r["timeout"] for r in slow)
        return "(all timed out)", f"> {wg['rows_per_s'] / bound:.2f}x"
    return None, None


def pivot(results: list[dict], table_cases: list[Case]) -> str:
    """Tables 1-3: one row per cell, windgate beside each peer and the reference (rows/s on 1 thread)."""
    engines = ["windgate", *PEERS, *REFS]
    rows = []
    for c in table_cases:
        mine = {r["engine"]: r for r in results if r["table"] == c.table and r["case"] == c.label}
        best, ratio = peer_ratio(results, c, 1)
        wg = mine.get("windgate") or {}
        ref = mine.get("numpy read pass") or {}
        row = {
            "case": c.label,
            "rows": c.rows,
            "out_rows": wg.get("out_rows"),
            **{e: cell_value(mine.get(e)) for e in engines},
            "best": best,
            "ratio": ratio,
        }
        if wg.get("rows_per_s") and ref.get("rows_per_s"):
            row["of_read"] = f"{wg['rows_per_s'] / ref['rows_per_s']:.1%}"
        rows.append(row)
    columns = [
        ("case", "cell"),
        ("rows", "rows in"),
        ("out_rows", "output rows"),
        *((e, e, _rate) for e in engines),
        ("best", "best peer"),
        ("ratio", "windgate / best peer", str),
        ("of_read", "windgate / read pass", str),
    ]
    return report.markdown_table(rows, columns)


def thread_table(results: list[dict], case: Case) -> str:
    """Table 4: one row per engine (and windgate strategy), rows/s at 1 and 2 threads, the speed-up, and
    windgate auto over the best peer at each thread count."""
    mine = [r for r in results if r["table"] == case.table and r["case"] == case.label]
    names = list(dict.fromkeys(r["engine"] for r in mine))
    rows = []
    for name in names:
        by_n = {r["threads"]: r for r in mine if r["engine"] == name}
        row = {"engine": name}
        for n in case.threads:
            row[f"t{n}"] = cell_value(by_n.get(n))
        one, two = by_n.get(1, {}).get("rows_per_s"), by_n.get(2, {}).get("rows_per_s")
        if one and two and all(isinstance(row[f"t{n}"], float) for n in (1, 2)):
            row["speedup"] = two / one
        rows.append(row)
    ratios = []
    for n in case.threads:
        best, ratio = peer_ratio(results, case, n)
        if ratio:
            ratios.append(f"{n} thread{'s' if n > 1 else ''}: windgate / best peer ({best}) = {ratio}")
    columns = [
        ("engine", "engine"),
        *((f"t{n}", f"{n} thread{'s' if n > 1 else ''}", _rate) for n in case.threads),
        ("speedup", "1 -> 2 speed-up"),
    ]
    return report.markdown_table(rows, columns) + "".join(f"\n\n{line}." for line in ratios)


#: Plot colours: windgate orange, each peer its own, the numpy reference grey; CYCLE: the same as
#: matplotlib's colour-cycle codes, for line formats.
CYCLE = {
    "windgate": "C1",
    "duckdb": "C0",
    "duckdb panes+frame": "C9",
    "polars": "C4",
    "polars panes+rolling": "C6",
}
COLORS = {
    "windgate": plots.WINDGATE_COLOR,
    "duckdb": "tab:blue",
    "duckdb panes+frame": "tab:cyan",
    "polars": "tab:purple",
    "polars panes+rolling": "tab:pink",
    "numpy read pass": "silver",
}


def plot(results, path: Path, title: str) -> Path | None:
    """Four panels: rows/s against panes per window, keys (random solid, regular dashed), aggregates and
    threads; windgate in orange, the numpy read pass as a grey line or bar."""
    ok = [r for r in results if r.get("rows_per_s") and not str(r.get("check", "")).startswith("FAIL")]

    def read_pass(rs):
        ref = [r["rows_per_s"] / 1e6 for r in rs if r["engine"] == "numpy read pass"]
        return max(ref) if ref else None

    panels = []
    t1 = [r for r in ok if r["table"] == "1"]
    if t1:
        ref = read_pass(t1)
        panels.append(
            plots.Lines(
                "1: panes per window (100 random keys, count+sum+max, 1 thread)",
                {e: plots.points(t1, "ppw", "rows_per_s", scale=1e6, engine=e) for e in CYCLE},
                xlabel="panes per window",
                ylabel="M rows/s (log; higher is better)",
                xscale="log",
                yscale="log",
                styles={e: f"{c}-o" for e, c in CYCLE.items()},
                hlines=[(ref, "numpy read pass")] if ref else (),
                plain_log_labels=True,
            )
        )
    t2 = [r for r in ok if r["table"] == "2"]
    if t2:
        series, styles = {}, {}
        for e in ("windgate", "duckdb", "duckdb panes+frame", "polars panes+rolling"):
            for o in ORDERS:
                series[f"{e} {o}"] = plots.points(t2, "keys", "rows_per_s", scale=1e6, engine=e, order=o)
                styles[f"{e} {o}"] = CYCLE[e] + ("-o" if o == "random" else "--s")
        panels.append(
            plots.Lines(
                "2: keys (6 panes, count+sum+max, 1 thread; random solid, regular dashed)",
                series,
                xlabel="keys",
                ylabel="M rows/s (log)",
                xscale="log",
                yscale="log",
                styles=styles,
                plain_log_labels=True,
            )
        )
    t3 = [r for r in ok if r["table"] == "3"]
    if t3:
        groups = list(dict.fromkeys(r["case"] for r in t3))
        engines = ("windgate", *PEERS, "numpy read pass")
        panels.append(
            plots.Bars(
                "3: aggregates (1k random keys, 6 panes, 1 thread)",
                groups,
                {
                    e: [
                        next((r["rows_per_s"] / 1e6 for r in t3 if r["case"] == g and r["engine"] == e), 0)
                        for g in groups
                    ]
                    for e in engines
                },
                ylabel="M rows/s (log)",
                yscale="log",
                colors=COLORS,
            )
        )
    t4 = [r for r in ok if r["table"] == "4" and r["engine"] not in REFS]
    if t4:
        names = list(dict.fromkeys(r["engine"] for r in t4))
        panels.append(
            plots.Bars(
                "4: threads (1k random keys, 6 panes, count+sum+max; line: numpy read pass)",
                names,
                {
                    f"{n} thread{'s' if n > 1 else ''}": [
                        next((r["rows_per_s"] / 1e6 for r in t4 if r["engine"] == e and r["threads"] == n), 0)
                        for e in names
                    ]
                    for n in (1, 2)
                },
                ylabel="M rows/s (log)",
                yscale="log",
                colors={"1 thread": "tab:gray", "2 threads": "tab:olive"},
                hline=read_pass([r for r in ok if r["table"] == "4"]),
                rotate=True,
            )
        )
    if not panels:
        return None
    return plots.figure(path, title, panels, ncols=2, panel_size=(7, 4.8))
