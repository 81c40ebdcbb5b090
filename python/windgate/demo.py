"""``windgate demo`` (what ``make demo`` runs): windgate.spark against Spark's best plans on ~10M smart-grid
rows, every answer checked against Spark's.

1. generate the smart-grid rows and write them to Parquet once (reused while the file is there);
2. sliding windows (60 s / 10 s) per plug and property, count/sum/max: Spark's ``window()`` group-by, the
   hand-written pane plan in Spark SQL, and ``windgate.spark.window_aggregate`` (the plans of
   :mod:`windgate._demo_plans`, shared with ``benches/peers/spark.py``);
3. the 3 largest load readings per household and sliding window: Spark's ``row_number()`` over
   (window, household), its pane rewrite, and ``windgate.spark.topk``;
4. each answer (written to Parquet by the timed run) compared with Spark's (sorted; floats within 1e-9
   relative, the rest exact).

Every step prints its duration; the end prints a table (engine, seconds, rows/s, ratio vs the best Spark plan)
and writes ``report.json`` and ``demo.png`` (bars of the measured times) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from . import _demo_check, _demo_plans, _ui
from ._cli_io import write_parquet
from ._ui import EXIT_FAILED, EXIT_OK, CliError, Steps

__all__ = ["run"]

WINDOWS = _demo_plans.Windows(60, 10, key=("plug_id", "property"))
TOPK = _demo_plans.Windows(60, 10, key="household_id")
WINDGATE = "windgate.spark"


def _data_path(args) -> Path:
    return Path(args.out) / f"smartgrid-{args.rows}-seed{args.seed}-disorder{args.disorder:g}.parquet"


def _cached_rows(path: Path) -> int | None:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:  # missing or unreadable: generate it again
        return None


def _data(args, steps: Steps, console) -> tuple[Path, int]:
    """The Parquet file of smart-grid rows: generated and written unless a complete one is there."""
    from .datasets import smartgrid

    path = _data_path(args)
    if (rows := _cached_rows(path)) == args.rows:
        console.print(f"      reusing {path} ({rows:,} rows; delete it to generate the data again)")
        return path, rows
    with steps(f"generate {args.rows:,} smart-grid rows (disorder {args.disorder:g} s)"):
        table = smartgrid(args.rows, disorder=args.disorder, seed=args.seed)
    partial = path.with_suffix(".partial")
    with steps(f"write Parquet {path} (row groups of 1Mi rows)", spinner=False):
        write_parquet(table, partial, console, row_group_rows=1 << 20, compression="zstd", label="writing")
        partial.replace(path)  # a run killed while writing leaves no file that looks complete
    return path, table.num_rows


def _timed(steps: Steps, console, name: str, df, repeat: int, answer: Path) -> float:
    """Best of ``repeat`` runs of ``df`` writing its answer to the Parquet directory ``answer``."""
    best = float("inf")
    with steps(f"{name}: {repeat} timed run(s), answer to Parquet"):
        for i in range(repeat):
            t0 = time.perf_counter()
            df.write.mode("overwrite").parquet(str(answer))
            secs = time.perf_counter() - t0
            best = min(best, secs)
            if repeat > 1:
                console.print(f"      run {i + 1}: {secs:.2f} s")
    return best


def _family(steps, console, title, rows, engines, repeat, answers, every, exact, floats) -> list[dict]:
    """Time each engine's plan (its answer written under ``answers``), then read each answer (the rows whose
    first ``exact`` column is a multiple of ``every``) and compare it with the first engine's."""
    import pyarrow.parquet as pq

    results = []
    for i, (name, make) in enumerate(engines.items()):
        df, note = make()
        answer = answers / f"{title.split()[0]}-{i}"
        secs = _timed(steps, console, f"{title}: {name}", df, repeat, answer)
        results.append(
            {"family": title, "engine": name, "rows": rows, "seconds": secs, "notes": note, "answer": answer}
        )
    with steps(f"{title}: read every answer and compare it with {results[0]['engine']}'s"):
        ref = None
        for r in results:
            got = pq.read_table(r["answer"])
            if every > 1:
                got = got.filter(got.column(exact[0]).to_numpy() % every == 0)
            r["out_rows"] = got.num_rows
            if ref is None:
                ref, r["check"], r["ok"] = got, "reference", True
                continue
            r["ok"], r["check"] = _demo_check.compare(
                got, ref, exact=exact, floats=floats, names=(r["engine"], results[0]["engine"])
            )
            console.print(
                ("      [green]OK[/] " if r["ok"] else "      [red]MISMATCH[/] ")
                + f"{r['engine']}: {r['check']}"
            )
    best = min(r["seconds"] for r in results if r["engine"] != WINDGATE)
    for r in results:
        r["rows_per_s"] = rows / r["seconds"]
        r["vs_best_spark"] = best / r["seconds"]
    return results


