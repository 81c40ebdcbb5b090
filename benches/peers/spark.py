"""windgate.spark against Spark's best plans, on the same data in one Spark session, every answer checked.

Families of cases (``--cases`` picks them by ``family:name`` patterns; ``--rows`` sets the sizes):

* ``window``: sliding (60 s / 10 s) and tumbling (60 s) windows, 1k and 100k keys and unkeyed, count/sum/max
  and mean/std, over Parquet files (random keys in random order, uniform doubles, 1000 rows per second of
  event time; 4 files of 4 row groups) and, for one case, over ``spark.range`` with derived columns. Peers:
  ``groupBy(window(...), key)``, the hand-written pane decomposition
  (:func:`windgate._demo_plans.spark_panes`) and ``windgate.spark.window_aggregate`` (given the path when
  it takes one, else the DataFrame);
* ``join``: clicks and impressions of the same user within 30 s at two densities vs Spark's join on the user
  and the time band; and a join without a key (time band and ``|l.value - r.value| <= 0.5``) vs Spark's
  nested-loop join, at a small size;
* ``topk``: the 3 largest values per key and sliding window vs Spark's ``row_number()`` over (window, key)
  and its pane rewrite (top 3 per pane first).

Each plan is timed best-of-``--repeat`` to a ``noop`` sink (input read from the files every run), then its
answer is collected once and compared with the first Spark plan's: sorted, floats within 1e-9 relative,
everything else exact. Outputs larger than ``--check-rows`` are compared on the keys ``key % m == 0`` (the
report says which ``m``). A mismatch is a FAIL in the table, a MISMATCH line in the log and exit status 1.

    .venv/bin/python -m benches.peers spark                                   # 1M and 10M rows, every case
    .venv/bin/python -m benches.peers spark --rows 1M --repeat 1 \
        --cases 'window:sliding-1k-count_sum_max@*,join:nokey-*,topk:*'            # a quick look
    .venv/bin/python -m benches.peers spark --list                              # the case names

Results: ``<out>/spark.{json,md,png}`` (default ``bench-results/``); data cached in ``<out>/spark-data/``.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from windgate import _demo_check as check
from windgate import _demo_plans as plans

from . import plot as plots
from . import report, runner, spark_data
from .report import best_of, failure, log

NAME = "spark"
FAMILIES = {"window": "Window aggregation", "join": "Band join", "topk": "Top-k per window"}
SPARK_ENGINES = (
    "spark window()",
    "spark panes (SQL)",
    "spark join",
    "spark row_number()",
    "spark panes top-k",
)
WINDGATE = "windgate.spark"
TOPK_K = 3


@dataclass
class Case:
    family: str
    name: str
    rows: int  # rows in (both sides for joins)
    params: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.family}:{self.name}"


def _size(text: str) -> int:
    text = text.strip().upper().replace("_", "")
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def all_cases(sizes: list[int], join_sizes: list[tuple[int, int]], nokey: tuple[int, int]) -> list[Case]:
    window_specs = [  # (name, windows, keys, source)
        ("sliding-1k-count_sum_max", plans.Windows(60, 10, "key"), 1_000, "files"),
        ("sliding-100k-count_sum_max", plans.Windows(60, 10, "key"), 100_000, "files"),
        ("sliding-1k-mean_std", plans.Windows(60, 10, "key", aggs="mean_std"), 1_000, "files"),
        ("sliding-unkeyed-count_sum_max", plans.Windows(60, 10, None), 1_000, "files"),
        ("tumbling-1k-count_sum_max", plans.Windows(60, 60, "key"), 1_000, "files"),
        ("tumbling-100k-mean_std", plans.Windows(60, 60, "key", aggs="mean_std"), 100_000, "files"),
        ("tumbling-unkeyed-mean_std", plans.Windows(60, 60, None, aggs="mean_std"), 1_000, "files"),
        ("sliding-1k-count_sum_max-range", plans.Windows(60, 10, "key"), 1_000, "range"),
    ]
    out = []
    for rows in sizes:
        for name, w, keys, source in window_specs:
            params = {"windows": w, "keys": keys, "source": source}
            out.append(Case("window", f"{name}@{_label(rows)}", rows, params))
    for clicks, imps in join_sizes:
        params = {"clicks": clicks, "impressions": imps, "users": 1_000, "span_s": 3_600, "key": "user"}
        out.append(Case("join", f"user-{_label(clicks)}x{_label(imps)}", clicks + imps, params))
    clicks, imps = nokey
    params = {"clicks": clicks, "impressions": imps, "users": 1_000, "span_s": 3_600, "band": ("value", 0.5)}
    out.append(Case("join", f"nokey-band-{_label(clicks)}x{_label(imps)}", clicks + imps, params))
    for rows in sizes:
        params = {"windows": plans.Windows(60, 10, "key"), "keys": 1_000, "source": "files"}
        out.append(Case("topk", f"sliding-1k-top{TOPK_K}@{_label(rows)}", rows, params))
    return out


# --------------------------------------------------------------------------------------------- running


def noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def run_engines(case: Case, engines: dict, repeat: int, cores: int) -> list[dict]:
    """Time each engine's plan (a callable building the DataFrame, or raising) to the noop sink."""
    out = []
    for engine, make in engines.items():
        try:
            df, note = make()
            best, runs, _ = best_of(lambda df=df: noop(df), repeat)
            r = {"engine": engine, "seconds": best, "runs": [round(x, 3) for x in runs], "notes": note}
            log(f"  {case.id} {engine}: {best:.2f} s (runs {', '.join(f'{x:.2f}' for x in runs)})")
            r["_df"] = df
        except Exception as exc:  # reported in the table; the run goes on
            r = failure(engine, cores, exc)
        r.update(family=case.family, case=case.name, rows=case.rows, threads=cores)
        out.append(r)
    return out


