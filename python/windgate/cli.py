"""The ``windgate`` command line: generate data, aggregate Parquet files, run the multiway queries of
Cederman et al., run the PySpark demo.

::

    windgate generate smartgrid --rows 10000000 --disorder 5 --out data/smartgrid.parquet
    windgate generate bandjoin --rows 100000 --rate 100 --out data/bandjoin   # left.parquet, right.parquet
    windgate generate soundcloud --rows 1000000 --sources 4 --out data/sc    # source-000.parquet ... 003
    windgate generate smartgrid --households 27 --plugs-per-household 9 --rate 486 --sources 4 --out data/ec
    windgate multiway --query K-OI --data data/sc --strategy tumlsc --out out/k-oi.parquet
    windgate aggregate --input data/smartgrid.parquet --out out/windows.parquet --time ts --size 60s \\
        --slide 10s --by plug_id --agg '*=count' --agg 'value=sum,max' --lateness 5s \\
        --checkpoint out/windows.ckpt     # rerun after a kill or Ctrl-C: resumes, same output
    windgate demo --rows 2000000 --out out/demo            # `make demo` runs it with 10,000,000 rows
    windgate tpcxbb generate --rows 1000000 --out data/tpcxbb  # see windgate.cli_tpcxbb
    windgate tpcxbb run --query q2 --data data/tpcxbb --threads 2 --out out/q2.parquet

Progress and reports use rich; without a terminal (CI, pipes) rich prints plain lines and final states only.
Bad input that windgate rejects (its ``WindgateError`` family, subclasses of ``ValueError``/``TypeError``),
a bad option value (``--batch-rows 0``, ``--compression bogus``) and a file that cannot be read or written
print one ``error: ...`` line naming the option and exit with status 2; set ``WINDGATE_TRACEBACK=1`` to see
the traceback. Ctrl-C prints ``interrupted`` and exits with status 130.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import _native, _ui
from ._cli_aggregate import run as _cmd_aggregate
from ._cli_io import (
    COMPRESSIONS,
    OneLineParser,
    check_out_path,
    int_or_duration,
    make_out_dir,
    positive_int,
    read_failed,
    write_parquet,
    write_table,
)
from ._ui import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError

__all__ = ["main", "CliError"]


def _strategies(*, multiway: bool) -> tuple[list[str], str]:
    """``--strategy`` names and help from window aggregation's registry (``windgate._native.strategies``).

    ``aggregate`` reads one source: every strategy but the multiway designs, which merge several time-sorted
    sources themselves. ``multiway``: those designs, ``auto`` and the single-threaded engines.
    """

    def wanted(s: dict[str, Any]) -> bool:
        if multiway:
            return s["sorted_sources"] or not s["parallel"] or s["name"] == "auto"
        return not s["sorted_sources"]

    entries = [s for s in _native.strategies("window_aggregate") if wanted(s)]
    help_text = "; ".join(f"{s['name']}: {s['doc'].rstrip('.')}" for s in entries)
    return [s["name"] for s in entries], help_text


# ----------------------------------------------------------------------------------------------- helpers


def _error_classes() -> tuple[type[BaseException], ...]:
    """windgate's exception classes (``WindgateError`` and every other ``*Error`` it exports), plus ours."""
    classes: list[type[BaseException]] = [CliError]
    try:
        import windgate
    except Exception:  # the package may be half-built: then only our own errors are clean
        return tuple(classes)
    for name in dir(windgate):
        obj = getattr(windgate, name, None)
        if (
            isinstance(obj, type)
            and issubclass(obj, Exception)
            and name.endswith("Error")
            and obj.__module__.startswith("windgate")
        ):
            classes.append(obj)
    return tuple(classes)


# ----------------------------------------------------------------------------------------------- generate


#: Per-dataset defaults of the ``generate`` options that mean different things per dataset.
_GENERATE_DEFAULTS: dict[str, dict[str, Any]] = {
    "smartgrid": {"rows": 1_000_000, "rate": 1000.0, "start": "2013-09-01T00:00:00"},
    "bandjoin": {"rows": 100_000, "rate": 100.0, "start": "0"},
    "points": {"rows": 1_000_000, "rate": 1000.0, "start": "2013-09-01T00:00:00"},
    "soundcloud": {"rows": 1_000_000, "rate": 1000.0, "start": "0"},
}