def _plot(results: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = list(dict.fromkeys(r["family"] for r in results))
    fig, axes = plt.subplots(1, len(families), figsize=(6 * len(families), 4.2), squeeze=False)
    for ax, fam in zip(axes[0], families, strict=True):
        rows = [r for r in results if r["family"] == fam]
        names = [r["engine"] for r in rows]
        secs = [r["seconds"] for r in rows]
        colors = ["tab:orange" if n == WINDGATE else "tab:blue" for n in names]
        bars = ax.bar(range(len(rows)), secs, color=colors)
        ax.set_xticks(range(len(rows)), names, fontsize=8, rotation=10)
        for bar, r in zip(bars, rows, strict=True):
            label = f"{r['seconds']:.1f} s\n{r['vs_best_spark']:.2f}x" + ("" if r["ok"] else "\nMISMATCH")
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                bar.get_height(),
                label,
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_ylim(top=max(secs) * 1.3)
        ax.set_title(f"{fam}, {rows[0]['rows']:,} rows (lower is better)", fontsize=9)
        ax.set_ylabel("seconds (best run)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """``windgate demo``: the steps above; exit status 0 when every answer equals Spark's, else 1."""
    from rich.markup import escape
    from rich.table import Table

    if args.repeat < 1:
        raise CliError(f"--repeat: expected at least 1 timed run, got {args.repeat}")
    if args.check_every < 1:
        raise CliError(f"--check-every: expected at least 1, got {args.check_every}")
    console = _ui.console()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    k = args.k
    console.print(
        f"[bold]windgate demo[/]: {args.rows:,} smart-grid rows; windgate.spark vs Spark's best plans on "
        f"{escape(args.master)}: sliding windows {WINDOWS.size_s}s/{WINDOWS.slide_s}s per plug and property, "
        f"and the top {k} loads per household and window; every answer checked against Spark's"
    )
    cached = _cached_rows(_data_path(args)) == args.rows
    steps = Steps(console, 11 if cached else 13)
    t_start = time.perf_counter()
    data_path, rows = _data(args, steps, console)
    with steps(f"start Spark ({args.master})"):
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        import windgate.spark as wspark

        own_session = SparkSession.getActiveSession() is None
        spark = wspark.local_session(
            app_name="windgate-demo",
            master=args.master,
            **{"spark.sql.shuffle.partitions": str(args.shuffle_partitions)},
        )
    try:
        df = spark.read.parquet(str(data_path))
        load = df.where(F.col("property") == 1).select("ts", "household_id", "plug_id", "value")
        with steps("warm up every plan on 20,000 rows (JIT, Python workers; not timed)"):
            small = df.limit(20_000)
            for make in (_demo_plans.spark_window, _demo_plans.spark_panes):
                make(small, WINDOWS).write.format("noop").mode("overwrite").save()
            _demo_plans.windgate_window(None, small, WINDOWS)[0].write.format("noop").mode("overwrite").save()
            for make in (_demo_plans.spark_topk, _demo_plans.spark_topk_panes, _demo_plans.windgate_topk):
                make(load.limit(20_000), TOPK, k).write.format("noop").mode("overwrite").save()

        n = args.check_every
        answers = out / "answers"
        results = _family(
            steps,
            console,
            "window aggregation",
            rows,
            {
                "Spark window()": lambda: (
                    _demo_plans.spark_window(df, WINDOWS),
                    "groupBy(window(), plug, property)",
                ),
                "Spark panes (SQL)": lambda: (_demo_plans.spark_panes(df, WINDOWS), "pane partials exploded"),
                WINDGATE: lambda: _demo_plans.windgate_window(str(data_path), df, WINDOWS),
            },
            args.repeat,
            answers,
            n,
            ["plug_id", "property", "window_start", "count"],
            ["sum_value", "max_value"],
        )
        load_rows = load.count()
        results += _family(
            steps,
            console,
            f"top-{k} per window",
            load_rows,
            {
                "Spark row_number()": lambda: (_demo_plans.spark_topk(load, TOPK, k), f"row_number() <= {k}"),
                "Spark panes top-k": lambda: (
                    _demo_plans.spark_topk_panes(load, TOPK, k),
                    "top k per pane first",
                ),
                WINDGATE: lambda: (_demo_plans.windgate_topk(load, TOPK, k), "topk by household"),
            },
            args.repeat,
            answers,
            n,
            ["household_id", "window_start", "value", "ts"],
            [],
        )
    finally:
        if own_session:
            spark.stop()

    png = out / "demo.png"
    with steps(f"report and plot to {png}"):
        _plot(results, png, f"windgate demo: windgate.spark vs Spark's best plans ({args.master})")
        report = {
            "rows": rows,
            "data": str(data_path),
            "master": args.master,
            "timed_runs": args.repeat,
            "checked": "every answer" if n == 1 else f"windows of keys with key % {n} == 0",
            "steps": steps.times,
            "results": results,
            "all_equal": all(r["ok"] for r in results),
            "seconds_total": round(time.perf_counter() - t_start, 1),
        }
        (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")

    t = Table(title=f"windgate demo ({args.master}, best of {args.repeat})", title_justify="left")
    for col, justify in (("query", "left"), ("engine", "left"), ("seconds", "right"), ("rows/s", "right")):
        t.add_column(col, justify=justify)
    t.add_column("vs best Spark plan", justify="right")
    t.add_column("answer", justify="left")
    for r in results:
        answer = "reference" if r["check"] == "reference" else ("equal" if r["ok"] else "[red]MISMATCH[/]")
        t.add_row(
            r["family"],
            escape(r["engine"]),
            f"{r['seconds']:.2f}",
            f"{r['rows_per_s'] / 1e6:.2f} M",
            f"{r['vs_best_spark']:.2f}x",
            answer,
        )
    console.print(t)
    console.print("Where the time went:")
    for s in steps.times:
        console.print(f"  {s['seconds']:7.1f} s  {escape(s['step'])}")
    ok = report["all_equal"]
    console.print(
        ("[green]All answers equal Spark's[/]" if ok else "[red]MISMATCH: see above[/]")
        + f" ({report['checked']}). Wrote {escape(str(png))}, {escape(str(out / 'report.json'))}; "
        f"{report['seconds_total']:.0f} s in all."
    )
    return EXIT_OK if ok else EXIT_FAILED
