"""The PNG of every peer suite: three panel kinds (lines, grouped bars, horizontal bars) laid out by one
:func:`figure` function, and the two whole-figure plots most suites use (:func:`rows_per_s`,
:func:`case_seconds`).

A suite builds its panels from its result dicts (:func:`points` picks ``(x, y)`` pairs out of them) and
hands them to :func:`figure`; nothing here knows what a suite measures. Without matplotlib every function
returns None and the suite writes its JSON and Markdown only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

WINDGATE_COLOR = "tab:orange"
PEER_COLORS = ("tab:blue", "tab:cyan", "tab:purple", "tab:gray")


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def points(
    results: Iterable[dict], x: str, y: str, *, scale: float = 1.0, **where
) -> list[tuple[float, float]]:
    """The sorted ``(r[x], r[y] / scale)`` of the results whose fields equal ``where`` and whose ``y`` is
    set (a failed run has none)."""
    return sorted(
        (r[x], r[y] / scale)
        for r in results
        if r.get(y) is not None and all(r.get(k) == v for k, v in where.items())
    )


def engine_color(engine: str) -> str:
    """windgate in orange, every peer in blue: the colour code of every bar plot."""
    return WINDGATE_COLOR if str(engine).startswith("windgate") else PEER_COLORS[0]


@dataclass
class Lines:
    """A panel of lines, one per series (``label -> [(x, y), ...]``), drawn in ``styles[label]`` (a
    matplotlib format such as ``"--s"``; default ``"-o"``). ``hlines`` are grey dotted reference levels
    ``(y, label)``; ``twin`` series go on a second y axis labelled ``twin_label``; x beyond ``shade_after``
    is shaded (more threads than cores)."""

    title: str
    series: dict[str, list[tuple[float, float]]]
    xlabel: str = ""
    ylabel: str = ""
    xscale: str | tuple[str, int] | None = None
    yscale: str | None = None
    styles: dict[str, str] = field(default_factory=dict)
    hlines: Sequence[tuple[float, str]] = ()
    xticks: Sequence[float] | None = None
    xtick_labels: Sequence[str] | None = None
    twin: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    twin_label: str = ""
    shade_after: float | None = None
    shade_label: str = "oversubscribed"
    plain_log_labels: bool = False
    ymin: float | None = None
    legend: bool = True


@dataclass
class Bars:
    """A panel of grouped vertical bars: ``series[label][i]`` is the bar of ``label`` in ``groups[i]``
    (0 for a missing value); ``hline`` draws a grey reference level."""

    title: str
    groups: Sequence[str]
    series: dict[str, Sequence[float]]
    ylabel: str = ""
    xlabel: str = ""
    yscale: str | None = None
    colors: dict[str, str] = field(default_factory=dict)
    hline: float | None = None
    rotate: bool = False
    plain_log_labels: bool = False
    legend: bool = True


@dataclass
class HBars:
    """A panel of horizontal bars, one per label, top to bottom, each annotated with ``value_fmt(value)``;
    ``message`` is shown instead when there is no bar; on a log axis the bars end ``headroom`` times
    below its right edge (room for the annotations; None: matplotlib's default)."""

    title: str
    labels: Sequence[str]
    values: Sequence[float]
    colors: Sequence[str] | None = None
    xlabel: str = ""
    xscale: str | None = "log"
    value_fmt: Callable[[float], str] | None = None
    label_size: float | None = None
    title_loc: str = "center"
    message: str = "no engine succeeded"
    plain_log_labels: bool = False
    headroom: float | None = 3.0


Panel = Lines | Bars | HBars


def _plain_log(axis) -> None:
    """Tick labels as plain numbers (1, 2, 5, 10) instead of powers of ten on a log axis."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _draw_lines(ax, p: Lines) -> None:
    for label, pts in p.series.items():
        if pts:
            ax.plot(*zip(*pts, strict=True), p.styles.get(label, "-o"), label=label)
    for y, label in p.hlines:
        ax.axhline(y, color="grey", linestyle=":", label=label or None)
    xs = sorted({x for pts in p.series.values() for x, _ in pts})
    if p.shade_after is not None and xs and max(xs) > p.shade_after:
        ax.axvspan(p.shade_after + 0.5, max(xs) * 1.2, color="grey", alpha=0.12, label=p.shade_label)
    if p.twin:
        ax2 = ax.twinx()
        for label, pts in p.twin.items():
            if pts:
                ax2.plot(*zip(*pts, strict=True), ":", color="grey", marker="x", label=label)
        ax2.set_ylabel(p.twin_label)
        ax2.set_ylim(bottom=0)
    if isinstance(p.xscale, tuple):
        ax.set_xscale(p.xscale[0], base=p.xscale[1])
    elif p.xscale:
        ax.set_xscale(p.xscale)
    if p.yscale:
        ax.set_yscale(p.yscale)
        if p.plain_log_labels:
            _plain_log(ax.yaxis)
    ticks = p.xticks if p.xticks is not None else (xs if p.xscale else None)
    if ticks:
        ax.set_xticks(list(ticks), list(p.xtick_labels or [f"{t:g}" for t in ticks]))
    ax.grid(alpha=0.3, which="both" if p.yscale else "major")


def _draw_bars(ax, p: Bars) -> None:
    width = 0.8 / max(len(p.series), 1)
    for i, (label, values) in enumerate(p.series.items()):
        xs = [k + (i - (len(p.series) - 1) / 2) * width for k in range(len(p.groups))]
        ax.bar(xs, list(values), width, label=label, color=p.colors.get(label))
    if p.rotate:
        ax.set_xticks(range(len(p.groups)), list(p.groups), rotation=35, ha="right", fontsize=7)
    else:
        ax.set_xticks(range(len(p.groups)), list(p.groups))
    if p.hline is not None:
        ax.axhline(p.hline, color="grey", lw=0.8)
    if p.yscale:
        ax.set_yscale(p.yscale)
        if p.plain_log_labels:
            _plain_log(ax.yaxis)
    ax.grid(axis="y", alpha=0.3)


def _draw_hbars(ax, p: HBars) -> None:
    if p.title:
        ax.set_title(p.title, fontsize=9, loc=p.title_loc)
    if not p.values:
        ax.text(0.5, 0.5, p.message, ha="center", va="center", transform=ax.transAxes)
        return
    bars = ax.barh(range(len(p.values)), list(p.values), color=list(p.colors) if p.colors else None)
    ax.set_yticks(range(len(p.values)), list(p.labels), fontsize=p.label_size)
    ax.invert_yaxis()
    if p.value_fmt is not None:
        for bar, v in zip(bars, p.values, strict=True):
            ax.text(
                bar.get_width(),
                bar.get_y() + bar.get_height() / 2,
                p.value_fmt(v),
                va="center",
                fontsize=p.label_size or 8,
            )
    if p.xscale:
        ax.set_xscale(p.xscale)
        if p.plain_log_labels:
            _plain_log(ax.xaxis)
        if p.headroom:
            ax.set_xlim(right=max(p.values) * p.headroom)


def figure(
    path: str | Path,
    title: str,
    panels: Sequence[Panel],
    *,
    ncols: int = 1,
    panel_size: tuple[float, float] = (5.5, 4.0),
    size: tuple[float, float] | None = None,
    height_ratios: Sequence[float] | None = None,
    shared_legend: bool = False,
    legend_cols: int = 4,
    sharey: bool = False,
    dpi: int = 120,
) -> Path | None:
    """Draw ``panels`` row by row on an ``ncols``-wide grid, title the figure and save it as ``path``.

    ``shared_legend`` puts one legend (the first panel's entries, in ``legend_cols`` columns) under the grid
    instead of one per panel.
    Returns ``path``, or None without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    nrows = max(1, -(-len(panels) // ncols))
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=size or (panel_size[0] * ncols, panel_size[1] * nrows),
        squeeze=False,
        sharey=sharey,
        gridspec_kw={"height_ratios": list(height_ratios)} if height_ratios else None,
    )
    for i, (ax, p) in enumerate(zip(axes.flat, panels, strict=False)):
        if isinstance(p, Lines):
            _draw_lines(ax, p)
        elif isinstance(p, Bars):
            _draw_bars(ax, p)
        else:
            _draw_hbars(ax, p)
        if not isinstance(p, HBars):
            ax.set_title(p.title, fontsize=9)
            if p.legend and not shared_legend and ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        ax.set_xlabel(p.xlabel, fontsize=8 if isinstance(p, HBars) and p.label_size else None)
        if not isinstance(p, HBars) and (not sharey or i % ncols == 0):
            ax.set_ylabel(p.ylabel)
    for ax, p in zip(axes.flat, panels, strict=False):  # once every panel is drawn (shared axes)
        if isinstance(p, Lines) and p.ymin is not None:
            ax.set_ylim(bottom=p.ymin)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    rect = (0, 0, 1, 1)
    if shared_legend:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(
            handles, labels, loc="lower center", ncol=min(max(len(labels), 1), legend_cols), fontsize=8
        )
        rect = (0, 0.1, 1, 1)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=rect)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def rows_per_s(
    results: Sequence[dict],
    path: str | Path,
    title: str,
    *,
    key: str = "rows_per_s",
    scale: float = 1e6,
    xlabel: str = "M rows/s (log scale; higher is better)",
) -> Path | None:
    """Horizontal bars of rows/s per engine, windgate in orange (failed engines left out). ``key`` plots
    another rate instead, in units of ``scale``, with ``xlabel`` under the axis."""
    ok = [r for r in results if r.get(key)]
    panel = HBars(
        "",
        labels=[f"{r['engine']} ({r.get('threads') or 1}c)" for r in ok],
        values=[r[key] / scale for r in ok],
        colors=[engine_color(r["engine"]) for r in ok],
        xlabel=xlabel,
        value_fmt=lambda v: f" {v:,.1f}" if v >= 1 else f" {v:.2g}",
    )
    return figure(path, title, [panel], size=(9, 0.45 * max(len(ok), 1) + 1.6))


def case_seconds(
    results: Sequence[dict], path: str | Path, title: str, *, family: str = "family", case: str = "case"
) -> Path | None:
    """Horizontal bars of the best seconds of each engine in each case (lower is better, log scale), one
    panel per ``family``, windgate in orange, each peer in its own colour; failed engines left out."""
    ok = [r for r in results if r.get("seconds")]
    families = list(dict.fromkeys(r.get(family, "") for r in ok)) or [""]
    panels = []
    for fam in families:
        rows = [r for r in ok if r.get(family, "") == fam]
        peers = list(dict.fromkeys(r["engine"] for r in rows if not str(r["engine"]).startswith("windgate")))
        colors = [
            WINDGATE_COLOR
            if str(r["engine"]).startswith("windgate")
            else PEER_COLORS[peers.index(r["engine"]) % len(PEER_COLORS)]
            for r in rows
        ]
        panels.append(
            HBars(
                str(fam),
                labels=[f"{r.get(case, '')}: {r['engine']}" for r in rows],
                values=[r["seconds"] for r in rows],
                colors=colors,
                xlabel="seconds, best of the timed runs (log scale; lower is better)",
                value_fmt=lambda v: f" {v:.2f} s",
                label_size=7,
                title_loc="left",
            )
        )
    heights = [max(len(p.values), 1) for p in panels]
    return figure(
        path,
        title,
        panels,
        size=(10, 0.32 * sum(heights) + 1.2 * len(panels)),
        height_ratios=heights,
    )
