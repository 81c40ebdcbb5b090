"""``windgate demo`` (what ``make demo`` runs): generate smart-grid data, aggregate it with windgate inside
a local PySpark job and with Spark's own ``window()``, check both agree, report and plot."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .cli import EXIT_FAILED, EXIT_OK, CliError, _console, _fmt_rate, _step, _write_parquet

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

    if args.repeat < 1:
        raise CliError(f"--repeat: expected at least 1 timed run, got {args.repeat}")
    console = _console()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data_path = out / "smartgrid.parquet"
    wg_path = out / "windgate_windows.parquet"
    sp_path = out / "spark_windows.parquet"
    png_path = out / "demo.png"
    steps = 6
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

        # Alternate the two jobs and keep each one's best run: whichever ran second used to find the JVM's
        # shuffle and Parquet code already compiled, which skewed a single timed run by up to 2x.
        jobs = {
            "windgate": lambda: windgate_df(load).write.mode("overwrite").parquet(str(wg_path)),
            "Spark window()": lambda: _spark_native(load).write.mode("overwrite").parquet(str(sp_path)),
        }
        best = dict.fromkeys(jobs, float("inf"))
        title = (
            f"time windgate.spark.window_aggregate and Spark's window(), alternately, best of {args.repeat}"
        )
        with _step(console, 5, steps, title):
            for r in range(args.repeat):
                for name, job in jobs.items():
                    t0 = time.perf_counter()
                    job()
                    secs = time.perf_counter() - t0
                    best[name] = min(best[name], secs)
                    console.print(f"      run {r + 1}: {escape(name)} {secs:.2f} s")
        wg_s, sp_s = best["windgate"], best["Spark window()"]
    finally:
        spark.stop()

    with _step(console, 6, steps, f"compare, report, plot to {png_path}"):
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
            "timed_runs": args.repeat,
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
    t.add_row(f"seconds (best of {args.repeat})", f"{wg_s:.2f}", f"{sp_s:.2f}")
    t.add_row("load rows/s", _fmt_rate(load_rows, wg_s), _fmt_rate(load_rows, sp_s))
    t.add_row("speed-up", f"{sp_s / wg_s:.2f}x" if wg_s else "-", "1.00x")
    console.print(t)
    console.print(("[green]OK[/] " if agree else "[red]MISMATCH[/] ") + escape(detail))
    console.print(
        f"Wrote {escape(str(wg_path))}, {escape(str(sp_path))}, {escape(str(png_path))}, "
        f"{escape(str(out / 'report.json'))}"
    )
    return EXIT_OK if agree else EXIT_FAILED