def check_outputs(
    results: list[dict], exact: list[str], floats: list[str], sample=None, what: str = ""
) -> None:
    """Collect every engine's answer (through ``sample`` when given) and compare it with the first Spark
    plan's; sets ``check`` and ``out_rows`` (the rows compared)."""
    ref, ref_name = None, None
    for r in results:
        df = r.pop("_df", None)
        if df is None:
            continue
        try:
            t0 = time.perf_counter()
            got = check.collect(sample(df) if sample else df)
            r["out_rows"] = got.num_rows
            r["check_seconds"] = round(time.perf_counter() - t0, 2)
        except Exception as exc:
            r["check"] = (
                f"FAIL: collecting the answer raised {type(exc).__name__}: {str(exc).splitlines()[0]}"
            )
            continue
        if ref is None:
            ref, ref_name = got, r["engine"]
            r["check"] = f"reference{what}"
            continue
        ok, detail = check.compare(got, ref, exact=exact, floats=floats, names=(r["engine"], ref_name))
        r["check"] = f"ok ({detail} vs {ref_name}{what})" if ok else f"FAIL: {detail} (vs {ref_name}{what})"
        if not ok:
            log(f"MISMATCH in {r['case']}: {r['engine']}: {detail}")


def window_case(case: Case, spark, args, cores: int) -> list[dict]:
    w: plans.Windows = case.params["windows"]
    keys = case.params["keys"]
    if case.params["source"] == "files":
        path = spark_data.window_dataset(args.data, case.rows, keys, seed=args.seed)
        df = spark.read.parquet(str(path))
        source, what_in = str(path), "Parquet files"
    else:
        df = spark_data.range_frame(spark, case.rows, keys)
        source, what_in = None, "spark.range + derived columns"
    in_note = f"input: {what_in}"
    engines = {
        "spark window()": lambda: (plans.spark_window(df, w), f"groupBy(window(), key); {in_note}"),
        "spark panes (SQL)": lambda: (plans.spark_panes(df, w), f"panes exploded into windows; {in_note}"),
        WINDGATE: lambda: _windgate_window(source, df, w, in_note),
    }
    results = run_engines(case, engines, args.repeat, cores)
    n = -(-w.size_s // w.slide_s)
    windows = case.rows / 1000 / w.slide_s + n
    estimate = windows * (min(keys, case.rows * n / windows) if w.key else 1)
    sample, what = None, ""
    if w.key and estimate > args.check_rows:
        from pyspark.sql import functions as F

        m = math.ceil(estimate / args.check_rows)
        sample, what = (lambda d: d.where(F.pmod(F.col(w.key), F.lit(m)) == 0)), f"; sample: key % {m} == 0"
    floats = [c for c in plans.AGG_COLUMNS[w.aggs] if c != "count"]
    exact = [c for c in w.columns if c not in floats]
    check_outputs(results, exact, floats, sample, what)
    return results


def _windgate_window(source, df, w, in_note):
    out, how = plans.windgate_window(source, df, w)
    return out, f"window_aggregate given the {how}; {in_note}"


def join_case(case: Case, spark, args, cores: int) -> list[dict]:
    p = case.params
    lpath, rpath = spark_data.join_dataset(
        args.data, p["clicks"], p["impressions"], users=p["users"], span_s=p["span_s"], seed=args.seed
    )
    left, right = spark.read.parquet(str(lpath)), spark.read.parquet(str(rpath))
    kw = {"window_s": 30, "key": p.get("key"), "band": p.get("band")}
    what = (
        "user = user AND r.ts BETWEEN l.ts - 30s AND l.ts + 30s"
        if p.get("key")
        else ("r.ts BETWEEN l.ts +- 30s AND abs(l.value - r.value) <= 0.5 (no equality key: nested loops)")
    )
    engines = {
        "spark join": lambda: (plans.spark_band_join(left, right, **kw), what),
        WINDGATE: lambda: (plans.windgate_band_join(left, right, **kw), "band_join, default buckets"),
    }
    results = run_engines(case, engines, args.repeat, cores)
    check_outputs(results, ["left_id", "right_id"], [])
    return results


def topk_case(case: Case, spark, args, cores: int) -> list[dict]:
    w: plans.Windows = case.params["windows"]
    path = spark_data.window_dataset(args.data, case.rows, case.params["keys"], seed=args.seed)
    df = spark.read.parquet(str(path))
    engines = {
        "spark row_number()": lambda: (plans.spark_topk(df, w, TOPK_K), "window(), row_number() <= k"),
        "spark panes top-k": lambda: (
            plans.spark_topk_panes(df, w, TOPK_K),
            "top k per pane, then per window",
        ),
        WINDGATE: lambda: (plans.windgate_topk(df, w, TOPK_K), "topk, keyed"),
    }
    results = run_engines(case, engines, args.repeat, cores)
    estimate = (case.rows / 1000 / w.slide_s + 6) * case.params["keys"] * TOPK_K
    sample, what = None, ""
    if estimate > args.check_rows:
        from pyspark.sql import functions as F

        m = math.ceil(estimate / args.check_rows)
        sample, what = (lambda d: d.where(F.pmod(F.col("key"), F.lit(m)) == 0)), f"; sample: key % {m} == 0"
    # Compared on the chosen values, not row identity beyond (value, ts): ties would be broken alike anyway.
    check_outputs(results, ["key", "window_start", "value", "ts"], [], sample, what)
    return results


def warm_up(spark) -> None:
    """Every plan once on a few thousand rows: JIT, Python workers, Arrow paths (not timed)."""
    from pyspark.sql import functions as F

    def frame(rows: int):
        d = spark_data.range_frame(spark, rows, 50)
        return d.withColumn("id", F.monotonically_increasing_id()).withColumn("user", F.col("key") % 7)

    df = frame(20_000)
    for w in (plans.Windows(60, 10, "key"), plans.Windows(60, 60, None, aggs="mean_std")):
        for make in (plans.spark_window, plans.spark_panes):
            noop(make(df, w))
        noop(plans.windgate_window(None, df, w)[0])
    for make in (plans.spark_topk, plans.spark_topk_panes, plans.windgate_topk):
        noop(make(df, plans.Windows(60, 10, "key"), TOPK_K))
    for make in (plans.spark_band_join, plans.windgate_band_join):
        noop(make(df, frame(5_000), window_s=30, key="user"))


# --------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runner.parser(__doc__, repeat=3, repeat_help="timed runs per plan, best kept (default 3)")
    p.add_argument("--rows", default="1M,10M", help="window/top-k input sizes, comma list (default 1M,10M)")
    p.add_argument("--with-30m", action="store_true", help="add 30M rows to --rows")
    p.add_argument(
        "--cases", default="*", help="comma list of family:name patterns (default all); see --list"
    )
    p.add_argument("--list", action="store_true", help="list the cases --rows gives and exit")
    p.add_argument(
        "--join-sizes", default="5k:75k,20k:300k", help="clicks:impressions pairs (default 5k:75k,20k:300k)"
    )
    p.add_argument(
        "--nokey-size", default="4k:20k", help="clicks:impressions of the keyless band join (4k:20k)"
    )
    p.add_argument("--check-rows", type=int, default=2_000_000, help="largest answer compared in full (2M)")
    p.add_argument(
        "--shuffle-partitions", type=int, default=4, help="spark.sql.shuffle.partitions (default 4)"
    )
    p.add_argument("--master", default="local[2]")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false")
    p.add_argument("--data", default=None, help="data directory (default <out>/spark-data)")
    args = p.parse_args(argv)
    args.sizes = [_size(x) for x in args.rows.split(",") if x.strip()] + (
        [30_000_000] if args.with_30m else []
    )
    pairs = [tuple(_size(v) for v in x.split(":")) for x in args.join_sizes.split(",") if x.strip()]
    nokey = tuple(_size(v) for v in args.nokey_size.split(":"))
    patterns = [x.strip() for x in args.cases.split(",") if x.strip()]
    args.selected = [
        c for c in all_cases(args.sizes, pairs, nokey) if any(fnmatch.fnmatch(c.id, pat) for pat in patterns)
    ]
    if not args.selected and not args.list:
        p.error(f"--cases {args.cases!r} matches no case; see --list")
    args.data = Path(args.data or Path(args.out) / "spark-data")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        print("\n".join(c.id for c in args.selected))
        return 0
    import windgate.spark as wspark

    run = runner.Run(NAME, args.out)
    cores = int(args.master[6:-1]) if args.master[6:-1].isdigit() else None
    t0 = time.perf_counter()
    spark = wspark.local_session(
        app_name="windgate-bench-spark",
        master=args.master,
        **{"spark.sql.shuffle.partitions": str(args.shuffle_partitions)},
    )
    took = time.perf_counter() - t0
    log(f"Spark {spark.version} on {args.master} in {took:.1f} s; {len(args.selected)} cases")
    try:
        if args.warm_up:
            t0 = time.perf_counter()
            warm_up(spark)
            log(f"warmed up every plan in {time.perf_counter() - t0:.1f} s (not timed)")
        runners = {"window": window_case, "join": join_case, "topk": topk_case}
        for case in args.selected:
            log(f"case {case.id} ({case.rows:,} rows in)")
            try:
                res = runners[case.family](case, spark, args, cores)
            except (
                Exception
            ) as exc:  # data generation or set-up failed: the case is reported, the run goes on
                res = [
                    dict(
                        failure("(case set-up)", cores, exc),
                        family=case.family,
                        case=case.name,
                        rows=case.rows,
                    )
                ]
            best = min(
                (r["seconds"] for r in res if r["engine"] in SPARK_ENGINES and r.get("seconds")), default=None
            )
            for r in res:
                r.pop("_df", None)
                if best and r.get("seconds"):
                    r["vs_best_spark"] = best / r["seconds"]
                run.add(r, "")
    finally:
        spark.stop()
    return finish(args, run)


def finish(args, run: runner.Run) -> int:
    """The report: one table per family of cases; exit status 1 when an answer failed or mismatched."""
    results = run.results
    failed = run.failed(errors=True)
    columns = (
        ("case", "case"),
        ("engine", "engine"),
        ("rows", "rows in"),
        ("seconds", "seconds (best)"),
        ("rows_per_s", "rows/s"),
        ("vs_best_spark", "vs best Spark plan", lambda v: f"{v:.2f}x"),
        ("out_rows", "rows compared"),
        ("check", "check"),
        ("notes", "notes"),
    )
    groups = [(FAMILIES[f], [r for r in results if r["family"] == f]) for f in FAMILIES]
    groups = [(h, g) for h, g in groups if g]
    notes = [
        "Seconds: best of the timed runs of the plan to a noop sink, input read from the files every run.",
        "vs best Spark plan: the fastest Spark plan's seconds in the same case over this engine's (above 1: "
        "faster than Spark's best).",
        "rows/s: input rows (both sides for joins) per second.",
        "check: each answer collected once and compared with the first Spark plan's, sorted; floats within "
        "1e-9 relative, everything else exact; 'sample' = compared on the keys with key % m == 0 only.",
        f"Spark session: windgate.spark.local_session({args.master}), spark.sql.shuffle.partitions="
        f"{args.shuffle_partitions}, AQE on (Spark's default).",
    ]
    if failed:
        notes.insert(
            0,
            f"**{len(failed)} FAILED OR MISMATCHED RESULT(S)**: "
            + "; ".join(f"{r['case']} {r['engine']}" for r in failed),
        )
    params = {
        "rows": args.sizes,
        "cases": [c.id for c in args.selected],
        "repeat": args.repeat,
        "master": args.master,
        "shuffle_partitions": args.shuffle_partitions,
        "check_rows": args.check_rows,
        **run.load(),
    }
    paths = run.write(
        title="windgate.spark vs Spark's best plans (same data, same session)",
        params=params,
        notes=notes,
        columns=columns,
        groups=groups,
        plot=plots.case_seconds,
    )
    for heading, group in groups:
        print(f"\n{heading}\n" + report.markdown_table(group, columns))
    print("\nwrote " + ", ".join(str(p) for p in paths.values()))
    if failed:
        log(f"{len(failed)} result(s) FAILED or MISMATCHED: see the check column")
    return 1 if failed else 0
