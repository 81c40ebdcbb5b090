"""The ``windgate`` command line: generate data, aggregate Parquet files, run the PySpark demo.

::

    windgate generate smartgrid --rows 10000000 --disorder 5 --out data/smartgrid.parquet
    windgate aggregate --input data/smartgrid.parquet --out out/windows.parquet --time ts --size 60s \\
        --slide 10s --by plug_id --agg '*=count' --agg 'value=sum,max' --lateness 5s
    windgate demo --rows 2000000 --out out/demo            # what `make demo` runs

Progress and reports use rich; without a terminal (CI, pipes) rich prints plain lines and final states only.
Bad input that windgate rejects (its ``WindgateError`` family, subclasses of ``ValueError``/``TypeError``)
prints one ``error: ...`` line and exits with status 2; set ``WINDGATE_TRACEBACK=1`` to see the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A problem with the command line or the files it names: printed as one line, exit status 2."""


# ----------------------------------------------------------------------------------------------- helpers


def _rich():
    try:
        import rich  # noqa: F401
    except ImportError as exc:  # pragma: no cover - rich is in the cli extra
        raise CliError("the windgate command line needs rich: pip install 'windgate[cli]'") from exc
    from rich.console import Console

    return Console


def _console(stderr: bool = False):
    Console = _rich()
    # Without a terminal rich uses 80 columns; the report tables are wider than that.
    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "120"))
    return Console(stderr=stderr, width=width, soft_wrap=width is not None, highlight=False)


def _progress(console, unit: str = "rows"):
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
def _step(console, number: int, total: int, title: str, *, spinner: bool = True) -> Iterator[None]:
    """Print a numbered step, show a spinner while it runs (terminals only) and its duration at the end.
    ``spinner=False`` for steps that show their own progress bar (rich allows one live display at a time)."""
    from rich.markup import escape

    console.print(f"[bold cyan]\\[{number}/{total}][/] {escape(title)} ...")
    t0 = time.perf_counter()
    with console.status(escape(title)) if spinner else contextlib.nullcontext():
        yield
    console.print(f"      [green]done[/] in {time.perf_counter() - t0:.1f} s")


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


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


_INT = re.compile(r"[+-]?\d+")


def _int_or_duration(text: str | None) -> int | str | None:
    """``"600"`` -> 600 (in the time column's unit), ``"10s"`` -> ``"10s"`` (a duration string)."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if _INT.fullmatch(text) else text


def _parse_aggs(specs: Sequence[str]) -> dict[str, str | list[str]]:
    """``["*=count", "value=sum,max"]`` -> ``{"*": "count", "value": ["sum", "max"]}`` (order kept)."""
    merged: dict[str, list[str]] = {}
    for spec in specs:
        column, sep, funcs = spec.partition("=")
        names = [f.strip() for f in funcs.split(",") if f.strip()]
        if not sep or not column.strip() or not names:
            raise CliError(
                f"--agg {spec!r}: expected COLUMN=FUNC[,FUNC...], e.g. '*=count' or 'value=sum,max'"
            )
        bucket = merged.setdefault(column.strip(), [])
        bucket.extend(n for n in names if n not in bucket)
    return {col: funcs[0] if len(funcs) == 1 else funcs for col, funcs in merged.items()}


def _split_list(values: Sequence[str] | None) -> list[str] | None:
    if not values:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return out or None


def _fmt_rate(rows: float, seconds: float) -> str:
    if seconds <= 0:
        return "-"
    rate = rows / seconds
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.2f} {unit} rows/s"
    return f"{rate:.0f} rows/s"


def _write_parquet(table, path: Path, console, *, row_group_rows: int, compression: str, label: str) -> None:
    """Write ``table`` to ``path`` in row groups of ``row_group_rows``, with a progress bar."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        _progress(console) as progress,
        pq.ParquetWriter(path, table.schema, compression=compression) as writer,
    ):
        task = progress.add_task(label, total=table.num_rows)
        for start in range(0, table.num_rows, row_group_rows):
            part = table.slice(start, row_group_rows)
            writer.write_table(part, row_group_size=row_group_rows)
            progress.advance(task, part.num_rows)
        if table.num_rows == 0:
            writer.write_table(table)