#: ``--sources N`` writes one file per source into the ``--out`` directory, named like this.
SOURCE_FILE = "source-{:03d}.parquet"


def _cmd_generate(args: argparse.Namespace) -> int:
    for key, value in _GENERATE_DEFAULTS[args.dataset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.sources is not None and args.dataset not in ("smartgrid", "soundcloud"):
        raise CliError(f"--sources: only smartgrid and soundcloud split into sources, not {args.dataset}")
    if args.dataset == "bandjoin":
        return _generate_bandjoin(args)
    if args.dataset == "points":
        return _generate_points(args)
    if args.dataset == "soundcloud":
        return _generate_soundcloud(args)
    return _generate_smartgrid(args)


def _generate_points(args: argparse.Namespace) -> int:
    from windgate.datasets import points

    arrivals = "Poisson arrivals" if args.dispersion is None else f"arrival dispersion {args.dispersion:g}"
    headline = (
        f"Generating [bold]{args.rows:,}[/] {args.distribution} points in {args.dims} dimensions: "
        f"{args.rate:g} rows/s, {arrivals}, disorder {args.disorder:g} s, seed {args.seed}"
    )
    return _generate_to_file(
        args,
        headline,
        lambda: points(
            args.rows,
            dims=args.dims,
            distribution=args.distribution,
            correlation=args.correlation,
            rate=args.rate,
            dispersion=args.dispersion,
            disorder=args.disorder,
            start=args.start,
            seed=args.seed,
        ),
    )


def _generate_smartgrid(args: argparse.Namespace) -> int:
    from windgate.datasets import smartgrid, smartgrid_sources

    plugs = args.households * args.plugs_per_household
    arrivals = "regular arrivals" if args.dispersion is None else f"arrival dispersion {args.dispersion:g}"
    headline = (
        f"Generating [bold]{args.rows:,}[/] smart-grid rows: {args.households} households x "
        f"{args.plugs_per_household} plugs = {plugs:,} plugs, {args.rate:g} rows/s, {arrivals}, "
        f"disorder {args.disorder:g} s, seed {args.seed}"
    )
    kwargs = dict(
        households=args.households,
        houses=args.houses,
        plugs_per_household=args.plugs_per_household,
        rate=args.rate,
        start=args.start,
        disorder=args.disorder,
        seed=args.seed,
        dispersion=args.dispersion,
    )
    if args.sources is not None:
        headline += f"; {args.sources} sources (plug p on source p % {args.sources}), each sorted by ts"
        return _generate_sources(
            args, headline, lambda: smartgrid_sources(args.rows, sources=args.sources, **kwargs)
        )
    return _generate_to_file(args, headline, lambda: smartgrid(args.rows, **kwargs))


def _generate_soundcloud(args: argparse.Namespace) -> int:
    from windgate.datasets import soundcloud_sources

    start = int_or_duration(args.start)
    if not isinstance(start, int):
        raise CliError(f"--start {args.start!r}: soundcloud times are plain integers (ticks)")
    sources = 1 if args.sources is None else args.sources
    split = "round-robin by row" if args.split == "row" else "by user"
    headline = (
        f"Generating [bold]{args.rows:,}[/] SoundCloud-like comments: {args.songs:,} songs (Zipf "
        f"{args.song_skew:g}), {args.rate:g} comments per tick, e-mails {args.p_mail:g}, IPs {args.p_ip:g}, "
        f"seed {args.seed}; {sources} sources ({split}), each sorted by ts"
    )
    return _generate_sources(
        args,
        headline,
        lambda: soundcloud_sources(
            args.rows,
            sources=sources,
            split=args.split,
            songs=args.songs,
            song_skew=args.song_skew,
            rate=args.rate,
            p_mail=args.p_mail,
            p_ip=args.p_ip,
            start=start,
            seed=args.seed,
        ),
    )


def _generate_sources(args: argparse.Namespace, headline: str, make: Callable[[], list[Any]]) -> int:
    """Prints ``headline``, builds the sources with ``make()``, writes source ``i`` to
    ``--out/source-<i>.parquet`` (:data:`SOURCE_FILE`)."""
    from rich.markup import escape

    console = _ui.console()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(
            f"--out {str(out)!r}: {args.dataset} with sources writes a directory (one file a source)"
        )
    if args.sources is not None and args.sources < 1:
        raise CliError(f"--sources {args.sources}: expected a positive number of sources")
    make_out_dir(out)
    console.print(headline)
    t0 = time.perf_counter()
    with console.status("generating rows"):
        tables = make()
    gen_s = time.perf_counter() - t0
    console.print(f"  generated in {gen_s:.2f} s ({_ui.fmt_rate(args.rows, gen_s)})")
    t1 = time.perf_counter()
    for stale in out.glob("source-*.parquet"):  # a previous run with more sources must not leave extra files
        stale.unlink()
    for i, table in enumerate(tables):
        write_parquet(
            table,
            out / SOURCE_FILE.format(i),
            console,
            row_group_rows=args.row_group_rows,
            compression=args.compression,
            label=f"source {i}",
        )
    rows = ", ".join(f"{t.num_rows:,}" for t in tables[:8]) + (", ..." if len(tables) > 8 else "")
    console.print(
        f"Wrote [bold]{len(tables)}[/] sources to [bold]{escape(str(out))}[/] ({rows} rows) "
        f"in {time.perf_counter() - t1:.2f} s"
    )
    return EXIT_OK


def _generate_to_file(args: argparse.Namespace, headline: str, make: Callable[[], Any]) -> int:
    """Prints ``headline``, builds the table with ``make()`` under a status line, writes it to ``--out``."""
    from rich.markup import escape

    console = _ui.console()
    out = Path(args.out)
    check_out_path(out)
    console.print(headline)
    t0 = time.perf_counter()
    with console.status("generating rows"):
        table = make()
    gen_s = time.perf_counter() - t0
    console.print(f"  generated in {gen_s:.2f} s ({_ui.fmt_rate(args.rows, gen_s)})")
    t1 = time.perf_counter()
    write_parquet(
        table, out, console, row_group_rows=args.row_group_rows, compression=args.compression, label="writing"
    )
    console.print(
        f"Wrote [bold]{escape(str(out))}[/] ({_ui.mib(out)}, row groups of {args.row_group_rows:,} rows) "
        f"in {time.perf_counter() - t1:.2f} s"
    )
    return EXIT_OK


def _generate_bandjoin(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from windgate.datasets import bandjoin

    console = _ui.console()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {str(out)!r}: bandjoin writes a directory (left.parquet, right.parquet)")
    start = int_or_duration(args.start)
    if not isinstance(start, int):
        raise CliError(f"--start {args.start!r}: bandjoin times are plain integers (time units)")
    make_out_dir(out)
    console.print(
        f"Generating [bold]{args.rows:,}[/] band-join rows per side (R: ts, x, y, z; S: ts, a, b, c, d): "
        f"{args.rate:g} rows per time unit per side, disorder {args.disorder:g} units, start {start}, "
        f"seed {args.seed}"
    )
    t0 = time.perf_counter()
    with console.status("generating rows"):
        left, right = bandjoin(args.rows, rate=args.rate, seed=args.seed, disorder=args.disorder, start=start)
    gen_s = time.perf_counter() - t0
    console.print(f"  generated in {gen_s:.2f} s ({_ui.fmt_rate(2 * args.rows, gen_s)})")
    t1 = time.perf_counter()
    paths = []
    for name, table in (("left", left), ("right", right)):
        path = out / f"{name}.parquet"
        write_parquet(
            table, path, console, row_group_rows=args.row_group_rows, compression=args.compression, label=name
        )
        paths.append(f"{escape(str(path))} ({_ui.mib(path)})")
    console.print(
        f"Wrote [bold]{' and '.join(paths)}[/] (row groups of {args.row_group_rows:,} rows) "
        f"in {time.perf_counter() - t1:.2f} s"
    )
    return EXIT_OK


# ----------------------------------------------------------------------------------------------- multiway


#: ``windgate.queries.QUERIES``'s names, spelled out so that the parser does not import the extension.
QUERY_NAMES = ("k-OS", "k-OI", "K-OS", "K-OI", "w-OS", "w-OI", "W-OS", "W-OI", "f-OS", "f-OI", "F-OS", "F-OI")


def _source_files(data: Path) -> list[Path]:
    """The sources in ``--data``: a directory's ``source-<i>.parquet`` files in the order of ``i`` (as
    ``generate --sources`` writes them), or one Parquet file (one source)."""
    if data.is_file():
        return [data]
    if not data.is_dir():
        raise CliError(f"--data {str(data)!r}: no such file or directory")
    found = []
    for path in data.glob("source-*.parquet"):
        index = path.name[len("source-") : -len(".parquet")]
        if index.isdigit():
            found.append((int(index), path))
    if not found:
        raise CliError(
            f"--data {str(data)!r}: no source-<i>.parquet files "
            "(windgate generate smartgrid|soundcloud --sources N writes them)"
        )
    return [path for _, path in sorted(found)]


def _cmd_multiway(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rich.markup import escape
    from rich.table import Table

    from windgate import queries

    console = _ui.console()
    query = queries.QUERIES[args.query]
    out = Path(args.out)
    check_out_path(out)
    files = _source_files(Path(args.data))
    try:
        tables = [pq.read_table(f) for f in files]
    except (OSError, pa.ArrowException) as exc:
        raise read_failed(exc, args.data, "--data") from exc
    rows_in = sum(t.num_rows for t in tables)
    console.print(
        f"Query [bold]{query.name}[/] ({escape(query.description)}: {escape(query.function)} by {query.by}, "
        f"windows {query.size} sliding {query.slide}) over [bold]{len(tables)}[/] sources of "
        f"{escape(str(args.data))} ({rows_in:,} rows), strategy {args.strategy}"
    )
    t0 = time.perf_counter()
    with console.status("aggregating"):
        out_table = queries.run_query(query, tables, strategy=args.strategy, threads=args.threads)
    seconds = time.perf_counter() - t0
    write_table(out_table, out, args.compression)

    report = Table(title=f"windgate multiway {query.name}", show_header=False, title_justify="left")
    report.add_column("what")
    report.add_column("value", justify="right")
    report.add_row("sources", f"{len(tables)}")
    report.add_row("rows in", f"{rows_in:,}")
    report.add_row("rows out", f"{out_table.num_rows:,}")
    report.add_row("seconds", f"{seconds:.3f}")
    report.add_row("throughput", _ui.fmt_rate(rows_in, seconds))
    report.add_row("output", f"{out} ({_ui.mib(out)})")
    console.print(report)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(args)


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="windgate",
        description="windgate: deterministic sliding-window stream operators. "
        "Generate data, aggregate Parquet files, run the Spark demo.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser("generate", help="generate a synthetic data set to Parquet")
    g.add_argument(
        "dataset",
        choices=list(_GENERATE_DEFAULTS),
        help="smartgrid: DEBS 2014 smart-plug readings (one file, or a directory with --sources); "
        "bandjoin: the R and S streams of ScaleJoin's benchmark, Gulisano et al. "
        "(a directory: left.parquet, right.parquet); "
        "points: d-dimensional points for skyline/top-k, as in Mencagli et al. 2017 (one file); "
        "soundcloud: comments on songs, as in Cederman et al. (a directory: source-000.parquet, ...)",
    )
    g.add_argument(
        "--rows",
        type=int,
        default=None,
        help="rows (default smartgrid, points, soundcloud 1,000,000; bandjoin 100,000 per side)",
    )
    g.add_argument(
        "--sources",
        type=positive_int,
        default=None,
        help="smartgrid, soundcloud: split the rows into this many time-sorted sources, one file each "
        "(--out/source-000.parquet, ...); soundcloud default 1",
    )
    g.add_argument("--songs", type=int, default=40_000, help="soundcloud: songs (keys; default 40,000)")
    g.add_argument(
        "--song-skew", type=float, default=1.0, help="soundcloud: Zipf exponent of songs (default 1.0)"
    )
    g.add_argument(
        "--split",
        choices=["row", "user"],
        default="row",
        help="soundcloud: sources round-robin by row (default) or by user (skewed rates)",
    )
    g.add_argument(
        "--p-mail", type=float, default=0.02, help="soundcloud: share of comments with an e-mail (0.02)"
    )
    g.add_argument("--p-ip", type=float, default=0.01, help="soundcloud: share of comments with an IP (0.01)")
    g.add_argument("--households", type=int, default=40, help="smartgrid: households (default 40)")
    g.add_argument("--dims", type=int, default=2, help="points: dimensions (default 2)")
    g.add_argument(
        "--distribution",
        choices=["independent", "correlated", "anticorrelated"],
        default="independent",
        help="points: value distribution (default independent)",
    )
    g.add_argument(
        "--correlation", type=float, default=None, help="points: pairwise correlation (correlated/anti)"
    )
    g.add_argument("--houses", type=int, default=None, help="smartgrid: houses (default households // 4)")
    g.add_argument(
        "--plugs-per-household", type=int, default=25, help="smartgrid: plugs per household (default 25)"
    )
    g.add_argument(
        "--rate",
        type=float,
        default=None,
        help="smartgrid: rows per second of event time (default 1000); "
        "bandjoin: rows per time unit per side (default 100); soundcloud: comments per tick (default 1000)",
    )
    g.add_argument(
        "--start",
        default=None,
        help="first event time: smartgrid ISO, UTC (default 2013-09-01T00:00:00); "
        "bandjoin, soundcloud an int (default 0)",
    )
    g.add_argument(
        "--disorder",
        type=float,
        default=0.0,
        help="max arrival delay (default 0): smartgrid seconds, bandjoin time units",
    )
    g.add_argument(
        "--dispersion",
        type=float,
        default=None,
        metavar="I",
        help="smartgrid: index of dispersion of arrivals: 1 = Poisson, thousands = bursty "
        "(as in Mencagli et al. 2017); "
        "default: regular arrivals",
    )
    g.add_argument("--seed", type=int, default=0)
    g.add_argument(
        "--row-group-rows", type=positive_int, default=1 << 20, help="Parquet row group size (default 1Mi)"
    )
    g.add_argument(
        "--compression", choices=COMPRESSIONS, default="zstd", help="Parquet compression (default zstd)"
    )
    g.add_argument(
        "--out",
        required=True,
        help="output: a Parquet file (smartgrid, points) or a directory (bandjoin, soundcloud, --sources)",
    )
    g.set_defaults(func=_cmd_generate)

    a = sub.add_parser("aggregate", help="sliding-window aggregation of a Parquet file, streamed by batches")
    a.add_argument("--input", required=True, help="input Parquet file")
    a.add_argument("--out", required=True, help="output Parquet file")
    a.add_argument("--time", default="ts", help="time column (default ts)")
    a.add_argument(
        "--size",
        required=True,
        help="window size: a duration such as 60s, 5 minutes (an int only on an integer time column)",
    )
    a.add_argument("--slide", default=None, help="window slide (default: size, i.e. tumbling)")
    a.add_argument("--offset", default="0", help="window offset, may be negative: --offset=-15m (default 0)")
    a.add_argument(
        "--tz",
        default=None,
        help="time zone whose local days windows of whole days follow across DST (e.g. Europe/Berlin)",
    )
    a.add_argument(
        "--by", action="extend", nargs="+", default=None, metavar="COLUMN", help="group-by columns"
    )
    a.add_argument(
        "--agg",
        action="append",
        required=True,
        metavar="COLUMN=FUNCS",
        help="e.g. '*=count' or 'value=sum,max' (repeatable); functions: "
        "count,sum,min,max,mean,var,std,first,last",
    )
    a.add_argument(
        "--lateness",
        default=None,
        help="watermark = max ts - lateness (a duration such as 5s, an int on an integer time column, or "
        "'adaptive'); default: exact, no late rows",
    )
    a.add_argument(
        "--on-late",
        choices=["drop", "error", "keep"],
        default=None,
        help="late rows: drop (default), error, or keep (written to --late-out)",
    )
    a.add_argument(
        "--late-out",
        default=None,
        metavar="PATH",
        help="write the late rows (every column and the watermark each met) to this Parquet file; "
        "implies --on-late keep",
    )
    a.add_argument(
        "--allowed-lateness",
        default=None,
        help="update mode: fired windows take late rows this much longer and fire again (a revision column)",
    )
    a.add_argument(
        "--emit",
        choices=["final", "early"],
        default="final",
        help="early: open windows also fire partial results every --interval (a final column)",
    )
    a.add_argument("--interval", default=None, help="the period of --emit early, in event time")
    a.add_argument("--threads", type=positive_int, default=None, help="worker threads (default: all cores)")
    choices, help_text = _strategies(multiway=False)
    a.add_argument("--strategy", choices=choices, default=None, help=f"{help_text} (default auto)")
    a.add_argument(
        "--scheduler",
        choices=["as_pid", "as", "pb_rr", "tb_rr"],
        default=None,
        help="pane farm: pane-level query (PLQ) scheduler (default as_pid)",
    )
    a.add_argument("--null-time", choices=["error", "drop"], default=None)
    a.add_argument("--columns", action="append", default=None, help="read only these input columns")
    a.add_argument(
        "--batch-rows", type=positive_int, default=65_536, help="rows per pushed batch (default 65536)"
    )
    a.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="keep a checkpoint in DIR: after a kill or Ctrl-C, the same command resumes from it and writes "
        "the same --out as an uninterrupted run",
    )
    a.add_argument(
        "--checkpoint-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="seconds between checkpoints (default 5; 0: after every batch)",
    )
    a.add_argument(
        "--compression", choices=COMPRESSIONS, default="zstd", help="Parquet compression (default zstd)"
    )
    a.set_defaults(func=_cmd_aggregate)

    m = sub.add_parser(
        "multiway",
        help="one of the twelve queries of Cederman et al. (k/K, w/W, f/F; -OS, -OI) "
        "over the sources of a directory",
    )
    m.add_argument(
        "--query",
        required=True,
        choices=QUERY_NAMES,
        help="k/K: 243 meters / 40,000 songs; w/W: 10 / 20 windows a row; f/F: e-mail / e-mail or IP; "
        "OS: first(), OI: count() or avg(); see windgate.queries",
    )
    m.add_argument(
        "--data",
        required=True,
        help="a directory of source-<i>.parquet files (windgate generate smartgrid|soundcloud --sources N), "
        "or one Parquet file; smartgrid queries expect --households 27 --plugs-per-household 9 --rate 486",
    )
    _, help_text = _strategies(multiway=True)
    m.add_argument("--strategy", default="auto", help=f"{help_text} (default auto)")
    m.add_argument("--threads", type=positive_int, default=None, help="worker threads (default: all cores)")
    m.add_argument("--out", required=True, help="output Parquet file")
    m.add_argument(
        "--compression", choices=COMPRESSIONS, default="zstd", help="Parquet compression (default zstd)"
    )
    m.set_defaults(func=_cmd_multiway)

    d = sub.add_parser(
        "demo", help="generate smart-grid data; windgate.spark vs Spark's best plans, answers checked"
    )
    d.add_argument(
        "--rows",
        type=positive_int,
        default=10_000_000,
        help="smart-grid rows to generate (default 10,000,000; the Parquet file is reused while present)",
    )
    d.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    d.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    d.add_argument("--disorder", type=float, default=5.0, help="max arrival delay in seconds (default 5)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument(
        "--repeat", type=positive_int, default=1, help="timed runs of each plan, best kept (default 1)"
    )
    d.add_argument("--k", type=positive_int, default=3, help="top-k: rows kept per window (default 3)")
    d.add_argument(
        "--check-every",
        type=positive_int,
        default=1,
        help="compare the answers on the keys with key %% N == 0 only (default 1: every answer in full)",
    )
    d.add_argument(
        "--shuffle-partitions", type=positive_int, default=4, help="spark.sql.shuffle.partitions (default 4)"
    )
    d.set_defaults(func=_cmd_demo)

    from .cli_tpcxbb import add_parser as add_tpcxbb

    add_tpcxbb(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed check, 2 bad input, 130 Ctrl-C)."""
    command = "windgate"
    try:
        parser = _parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help (0) or a bad argument (2, one line printed): a status, as below
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        command = f"windgate {args.command}"
        return _run(args, command)
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace, command: str) -> int:
    try:
        clean = _error_classes()
    except Exception:
        clean = (CliError,)
    try:
        import pyarrow as pa

        files: tuple[type[BaseException], ...] = (OSError, pa.ArrowException)
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        files = (OSError,)
    try:
        _ui.require_rich()
        return args.func(args)
    except clean + files as exc:
        if os.environ.get("WINDGATE_TRACEBACK"):
            raise
        name = "error" if isinstance(exc, CliError) else f"error: {type(exc).__name__}"
        print(f"{command}: {name}: {_ui.one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
