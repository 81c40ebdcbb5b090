"""windgate.spark.band_join against Spark's own join: clicks with the impressions of the same user up to 30 s
before them.

Data (numpy, seeded): ``--clicks`` clicks and ``--impressions`` impressions of ``--users`` users, uniform over
``--span`` seconds, as Spark DataFrames cached in memory (loading is not timed). Queries:

* keyed: ``l.user == r.user AND r.ts BETWEEN l.ts - 30s AND l.ts``. windgate:
  ``windgate.spark.band_join(clicks, views, time="ts", lower="-30s", upper="0s", on=windgate.eq("user",
  "user"))``; Spark: the DataFrame join with that condition (a sort-merge join on ``user``).
* unkeyed (``--nokey-clicks``/``--nokey-impressions`` rows, smaller: Spark compares every pair): only
  ``r.ts BETWEEN l.ts - 30s AND l.ts``; Spark plans a nested-loop join.

Each run writes every output row to Spark's ``noop`` sink; best of ``--repeat`` wall-clock seconds
(windgate's include the ``band_join`` call itself, whose planning job, if any, runs there). Both engines'
row counts must agree. ``measure()`` returns the numbers as a dict for other scripts. Prints a JSON
document and a summary; writes no report.

    python -m benches.peers spark_band_join                 # 20k clicks x 300k impressions, 2k users
    python -m benches.peers spark_band_join --quick
"""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa

from . import runner


def data(clicks: int, impressions: int, users: int, span_s: int, seed: int = 7) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    ts = pa.timestamp("us", tz="UTC")
    t0 = 1_700_000_000_000_000

    def side(n: int, extra: str) -> pa.Table:
        t = np.sort(rng.integers(0, span_s * 1_000_000, n)) + t0
        return pa.table(
            {
                "ts": pa.array(t, ts),
                "user": pa.array(rng.integers(0, users, n), pa.int64()),
                extra: pa.array(rng.integers(0, 1_000_000, n), pa.int64()),
            }
        )

    return side(clicks, "click_id"), side(impressions, "ad_id")


def _best(f, repeat: int) -> tuple[float, int]:
    best, rows = float("inf"), -1
    for _ in range(repeat):
        t = time.perf_counter()
        rows = f()
        best = min(best, time.perf_counter() - t)
    return best, rows


def _noop_count(df) -> int:
    df.write.format("noop").mode("overwrite").save()
    return -1


def measure(
    spark,
    clicks: int = 20_000,
    impressions: int = 300_000,
    users: int = 2_000,
    span_s: int = 3_600,
    nokey_clicks: int = 5_000,
    nokey_impressions: int = 50_000,
    repeat: int = 3,
) -> dict:
    """Seconds (best of ``repeat``) and row counts of both engines on the keyed and the unkeyed query."""
    from pyspark.sql import functions as F

    import windgate
    from windgate.spark import band_join

    def windgate_join(ldf, rdf, on):
        return band_join(ldf, rdf, time="ts", lower="-30s", upper="0s", on=on)

    out: dict = {"clicks": clicks, "impressions": impressions, "users": users, "span_s": span_s}
    for label, n_clicks, n_views, keyed in (
        ("keyed", clicks, impressions, True),
        ("nokey", nokey_clicks, nokey_impressions, False),
    ):
        lt, rt = data(n_clicks, n_views, users, span_s)
        ldf = spark.createDataFrame(lt).cache()
        rdf = spark.createDataFrame(rt).cache()
        ldf.count(), rdf.count()
        on = windgate.eq("user", "user") if keyed else ()
        wg = windgate_join(ldf, rdf, on)
        lf, rf = ldf.alias("l"), rdf.alias("r")
        cond = (F.col("r.ts") >= F.col("l.ts") - F.expr("INTERVAL 30 SECONDS")) & (
            F.col("r.ts") <= F.col("l.ts")
        )
        if keyed:
            cond = (F.col("l.user") == F.col("r.user")) & cond
        sp = lf.join(rf, cond)
        n_wg, n_sp = wg.count(), sp.count()
        if n_wg != n_sp:
            raise AssertionError(f"{label}: windgate {n_wg} rows, Spark {n_sp}")
        out[label] = {
            "clicks": n_clicks,
            "impressions": n_views,
            "pairs": n_wg,
            # windgate's time includes the call (its planning job runs there).
            "windgate_s": _best(lambda a=ldf, b=rdf, on=on: _noop_count(windgate_join(a, b, on)), repeat)[0],
            "spark_s": _best(lambda sp=sp: _noop_count(sp), repeat)[0],
        }
        ldf.unpersist(), rdf.unpersist()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = runner.parser(
        __doc__, quick="2k clicks x 30k impressions, 1 repeat", repeat=3, seed=False, out=False
    )
    ap.add_argument("--clicks", type=int, default=20_000)
    ap.add_argument("--impressions", type=int, default=300_000)
    ap.add_argument("--users", type=int, default=2_000)
    ap.add_argument("--span", type=int, default=3_600, help="seconds the events spread over")
    ap.add_argument("--nokey-clicks", type=int, default=5_000)
    ap.add_argument("--nokey-impressions", type=int, default=50_000)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args(argv)
    if a.quick:
        a.clicks, a.impressions, a.nokey_clicks, a.nokey_impressions, a.repeat = (
            2_000,
            30_000,
            1_000,
            10_000,
            1,
        )
    from windgate.spark import local_session

    spark = local_session("windgate-spark-band-join", a.master)
    res = measure(
        spark, a.clicks, a.impressions, a.users, a.span, a.nokey_clicks, a.nokey_impressions, a.repeat
    )
    print(json.dumps(res, indent=2))
    for label in ("keyed", "nokey"):
        r = res[label]
        print(
            f"{label}: {r['clicks']} x {r['impressions']} rows, {r['pairs']} pairs: "
            f"windgate {r['windgate_s']:.2f} s, Spark join {r['spark_s']:.2f} s "
            f"({r['spark_s'] / r['windgate_s']:.1f}x)"
        )
    spark.stop()
    return 0