def _mib(path: Path) -> str:
    try:
        return f"{path.stat().st_size / 2**20:,.1f} MiB"
    except OSError:
        return "?"


# ----------------------------------------------------------------------------------------------- generate


def _cmd_generate(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from windgate.datasets import smartgrid

    console = _console()
    out = Path(args.out)
    plugs = args.households * args.plugs_per_household
    console.print(
        f"Generating [bold]{args.rows:,}[/] smart-grid rows: {args.households} households x "
        f"{args.plugs_per_household} plugs = {plugs:,} plugs, {args.rate:g} rows/s, "
        f"disorder {args.disorder:g} s, seed {args.seed}"
    )
    t0 = time.perf_counter()
    with console.status("generating rows"):
        table = smartgrid(
            args.rows,
            households=args.households,
            houses=args.houses,
            plugs_per_household=args.plugs_per_household,
            rate=args.rate,
            start=args.start,
            disorder=args.disorder,
            seed=args.seed,
        )
    gen_s = time.perf_counter() - t0
    console.print(f"  generated in {gen_s:.2f} s ({_fmt_rate(args.rows, gen_s)})")
    t1 = time.perf_counter()
    _write_parquet(
        table, out, console, row_group_rows=args.row_group_rows, compression=args.compression, label="writing"
    )
    console.print(
        f"Wrote [bold]{escape(str(out))}[/] ({_mib(out)}, row groups of {args.row_group_rows:,} rows) "
        f"in {time.perf_counter() - t1:.2f} s"
    )
    return EXIT_OK


# ----------------------------------------------------------------------------------------------- aggregate


def _cmd_aggregate(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rich.markup import escape
    from rich.table import Table

    import windgate

    console = _console()
    aggs = _parse_aggs(args.agg)
    by = _split_list(args.by)
    src = Path(args.input)
    if not src.exists():
        raise CliError(f"--input {str(src)!r}: no such file")
    try:
        pf = pq.ParquetFile(src)
    except (OSError, pa.ArrowException) as exc:
        raise CliError(f"--input {str(src)!r}: cannot read it as Parquet ({_one_line(exc)})") from exc
    total = pf.metadata.num_rows

    kwargs: dict[str, Any] = dict(
        time=args.time,
        size=_int_or_duration(args.size),
        slide=_int_or_duration(args.slide),
        offset=_int_or_duration(args.offset),
        by=by,
        aggs=aggs,
        lateness=_int_or_duration(args.lateness),
        on_late=args.on_late,
        threads=args.threads,
    )
    if args.strategy is not None:
        kwargs["strategy"] = args.strategy
    if args.null_time is not None:
        kwargs["null_time"] = args.null_time
    agg = windgate.WindowAggregator(**kwargs)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer: pq.ParquetWriter | None = None
    rows_in = rows_out = 0
    columns = None if args.columns is None else _split_list(args.columns)

    def write(batch: pa.RecordBatch) -> None:
        nonlocal writer, rows_out
        if writer is None:
            writer = pq.ParquetWriter(out, batch.schema, compression=args.compression)
        if batch.num_rows:
            table = pa.Table.from_batches([batch])
            if table.schema != writer.schema:
                table = table.cast(writer.schema)
            writer.write_table(table)
            rows_out += batch.num_rows

    console.print(
        f"Aggregating [bold]{escape(str(src))}[/] ({total:,} rows, {pf.metadata.num_row_groups} row groups): "
        f"windows {escape(str(kwargs['size']))}"
        + (f" sliding {escape(str(kwargs['slide']))}" if kwargs["slide"] is not None else "")
        + (f" by {escape(', '.join(by))}" if by else "")
        + f", aggs {escape(json.dumps(aggs))}"
    )
    t0 = time.perf_counter()
    done = False
    try:
        with _progress(console) as progress:
            task = progress.add_task("aggregating", total=total)
            for batch in pf.iter_batches(batch_size=args.batch_rows, columns=columns):
                write(agg.push(batch))
                rows_in += batch.num_rows
                progress.advance(task, batch.num_rows)
            write(agg.flush())
        done = True
    finally:
        if writer is not None:
            writer.close()
            if not done:
                out.unlink(missing_ok=True)  # no half-written output
    seconds = time.perf_counter() - t0

    stats = dict(getattr(agg, "stats", {}) or {})
    report = Table(title="windgate aggregate", show_header=False, title_justify="left")
    report.add_column("what")
    report.add_column("value", justify="right")

    def count(key: str, default: int | None) -> str:
        value = stats.get(key, default)
        return f"{value:,}" if isinstance(value, int) else str(value)

    report.add_row("rows in", count("rows_in", rows_in))
    report.add_row("late rows (dropped)", count("late_rows", 0))
    if "windows_out" in stats:
        report.add_row("windows out", count("windows_out", None))
    report.add_row("rows out", count("rows_out", rows_out))
    report.add_row("seconds", f"{seconds:.3f}")
    report.add_row("throughput", _fmt_rate(rows_in, seconds))
    report.add_row("output", f"{out} ({_mib(out)})")
    console.print(report)
    return EXIT_OK


# ----------------------------------------------------------------------------------------------- demo

DEMO_SIZE, DEMO_SLIDE = "60s", "10s"
DEMO_AGGS = {"*": "count", "value": ["sum", "mean", "max"]}


def _spark_native(df):
    """Spark's own ``window()`` group-by with the same output columns as windgate's (both unordered: the
    comparison sorts)."""
    from pyspark.sql import functions as F

    return (
        df.groupBy(F.window("ts", "60 seconds", "10 seconds"), "plug_id")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum("value").alias("sum_value"),
            F.avg("value").alias("mean_value"),
            F.max("value").alias("max_value"),
        )
        .select(
            "plug_id",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "count",
            "sum_value",
            "mean_value",
            "max_value",
        )
    )


def _compare(a, b) -> tuple[bool, str]:
    """Compare windgate's and Spark's results (pyarrow tables): the same number of rows, the same keys,
    windows and counts, and float results within 1e-9 (Spark's float sums depend on its summation order).
    Returns (all agree, description)."""
    import numpy as np
    import pyarrow as pa

    keys = [("window_start", "ascending"), ("plug_id", "ascending")]

    def norm(t):
        t = t.select(
            ["plug_id", "window_start", "window_end", "count", "sum_value", "mean_value", "max_value"]
        )
        for name in ("window_start", "window_end"):
            i = t.schema.get_field_index(name)
            t = t.set_column(i, name, t.column(name).cast(pa.timestamp("us", tz="UTC")))
        return t.sort_by(keys)

    if a.num_rows != b.num_rows:
        return False, f"row counts differ: windgate {a.num_rows:,}, Spark {b.num_rows:,}"
    a, b = norm(a), norm(b)
    for name in ("plug_id", "window_start", "window_end", "count"):
        if not a.column(name).equals(b.column(name)):
            return False, f"same row count ({a.num_rows:,}), but column {name} differs"
    worst = 0.0
    for name in ("sum_value", "mean_value", "max_value"):
        x = a.column(name).to_numpy()
        y = b.column(name).to_numpy()
        rel = np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-300)
        worst = max(worst, float(rel.max(initial=0.0)))
    if worst > 1e-9:
        return False, f"same rows and counts, but float results differ by up to {worst:.1e} (relative)"
    return True, f"same {a.num_rows:,} rows and counts; float results agree to {worst:.1e} (relative)"


def _plot_demo(table, timings: dict[str, float], path: Path, n_plugs: int = 4) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pyarrow.compute as pc

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    if table.num_rows:
        totals = (
            table.group_by("plug_id")
            .aggregate([("sum_value", "sum")])
            .sort_by([("sum_value_sum", "descending")])
        )
        plugs = totals.column("plug_id").to_pylist()[:n_plugs]
        for plug in plugs:
            rows = table.filter(pc.equal(table.column("plug_id"), plug)).sort_by("window_start")
            ax.plot(
                rows.column("window_start").to_numpy(),
                rows.column("sum_value").to_numpy() / 1000.0,
                label=f"plug {plug}",
                linewidth=1,
            )
        ax.legend(fontsize=8)
    ax.set_title("Total load per 60 s window (slide 10 s), the most loaded plugs", fontsize=10)
    ax.set_xlabel("window start (UTC)")
    ax.set_ylabel("sum of load readings (kW)")
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    names = list(timings)
    secs = [timings[n] for n in names]
    bars = bx.bar(names, secs, color=["tab:orange", "tab:blue"][: len(names)])
    for bar, s in zip(bars, secs, strict=True):
        bx.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{s:.2f} s", ha="center", va="bottom")
    bx.set_title("Spark job time (lower is better)", fontsize=10)
    bx.set_ylabel("seconds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cmd_demo(args: argparse.Namespace) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from rich.markup import escape
    from rich.table import Table

    from windgate.datasets import smartgrid

    console = _console()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data_path = out / "smartgrid.parquet"
    wg_path = out / "windgate_windows.parquet"
    sp_path = out / "spark_windows.parquet"
    png_path = out / "demo.png"
    steps = 7
    console.print(
        f"[bold]windgate demo[/]: {args.rows:,} smart-grid rows (disorder {args.disorder:g} s), "
        f"sliding windows {DEMO_SIZE}/{DEMO_SLIDE} per plug on the load rows, "
        f"windgate on Spark vs Spark's window(), {escape(args.master)}"
    )

    with _step(console, 1, steps, f"generate {args.rows:,} rows to {data_path}", spinner=False):
        table = smartgrid(args.rows, disorder=args.disorder, seed=args.seed)
        _write_parquet(table, data_path, console, row_group_rows=1 << 20, compression="zstd", label="writing")
        rows_in = table.num_rows
        del table

    with _step(console, 2, steps, f"start Spark ({args.master})"):
        from pyspark.sql import functions as F

        import windgate.spark as wspark

        spark = wspark.local_session(app_name="windgate-demo", master=args.master)
    try:
        with _step(console, 3, steps, "read the Parquet file with Spark, keep the load rows (property == 1)"):
            load = (
                spark.read.parquet(str(data_path))
                .where(F.col("property") == 1)
                .select("ts", "plug_id", "value")
                .cache()
            )
            load_rows = load.count()
            console.print(f"      {load_rows:,} load rows cached")

        def windgate_df(df):
            return wspark.window_aggregate(
                df, time="ts", size=DEMO_SIZE, slide=DEMO_SLIDE, by="plug_id", aggs=DEMO_AGGS
            )

        with _step(console, 4, steps, "warm up both (small slice; starts Spark's Python workers)"):
            small = load.limit(20_000)
            windgate_df(small).write.format("noop").mode("overwrite").save()
            _spark_native(small).write.format("noop").mode("overwrite").save()

        with _step(console, 5, steps, f"windgate.spark.window_aggregate -> {wg_path}"):
            t0 = time.perf_counter()
            windgate_df(load).write.mode("overwrite").parquet(str(wg_path))
            wg_s = time.perf_counter() - t0

        with _step(console, 6, steps, f"Spark native groupBy(window(...), plug_id) -> {sp_path}"):
            t0 = time.perf_counter()
            _spark_native(load).write.mode("overwrite").parquet(str(sp_path))
            sp_s = time.perf_counter() - t0
    finally:
        spark.stop()

    with _step(console, 7, steps, f"compare, report, plot to {png_path}"):
        wg = pq.read_table(wg_path)
        sp = pq.read_table(sp_path)
        agree, detail = _compare(wg, sp)
        windows = len(pc.unique(wg.column("window_start"))) if wg.num_rows else 0
        _plot_demo(wg, {"windgate": wg_s, "Spark window()": sp_s}, png_path)
        report = {
            "rows_in": rows_in,
            "load_rows": load_rows,
            "windows": windows,
            "output_rows": wg.num_rows,
            "spark_output_rows": sp.num_rows,
            "windgate_seconds": wg_s,
            "spark_seconds": sp_s,
            "windgate_rows_per_s": load_rows / wg_s if wg_s else None,
            "spark_rows_per_s": load_rows / sp_s if sp_s else None,
            "speedup": sp_s / wg_s if wg_s else None,
            "row_counts_equal": wg.num_rows == sp.num_rows,
            "results_agree": agree,
            "comparison": detail,
            "master": args.master,
            "disorder_s": args.disorder,
        }
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")

    t = Table(title=f"windgate demo ({args.master})", title_justify="left")
    t.add_column("")
    t.add_column("windgate on Spark", justify="right")
    t.add_column("Spark window()", justify="right")
    t.add_row("rows in (all / load)", f"{rows_in:,} / {load_rows:,}", f"{rows_in:,} / {load_rows:,}")
    t.add_row(
        "windows", f"{windows:,}", f"{len(pc.unique(sp.column('window_start'))) if sp.num_rows else 0:,}"
    )
    t.add_row("output rows", f"{wg.num_rows:,}", f"{sp.num_rows:,}")
    t.add_row("seconds", f"{wg_s:.2f}", f"{sp_s:.2f}")
    t.add_row("load rows/s", _fmt_rate(load_rows, wg_s), _fmt_rate(load_rows, sp_s))
    t.add_row("speed-up", f"{sp_s / wg_s:.2f}x" if wg_s else "-", "1.00x")
    console.print(t)
    console.print(("[green]OK[/] " if agree else "[red]MISMATCH[/] ") + escape(detail))
    console.print(
        f"Wrote {escape(str(wg_path))}, {escape(str(sp_path))}, {escape(str(png_path))}, "
        f"{escape(str(out / 'report.json'))}"
    )
    return EXIT_OK if agree else EXIT_FAILED


# ----------------------------------------------------------------------------------------------- parser


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="windgate",
        description="windgate: deterministic sliding-window stream operators. "
        "Generate data, aggregate Parquet files, run the Spark demo.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser("generate", help="generate a synthetic data set to Parquet")
    g.add_argument("dataset", choices=["smartgrid"], help="smartgrid: DEBS 2014 smart-plug readings")
    g.add_argument("--rows", type=int, default=1_000_000, help="rows to generate (default 1,000,000)")
    g.add_argument("--households", type=int, default=40, help="households (default 40)")
    g.add_argument("--houses", type=int, default=None, help="houses (default households // 4)")
    g.add_argument("--plugs-per-household", type=int, default=25, help="plugs per household (default 25)")
    g.add_argument("--rate", type=float, default=1000.0, help="rows per second of event time (default 1000)")
    g.add_argument("--start", default="2013-09-01T00:00:00", help="first event time, ISO, UTC")
    g.add_argument("--disorder", type=float, default=0.0, help="max arrival delay in seconds (default 0)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--row-group-rows", type=int, default=1 << 20, help="Parquet row group size (default 1Mi)")
    g.add_argument("--compression", default="zstd", help="Parquet compression (default zstd)")
    g.add_argument("--out", required=True, help="output Parquet file")
    g.set_defaults(func=_cmd_generate)

    a = sub.add_parser("aggregate", help="sliding-window aggregation of a Parquet file, streamed by batches")
    a.add_argument("--input", required=True, help="input Parquet file")
    a.add_argument("--out", required=True, help="output Parquet file")
    a.add_argument("--time", default="ts", help="time column (default ts)")
    a.add_argument(
        "--size", required=True, help="window size: an int in the time unit, or e.g. 60s, 5 minutes"
    )
    a.add_argument("--slide", default=None, help="window slide (default: size, i.e. tumbling)")
    a.add_argument("--offset", default="0", help="window offset (default 0)")
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
        help="watermark = max ts - lateness (int, duration or 'adaptive'); default: exact, no late rows",
    )
    a.add_argument("--on-late", choices=["drop", "error"], default="drop")
    a.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
    a.add_argument("--strategy", choices=["auto", "reference"], default=None)
    a.add_argument("--null-time", choices=["error", "drop"], default=None)
    a.add_argument("--columns", action="append", default=None, help="read only these input columns")
    a.add_argument("--batch-rows", type=int, default=65_536, help="rows per pushed batch (default 65536)")
    a.add_argument("--compression", default="zstd", help="Parquet compression of the output (default zstd)")
    a.set_defaults(func=_cmd_aggregate)

    d = sub.add_parser("demo", help="generate data and compare windgate on Spark with Spark's window()")
    d.add_argument("--rows", type=int, default=2_000_000, help="rows to generate (default 2,000,000)")
    d.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    d.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    d.add_argument("--disorder", type=float, default=5.0, help="max arrival delay in seconds (default 5)")
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=_cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed check, 2 bad input)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        clean = _error_classes()
    except Exception:
        clean = (CliError,)
    try:
        _rich()
        return args.func(args)
    except clean as exc:
        if os.environ.get("WINDGATE_TRACEBACK"):
            raise
        name = "error" if isinstance(exc, CliError) else f"error: {type(exc).__name__}"
        print(f"windgate {args.command}: {name}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"windgate {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
