"""Window aggregation scaling: windgate's rows/s against panes per window, keys, aggregates and threads,
each cell beside DuckDB and Polars on the same data in the same run, with a numpy read-only pass as the
ceiling.

The data of every cell is generated in memory with numpy (``--seed``): ``--rows`` rows (default 4 M), one
per millisecond in time order (``ts``, ``timestamp[ms, tz=UTC]``), ``key`` int64 drawn uniformly at random
from ``keys`` values ("random") or round-robin ``i % keys`` ("regular"), ``value`` random float64 in [0, 1).
Windows align like Spark's ``window()``: window ``j`` covers ``[j*slide, j*slide + size)``, one output row
per (window, key) that holds at least one row of the key, ordered by (window_start, key).

Four tables (rows/s; tables 1-3 on one thread for every engine):

1. panes per window 1, 6, 60, 288, 1440: 100 random keys, slide 1 s (1000 rows a pane, 10 a key), size =
   ppw * slide, count + sum + max. 288 is the "24 h window sliding 5 min over 100 sensors" shape.
2. keys 10, 1k, 100k, 1M, random and regular order: 60 s windows sliding 10 s (6 panes), count + sum + max.
3. aggregates count; count + sum + max; mean + std + min + max + first + last: 1k random keys, 60 s / 10 s.
4. threads 1 and 2 (1k random keys, 60 s / 10 s, count + sum + max): windgate's ``strategy="auto"`` and
   every parallel strategy of its registry (``windgate._native.strategies``) but the multi-source ones,
   DuckDB (``SET threads``) and Polars (``POLARS_MAX_THREADS`` in a subprocess), with the 1 -> 2 speed-up.

Engines, each timed best of ``--repeat`` from data already in its own memory format (not timed) to a
materialised result ordered by (window_start, key):

* ``windgate``: ``windgate.window_aggregate(table, time="ts", by="key", size, slide, aggs, threads)``.
* ``duckdb``: the direct SQL (each row exploded into its windows with a lateral ``range()``, GROUP BY), run
  only below 60 panes a window (it does ppw times the work); ``duckdb panes+frame``: partial aggregates per
  (key, pane), then one window frame over panes per key (``RANGE BETWEEN ppw-1 PRECEDING AND CURRENT
  ROW``) on those rows plus one empty filler row per window whose last pane the key does not have (so a
  window exists iff the key has a row in one of its panes, as in windgate), see :func:`duckdb_frame_query`.
* ``polars``: ``group_by_dynamic(every=slide, period=size, group_by=key)``; ``polars panes+rolling``: the
  same pane partials and filler rows, then ``rolling_*_by`` over a (key, pane) index, see
  :func:`polars_panes`. Both run after the other engines, in one worker subprocess per thread count
  (``POLARS_MAX_THREADS``) that reads each data set once.
* ``numpy read pass`` (``ts.min()``, ``key.sum()``, ``value.sum()``) and ``numpy bincount``
  (``bincount(key, weights=value)``): rows/s of just reading the columns, the physical reference.

A peer that runs longer than ``--peer-timeout`` seconds or twice windgate's time in the cell, whichever is
longer, is stopped (DuckDB interrupted, the Polars process killed and restarted for the next query) and shown
as ``timeout``; in table 2 it is then skipped at more keys in the same order (shown as ``skipped``). Repeats
stop once another run would pass that budget too (windgate is never stopped). Cells that run the same query on
the same data (table 2's 1k random keys, table 3's count + sum + max, table 4's single thread) share one
measurement. Every peer's result is checked against windgate's in the same cell: output rows, sum of keys, sum
of window numbers, sum of counts (exact) and the sum of every float column (1e-9 relative); a difference shows
as ``MISMATCH`` in the table, is logged and makes the script exit 1.

    .venv/bin/python -m benches.peers agg_scaling            # 4 M rows a cell, best of 3 (~7-10 min)
    .venv/bin/python -m benches.peers agg_scaling --quick    # 200 k rows, 1 run, fewer cells (< 60 s)

Results: ``<out>/agg_scaling.{json,md,png}`` (default ``bench-results/``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import plot as plots
from . import report, runner
from .report import best_of, fmt_rate, log

NAME = "agg_scaling"
TIME, KEY = "ts", "key"
#: Aggregate sets of table 3 (and count+sum+max of the others): name -> windgate's ``aggs``.
AGG_SETS = {
    "count": {"*": "count"},
    "count+sum+max": {"*": "count", "value": ["sum", "max"]},
    "mean+std+min+max+first+last": {"value": ["mean", "std", "min", "max", "first", "last"]},
}
STANDARD = "count+sum+max"
PPW = (1, 6, 60, 288, 1440)
KEYS = (10, 1_000, 100_000, 1_000_000)
ORDERS = ("random", "regular")
DIRECT_MAX_PPW = 59  # the direct DuckDB SQL explodes every row ppw times: only for short windows
PEERS = ("duckdb", "duckdb panes+frame", "polars", "polars panes+rolling")
REFS = ("numpy read pass", "numpy bincount")
#: The tables: number -> heading (formatted with the table's first cell ``c`` and STANDARD).
TABLES = {
    "1": "1. rows/s against panes per window ({c.keys} random keys, slide {c.slide_ms:,} ms, {std}, 1 core)",
    "2": "2. rows/s against keys ({c.ppw} panes a window, slide {c.slide_ms:,} ms, {std}, 1 core)",
    "3": "3. rows/s against aggregates ({c.keys:,} random keys, {c.ppw} panes a window, 1 core)",
    "4": "4. rows/s against threads ({c.keys:,} random keys, {c.ppw} panes a window, {std})",
}


@dataclass(frozen=True)
class Case:
    """One cell: the data (rows, keys, order), the windows (slide and panes per window), the aggregates and
    the thread counts."""

    table: str
    label: str
    rows: int
    keys: int
    order: str
    slide_ms: int
    ppw: int
    aggs: str = STANDARD
    threads: tuple[int, ...] = (1,)

    @property
    def size_ms(self) -> int:
        return self.slide_ms * self.ppw

    @property
    def data(self) -> tuple[int, int, str]:
        return (self.rows, self.keys, self.order)

    def funcs(self) -> list[str]:
        """Output columns after ``count``: ``<func>_value`` in windgate's order."""
        spec = AGG_SETS[self.aggs]
        value = spec.get("value", [])
        return [value] if isinstance(value, str) else list(value)


def cases(rows: int, quick: bool, tables: list[str]) -> list[Case]:
    """The cells of the chosen tables; ``quick`` keeps the extremes of tables 1 and 2."""
    ppws = (1, 6, 288) if quick else PPW
    keys = (10, 100_000) if quick else KEYS
    out = []
    if "1" in tables:
        out += [Case("1", f"{p} ppw", rows, 100, "random", 1_000, p) for p in ppws]
    if "2" in tables:
        out += [Case("2", f"{k:,} {o}", rows, k, o, 10_000, 6) for k in keys for o in ORDERS]
    if "3" in tables:
        out += [Case("3", a, rows, 1_000, "random", 10_000, 6, a) for a in AGG_SETS]
    if "4" in tables:
        out.append(Case("4", "1k random", rows, 1_000, "random", 10_000, 6, threads=(1, 2)))
    return out


def make_data(rows: int, keys: int, order: str, seed: int) -> pa.Table:
    """``rows`` rows, one per millisecond from 0, keys random or round-robin, values random."""
    rng = np.random.default_rng(seed)
    ts = np.arange(rows, dtype=np.int64)
    key = rng.integers(0, keys, rows, dtype=np.int64) if order == "random" else ts % keys
    value = rng.random(rows)
    return pa.table(
        {TIME: pa.array(ts, pa.timestamp("ms", tz="UTC")), KEY: pa.array(key), "value": pa.array(value)}
    )


def windgate_strategies() -> list[str]:
    """``auto``, then the registry's parallel strategies for one source (the multi-source designs need
    several time-sorted inputs)."""
    try:
        from windgate import _native

        reg = _native.strategies("window_aggregate")
    except Exception:  # an older build without the registry: the production ones
        return ["auto", "farm"]
    names = [s["name"] for s in reg if s["parallel"] and not s["sorted_sources"] and s["name"] != "auto"]
    return ["auto", *names]


# --------------------------------------------------------------------------------------------- checks


def summary(out: pa.Table, slide_ms: int) -> dict:
    """What the checks compare: output rows, sum of keys, sum of window numbers, and the sum of every
    aggregate column (counts as exact integers, floats as floats; nulls skipped)."""
    ws = out.column("window_start")
    if pa.types.is_timestamp(ws.type):
        ws = ws.cast(pa.timestamp("ms", tz=ws.type.tz)).cast(pa.int64())
    ws = ws.to_numpy().astype(np.int64)
    s = {
        "out_rows": out.num_rows,
        "key_sum": int(out.column(KEY).to_numpy().astype(np.int64).sum()),
        "window_sum": int(np.floor_divide(ws, slide_ms).sum()),
    }
    for name in out.column_names:
        if name == "count":
            s["count_sum"] = int(out.column(name).to_numpy().astype(np.int64).sum())
        elif name.endswith("_value"):
            col = out.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
            s[name] = float(np.nansum(col))
    return s


def check(result: dict, ref: dict | None) -> str:
    """ "ok" when the summaries agree (floats to 1e-9 relative), else "FAIL: " and what differs."""
    if ref is None:
        return "not checked (windgate did not run)"
    problems = []
    for k, want in ref.items():
        got = result.get(k)
        if isinstance(want, float):
            if got is None or not abs(got - want) <= 1e-9 * max(abs(got), abs(want), 1.0):
                problems.append(f"{k} {got!r} != {want!r}")
        elif got != want:
            problems.append(f"{k} {got!r} != {want!r}")
    return "FAIL: " + "; ".join(problems) + " (windgate)" if problems else "ok (windgate)"


# --------------------------------------------------------------------------------------------- engines


def run_windgate(table: pa.Table, case: Case, strategy: str, threads: int, repeat: int, budget: float):
    import windgate

    def once():
        return windgate.window_aggregate(
            table,
            time=TIME,
            by=KEY,
            size=f"{case.size_ms}ms",
            slide=f"{case.slide_ms}ms",
            aggs=AGG_SETS[case.aggs],
            threads=threads,
            strategy=strategy,
        )

    best, runs, out = best_of(once, repeat, budget)
    return best, runs, summary(out, case.slide_ms)


def _duckdb_aggs(case: Case, frame: bool) -> list[str]:
    """The SELECT list of the aggregates, over raw rows (``v``, ``t``) or over the pane partials in the
    frame ``x`` (``c``: rows, ``s``: sum, ``q``: sum of squares, ``mn``/``mx``, ``f``/``ft``: first value and
    its time, ``l``/``lt``: last)."""
    out = []
    if "count" in AGG_SETS[case.aggs].get("*", ""):
        out.append("sum(c) OVER x AS count" if frame else "count(*) AS count")
    for f in case.funcs():
        if not frame:
            sql = {
                "sum": "sum(v)",
                "max": "max(v)",
                "min": "min(v)",
                "mean": "avg(v)",
                "std": "stddev_samp(v)",
                "first": "arg_min(v, t)",
                "last": "arg_max(v, t)",
            }[f]
        else:
            n = "sum(c) OVER x"
            sql = {
                "sum": "sum(s) OVER x",
                "max": "max(mx) OVER x",
                "min": "min(mn) OVER x",
                "mean": f"sum(s) OVER x / {n}",
                "std": f"CASE WHEN {n} > 1 THEN sqrt(greatest(0, (sum(q) OVER x - sum(s) OVER x * sum(s) "
                f"OVER x / {n}) / ({n} - 1))) END",
                "first": "arg_min(f, ft) OVER x",
                "last": "arg_max(l, lt) OVER x",
            }[f]
        out.append(f"{sql} AS {f}_value")
    return out


def duckdb_direct_query(case: Case) -> str:
    """Each row exploded into the ppw windows holding it (lateral ``range()``), then GROUP BY: the direct
    formulation of the window_aggregate suite. Times are non-negative, so ``//`` is a floor."""
    n, slide = case.ppw, case.slide_ms
    return f"""
        WITH b AS (SELECT key, value AS v, epoch_ms(ts) AS t, epoch_ms(ts) // {slide} AS k FROM t)
        SELECT j * {slide} AS window_start, key, {", ".join(_duckdb_aggs(case, False))}
        FROM b, range(k - {n - 1}, k + 1) AS r(j)
        GROUP BY ALL
        ORDER BY window_start, key
    """


def duckdb_frame_query(case: Case) -> str:
    """Pane partials per (key, pane ``e``), then a RANGE frame over panes per key. The frame at a pane row
    gives the window whose last pane it is; the windows whose last pane the key lacks (after a pane of the
    key, before its next one and at most ppw-1 panes on) get one empty filler row each, made with a lateral
    ``range()`` from ``lead(e)``, so the frame yields exactly one row per output window."""
    n, slide = case.ppw, case.slide_ms
    parts = ["count(*) AS c", "sum(value) AS s", "max(value) AS mx"]
    funcs = case.funcs()
    if "min" in funcs:
        parts.append("min(value) AS mn")
    if "std" in funcs:
        parts.append("sum(value * value) AS q")
    if "first" in funcs:
        parts += ["arg_min(value, ts) AS f", "min(ts) AS ft"]
    if "last" in funcs:
        parts += ["arg_max(value, ts) AS l", "max(ts) AS lt"]
    cols = [p.rsplit(" AS ", 1)[1] for p in parts]
    nulls = ", ".join(f"NULL AS {c}" for c in cols)
    return f"""
        WITH p AS (SELECT key, epoch_ms(ts) // {slide} AS e, {", ".join(parts)} FROM t GROUP BY ALL),
        f AS (SELECT *, lead(e) OVER (PARTITION BY key ORDER BY e) AS ne FROM p),
        w AS (SELECT key, e, {", ".join(cols)} FROM f
              UNION ALL
              SELECT key, g AS e, {nulls}
              FROM f, range(e + 1, least(coalesce(ne, e + {n}), e + {n})) AS r(g))
        SELECT (e - {n - 1}) * {slide} AS window_start, key, {", ".join(_duckdb_aggs(case, True))}
        FROM w
        WINDOW x AS (PARTITION BY key ORDER BY e RANGE BETWEEN {n - 1} PRECEDING AND CURRENT ROW)
        ORDER BY window_start, key
    """


class DuckDB:
    """One connection per data set: the rows copied into DuckDB's own storage once (not timed)."""

    def __init__(self, table: pa.Table) -> None:
        import duckdb

        self.con = duckdb.connect()
        self.con.register("src", table)
        self.con.execute("CREATE TABLE t AS SELECT * FROM src")
        self.con.unregister("src")

    def run(self, query: str, threads: int, repeat: int, timeout: float, slide_ms: int):
        """Best of ``repeat`` runs (as :func:`report.best_of`, with ``timeout`` as the budget), the query
        interrupted once ``timeout`` seconds have passed in all; None when not even one run finished."""
        self.con.execute(f"SET threads={threads}")
        runs: list[float] = []
        out = None  # the last finished run's result
        timer = threading.Timer(timeout, self.con.interrupt)
        timer.start()
        try:
            while len(runs) < max(1, repeat) and (not runs or sum(runs) + runs[-1] <= timeout):
                gc.collect()
                t0 = time.perf_counter()
                try:
                    res = self.con.sql(query).to_arrow_table()
                except Exception as exc:
                    if "interrupt" not in f"{type(exc).__name__} {exc}".lower():
                        raise
                    break
                runs.append(time.perf_counter() - t0)
                out, res = res, None
        finally:
            timer.cancel()
        if not runs:
            return None
        return min(runs), runs, summary(out, slide_ms)

    def close(self) -> None:
        self.con.close()


def polars_dynamic(df, case: Case):
    """``group_by_dynamic``: ``start_by="window"`` starts each key's first window at ``floor(first ts,
    slide) + offset``, so ``offset = -size`` reaches back to every window holding the key's first row."""
    import polars as pl

    return (
        df.group_by_dynamic(
            TIME,
            every=f"{case.slide_ms}ms",
            period=f"{case.size_ms}ms",
            offset=f"{-case.size_ms}ms",
            group_by=KEY,
            closed="left",
            label="left",
            start_by="window",
        )
        .agg(*_polars_aggs(case, pl.col("value")))
        .rename({TIME: "window_start"})
        .sort(["window_start", KEY])
    )


def _polars_aggs(case: Case, v):
    import polars as pl

    out = [pl.len().cast(pl.Int64).alias("count")] if "count" in AGG_SETS[case.aggs].get("*", "") else []
    fns = {
        "sum": v.sum(),
        "max": v.max(),
        "min": v.min(),
        "mean": v.mean(),
        "std": v.std(),
        "first": v.first(),
        "last": v.last(),
    }
    return out + [fns[f].alias(f"{f}_value") for f in case.funcs()]


def polars_panes(df, case: Case):
    """Pane partials per (key, pane ``e``) and the filler rows of :func:`duckdb_frame_query`, sorted by
    (key, e); then ``rolling_*_by`` over ``i = key * span + e`` (windows never reach across keys), ``last``
    as the forward-filled last value (each key starts with a pane row), ``first`` by an as-of join forward
    from the window's first pane to the key's next pane row."""
    import polars as pl

    n, slide = case.ppw, case.slide_ms
    funcs = case.funcs()
    v = pl.col("value")
    parts = [pl.len().cast(pl.Int64).alias("c"), v.sum().alias("s"), v.max().alias("mx")]
    if "min" in funcs:
        parts.append(v.min().alias("mn"))
    if "std" in funcs:
        parts.append((v * v).sum().alias("q"))
    if "first" in funcs:
        parts.append(v.first().alias("f"))
    if "last" in funcs:
        parts.append(v.last().alias("l"))
    span = case.rows // slide + 2 * n + 2  # more than any pane number: keys apart in i
    p = (
        df.lazy()
        .group_by(KEY, (pl.col(TIME).dt.epoch("ms") // slide).alias("e"))
        .agg(*parts)  # value.first()/last(): rows keep their (time) order within a group
        .sort(KEY, "e")
    )
    same = pl.col(KEY).shift(-1) == pl.col(KEY)
    end = pl.min_horizontal(
        pl.when(same).then(pl.col("e").shift(-1)).otherwise(pl.col("e") + n), pl.col("e") + n
    )
    fill = p.select(KEY, pl.int_ranges(pl.col("e") + 1, end).alias("e")).explode("e").drop_nulls("e")
    w = (
        pl.concat([p, fill], how="diagonal")
        .sort(KEY, "e")
        .with_columns((pl.col(KEY) * span + pl.col("e")).alias("i"))
    )
    period = f"{n}i"
    cols = []
    if "count" in AGG_SETS[case.aggs].get("*", ""):
        cols.append(pl.col("c").rolling_sum_by("i", period).alias("count"))
    cnt, tot = pl.col("c").rolling_sum_by("i", period), pl.col("s").rolling_sum_by("i", period)
    exprs = {
        "sum": tot,
        "max": pl.col("mx").rolling_max_by("i", period),
        "min": pl.col("mn").rolling_min_by("i", period) if "min" in funcs else None,
        "mean": tot / cnt,
        "std": pl.when(cnt > 1).then(
            ((pl.col("q").rolling_sum_by("i", period) - tot * tot / cnt) / (cnt - 1)).clip(0).sqrt()
        )
        if "std" in funcs
        else None,
        "last": pl.col("l").forward_fill() if "last" in funcs else None,
    }
    cols += [exprs[f].alias(f"{f}_value") for f in funcs if f != "first"]
    out = w.select(((pl.col("e") - (n - 1)) * slide).alias("window_start"), KEY, "i", *cols)
    if "first" in funcs:
        firsts = w.filter(pl.col("f").is_not_null()).select(
            pl.col("i").alias("fi"), pl.col("f").alias("first_value")
        )
        out = (
            out.with_columns((pl.col("i") - (n - 1)).alias("lo"))
            .join_asof(firsts, left_on="lo", right_on="fi", strategy="forward")
            .drop("lo", "fi")
        )
        names = ["window_start", KEY, *[c for c in ("count",) if "count" in AGG_SETS[case.aggs].get("*", "")]]
        out = out.select(*names, *[f"{f}_value" for f in funcs])
    return out.drop("i", strict=False).sort("window_start", KEY).collect()


POLARS_QUERIES = {"polars": polars_dynamic, "polars panes+rolling": polars_panes}


def polars_worker(spec: str, repeat: int) -> None:
    """Runs in a subprocess with POLARS_MAX_THREADS set: time each item (a data set, a cell and a query; the
    data set read when it changes, not timed) and print one JSON line per item as soon as it is done (the
    parent's timeout is per line)."""
    import polars as pl

    job = json.loads(spec)
    df, path = None, None
    for item in job["items"]:
        if item["ipc"] != path:
            df, path = None, item["ipc"]
            df = pl.read_ipc(path).rechunk()
            print(json.dumps({"loaded": path}), flush=True)  # the parent's clock for the next item starts
        case = Case(**{**item["case"], "threads": tuple(item["case"]["threads"])})
        query = POLARS_QUERIES[item["engine"]]
        try:
            best, runs, res = best_of(lambda q=query, c=case, d=df: q(d, c), repeat, item["timeout"])
            line = {"seconds": best, "runs": runs, "summary": summary(res.to_arrow(), case.slide_ms)}
        except Exception as exc:  # this item fails, the next ones run
            line = {"error": f"{type(exc).__name__}: {exc}".strip()}
        print(json.dumps({"id": item["id"], "pool": pl.thread_pool_size(), **line}), flush=True)


def _more_keys(it: dict, late: dict) -> bool:
    a, b = it["case"], late["case"]
    same = (a["table"], a["order"], it["engine"]) == (b["table"], b["order"], late["engine"])
    return same and a["keys"] > b["keys"]


def _item(it: dict, threads: int) -> str:
    return f"{it['engine']} ({threads} threads), table {it['case']['table']} {it['case']['label']}"


def run_polars(items: list[dict], threads: int, repeat: int) -> dict:
    """Every item (``id``, ``ipc``, ``case``, ``engine``, ``timeout``) in a worker subprocess with
    ``POLARS_MAX_THREADS=threads``. An item that takes more than its ``timeout`` seconds (plus slack for
    reading its result) gets the value None, its worker is killed and a new one goes on with the rest; else
    ``(seconds, runs, summary)``, or the exception text of a failed item."""
    out: dict = {}
    pending = list(items)
    while pending:
        spec = json.dumps({"items": pending})
        cmd, env = runner.worker(
            NAME,
            "--worker",
            "polars",
            "--case",
            spec,
            "--repeat",
            str(repeat),
            POLARS_MAX_THREADS=str(threads),
        )
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err)
            buf = b""
            deadline = time.monotonic() + 120  # imports and the first read (the item's clock starts after)
            try:
                while pending:
                    left = deadline - time.monotonic()
                    ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
                    if not ready:  # the first pending item ran out of time
                        late = pending.pop(0)
                        log(f"  {_item(late, threads)}: timeout after {late['timeout']:.1f} s")
                        out[late["id"]] = None
                        c = late["case"]
                        if c["table"] == "2":  # the same peer at more keys: skipped
                            why = {"skipped": f"timed out at {c['keys']:,} keys"}
                            for it in [it for it in pending if _more_keys(it, late)]:
                                out[it["id"]] = why
                                pending.remove(it)
                                log(f"  {_item(it, threads)}: skipped, {why['skipped']}")
                        break
                    chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    if not chunk:  # the worker exited: every pending item failed
                        proc.wait()
                        err.seek(0)
                        lines = err.read().decode(errors="replace").strip().splitlines()
                        msg = f"polars worker exited with {proc.returncode}: {(lines or ['(no output)'])[-1]}"
                        out.update({it["id"]: msg for it in pending})
                        pending = []
                        break
                    buf += chunk
                    while b"\n" in buf and pending:
                        line, buf = buf.split(b"\n", 1)
                        res = json.loads(line)
                        deadline = time.monotonic() + pending[0]["timeout"] + 3 if pending else 0
                        if "loaded" in res:
                            continue
                        if res["pool"] != threads:
                            log(f"polars: asked for {threads} threads, its pool has {res['pool']}")
                        pending = [it for it in pending if it["id"] != res["id"]]
                        got = res.get("error") or (res["seconds"], res["runs"], res["summary"])
                        out[res["id"]] = got
                        it = next(i for i in items if i["id"] == res["id"])
                        if isinstance(got, str):
                            log(f"  {_item(it, threads)}: {got}")
                        else:
                            log(f"  {_item(it, threads)}: {it['case']['rows'] / got[0] / 1e6:.2f} M rows/s")
                        deadline = time.monotonic() + pending[0]["timeout"] + 3 if pending else 0
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                proc.stdout.close()
    return out


def run_refs(table: pa.Table, repeat: int) -> dict[str, tuple[float, list[float]]]:
    """The physical reference: a pass that only reads the three columns, and a bincount by key."""
    ts = table.column(TIME).combine_chunks().cast(pa.int64()).to_numpy()
    key = table.column(KEY).to_numpy()
    value = table.column("value").to_numpy()
    reps = max(repeat, 5)
    read = best_of(lambda: (ts.min(), key.sum(), value.sum()), reps)
    binc = best_of(lambda: np.bincount(key, weights=value), reps)
    return {"numpy read pass": read[:2], "numpy bincount": binc[:2]}


# --------------------------------------------------------------------------------------------- tables


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


# --------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = runner.parser(
        __doc__,
        rows=4_000_000,
        rows_help="input rows per cell (default 4,000,000)",
        quick="200,000 rows, 1 run, 1/6/288 panes in table 1, 10 and 100k keys in table 2 (smoke test); "
        "--rows overrides",
        repeat=3,
        repeat_help="timed runs per engine and cell, best kept (default 3; a run past the budget stops them)",
    )
    p.add_argument("--tables", default="1,2,3,4", help="comma list of 1,2,3,4 (default all)")
    p.add_argument(
        "--peer-timeout",
        type=float,
        default=10.0,
        help="seconds a peer may take per cell, its repeats included, at least twice windgate's (default 10)",
    )
    p.add_argument(
        "--strategies",
        default=None,
        help="windgate strategies of table 4 (default: auto and every single-source parallel one)",
    )
    runner.add_worker_options(p, "--case")
    args = p.parse_args(argv)
    args.tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if unknown := sorted(set(args.tables) - set(TABLES)):
        p.error(f"unknown table(s) {', '.join(unknown)}; choose from 1, 2, 3, 4")
    if args.quick:
        given = any(a == "--rows" or a.startswith("--rows=") for a in argv or [])
        args.rows = args.rows if given else 200_000
        args.repeat = 1
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker == "polars":
        polars_worker(args.case, args.repeat)
        return 0

    all_cases = cases(args.rows, args.quick, args.tables)
    strategies = args.strategies.split(",") if args.strategies else windgate_strategies()
    run = runner.Run(NAME, args.out)
    timeout = args.peer_timeout
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="windgate-bench-"))
    todo = Pending()
    try:
        for data in dict.fromkeys(c.data for c in all_cases):
            rows, keys, order = data
            log(f"data: {rows:,} rows, {keys:,} {order} keys")
            table = make_data(rows, keys, order, args.seed)
            ipc = tmp / f"{keys}-{order}.arrow"
            with pa.OSFile(str(ipc), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
                w.write_table(table)
            run_data_set(
                run, table, [c for c in all_cases if c.data == data], str(ipc), strategies, args, todo
            )
            del table
        run_all_polars(run, todo, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    results = run.results
    wall = time.perf_counter() - t_start
    failed = run.failed()
    params = {
        "rows": args.rows,
        "repeat": args.repeat,
        "peer_timeout_s": timeout,
        "tables": args.tables,
        "windgate_strategies": strategies,
        "seed": args.seed,
        "wall_seconds": round(wall, 1),
        **run.load(),
    }
    notes = [
        "rows/s: input rows over the best run's seconds, from data already in the engine's memory to a "
        "materialised result ordered by (window_start, key). Tables 1-3: every engine on 1 thread.",
        "windgate / best peer: windgate (strategy auto) over the fastest peer whose result matched, in the "
        "same cell; '> x' when every peer run timed out (a bound from the timeout). windgate / read pass: "
        "its rows/s over the numpy pass that only reads the three columns (the physical ceiling here).",
        "Checks: output rows, sum of keys, sum of window numbers and sum of counts exactly, sums of every "
        "float column to 1e-9 relative, against windgate's result in the same cell. MISMATCH marks a "
        f"difference (the run exits 1); timeout: stopped after {timeout:g} s or twice windgate's seconds in "
        "the cell, whichever is longer; skipped: not run at more keys once it timed out at fewer (table 2).",
        f"duckdb (direct explode) runs below {DIRECT_MAX_PPW + 1} panes a window only; duckdb panes+frame: "
        "pane partials, then a RANGE frame of ppw panes per key over pane rows plus empty filler rows for "
        "the windows whose last pane the key lacks; std from the sum of squares.",
        "polars: group_by_dynamic(every=slide, period=size, offset=-size, group_by=key); polars "
        "panes+rolling: the same partials and fillers, rolling_*_by over a (key, pane) index, last by "
        "forward fill, first by an as-of join; one worker subprocess per thread count (POLARS_MAX_THREADS).",
        f"The machine has {report.machine()['cores']} cores and is shared: compare within this run.",
        f"Wall time of the run: {wall:.0f} s.",
    ]
    sections = []
    for t, heading in TABLES.items():
        tc = [c for c in all_cases if c.table == t]
        if tc:
            body = thread_table(results, tc[0]) if t == "4" else pivot(results, tc)
            sections.append(f"## {heading.format(c=tc[0], std=STANDARD)}\n\n{body}")
    sections.append("## Notes\n\n" + "\n".join(f"* {n}" for n in notes))
    sections.append("## Every measurement\n\n" + report.markdown_table(results, COLUMNS))
    paths = run.write(
        title=f"Window aggregation scaling: rows/s against panes per window, keys, aggregates and threads "
        f"({args.rows:,} rows a cell)",
        params=params,
        sections=sections,
        columns=COLUMNS,
        plot=plot,
        groups=[],
        extra={"notes": notes, "cases": [asdict(c) for c in all_cases]},
    )
    for s in sections[:-2]:
        print("\n" + s)
    print()
    for r in failed:
        log(f"MISMATCH: {r['engine']}, {r['threads']} threads, table {r['table']} {r['case']}: {r['check']}")
    return run.done(paths, failed, what="case")


COLUMNS = (
    ("table", "table"),
    ("case", "cell"),
    ("engine", "engine"),
    ("threads", "cores"),
    ("rows", "rows in"),
    ("seconds", "seconds (best)"),
    ("rows_per_s", "rows/s"),
    ("out_rows", "output rows"),
    ("check", "check"),
    ("shared", "notes"),
)


@dataclass
class Pending:
    """What the data sets leave for the end: windgate auto's summary per (table, cell) on the cell's first
    thread count, the checks' reference, and the Polars queries (items per thread count, their result rows
    by item id)."""

    refs: dict[tuple, dict] = field(default_factory=dict)
    polars: dict[int, list[dict]] = field(default_factory=dict)
    rows: dict[int, list[dict]] = field(default_factory=dict)
    #: query key (see :func:`query_key`) -> the result measured first (cells of several tables that run the
    #: same query on the same data share one measurement) or the Polars item id queued for it
    memo: dict[tuple, dict | int] = field(default_factory=dict)
    #: (table, engine, order, threads) -> the keys at which that peer timed out (table 2 skips more keys)
    timed_out: dict[tuple, int] = field(default_factory=dict)


def query_key(case: Case, threads: int, engine: str) -> tuple:
    return (case.data, case.slide_ms, case.ppw, case.aggs, threads, engine)


MEASURED = ("seconds", "runs", "timeout", "skipped", "error", "check", "out_rows", "key_sum", "window_sum")


def shared(r: dict, first: dict) -> dict:
    """``r`` (a cell's row) with the measurement of ``first`` (the same query on the same data)."""
    r.update({k: v for k, v in first.items() if k in MEASURED or k.endswith(("_sum", "_value"))})
    r["shared"] = f"measured once for table {first['table']} {first['case']}"
    return r


def skip_reason(todo: Pending, case: Case, engine: str, threads: int) -> str | None:
    """Table 2: a peer that timed out at fewer keys (same order, threads) is not run again at more."""
    k = todo.timed_out.get((case.table, engine, case.order, threads))
    if case.table == "2" and k is not None and case.keys > k:
        return f"timed out at {k:,} keys"
    return None


def run_data_set(run, table, cases_: list[Case], ipc: str, strategies, args, todo: Pending) -> None:
    """The engines on the cells of one data set: per cell windgate auto first (the reference of the
    checks), its other strategies (table 4), DuckDB; the numpy reference once. The Polars queries are queued
    in ``todo`` for :func:`run_all_polars` (one worker process per thread count for every data set)."""
    timeout = args.peer_timeout
    refs = todo.refs
    duck = DuckDB(table)
    try:
        for case in cases_:
            log(f"table {case.table}: {case.label} ({case.ppw} panes of {case.slide_ms} ms, {case.aggs})")
            common = {
                "table": case.table,
                "case": case.label,
                "rows": case.rows,
                "keys": case.keys,
                "order": case.order,
                "ppw": case.ppw,
                "aggs": case.aggs,
            }
            wg_strategies = strategies if case.table == "4" else ["auto"]
            for n in case.threads:
                limit = timeout
                for strategy in wg_strategies:
                    name = "windgate" if strategy == "auto" else f"windgate {strategy}"
                    r = {**common, "engine": name, "threads": n, "scaling_group": name}
                    key = query_key(case, n, name)
                    if isinstance(todo.memo.get(key), dict):
                        shared(r, todo.memo[key])
                        if (ref := refs.get(todo.memo[key]["ref_of"])) is not None:
                            refs.setdefault((case.table, case.label), ref)
                        run.add(r, f"  {name} ({n} threads): {r['shared']}")
                        continue
                    todo.memo[key] = r
                    r["ref_of"] = (case.table, case.label)
                    try:
                        # no timeout for windgate: past the peers' budget a cell gets one run
                        best, runs, s = run_windgate(table, case, strategy, n, args.repeat, timeout)
                        r.update(seconds=best, runs=runs, **s)
                        if strategy == "auto":  # the peers get at least twice windgate's time
                            limit = max(timeout, 2 * best)
                        ref = refs.get((case.table, case.label))
                        if ref is None:
                            refs[(case.table, case.label)] = s
                        r["check"] = "reference" if ref is None else check(s, ref)
                    except Exception as exc:
                        r.update(report.failure(name, n, exc))
                    _add(run, r)
                for engine in PEERS:
                    if engine == "duckdb" and case.ppw > DIRECT_MAX_PPW:
                        continue
                    r = {**common, "engine": engine, "threads": n, "scaling_group": engine}
                    key = query_key(case, n, engine)
                    first = todo.memo.get(key)
                    if engine.startswith("polars"):
                        if isinstance(first, int):  # queued already: the item's result goes to this row too
                            todo.rows[first].append(r)
                            continue
                        item = {"id": len(todo.rows), "ipc": ipc, "case": asdict(case), "engine": engine}
                        item["timeout"] = limit
                        todo.memo[key] = item["id"]
                        todo.rows[item["id"]] = [r]
                        todo.polars.setdefault(n, []).append(item)
                        continue
                    if first is not None:
                        run.add(shared(r, first), f"  {engine} ({n} threads): {r['shared']}")
                        continue
                    todo.memo[key] = r
                    if why := skip_reason(todo, case, engine, n):
                        r.update(seconds=None, skipped=why)
                        run.add(r, f"  {engine} ({n} threads): skipped, {why}")
                        continue
                    try:
                        q = duckdb_direct_query(case) if engine == "duckdb" else duckdb_frame_query(case)
                        got = duck.run(q, n, args.repeat, limit, case.slide_ms)
                        if got is None:
                            log(f"  {engine} ({n} threads): timeout after {limit:.1f} s")
                            todo.timed_out[(case.table, engine, case.order, n)] = case.keys
                    except Exception as exc:
                        got = exc
                    _add_peer(run, r, got, refs, limit)
    finally:
        duck.close()
    c = cases_[0]
    t = run_refs(table, args.repeat)
    for case in cases_:
        for engine, (best, runs) in t.items():
            common = {"table": case.table, "case": case.label, "rows": case.rows, "keys": case.keys}
            row = {**common, "order": case.order, "ppw": case.ppw, "aggs": case.aggs}
            run.add({**row, "engine": engine, "threads": 1, "seconds": best, "runs": runs, "check": "-"}, "")
    log(
        f"  numpy read pass: {c.rows / t['numpy read pass'][0] / 1e6:.0f} M rows/s, "
        f"bincount: {c.rows / t['numpy bincount'][0] / 1e6:.0f} M rows/s"
    )


def run_all_polars(run, todo: Pending, args) -> None:
    """The queued Polars queries, one worker process per thread count, checked against windgate."""
    for n, items in todo.polars.items():
        log(f"polars, {n} thread{'s' if n > 1 else ''}: {len(items)} queries in a worker process")
        try:
            got = run_polars(items, n, args.repeat)
        except Exception as exc:  # the worker could not run at all
            got = {it["id"]: f"{type(exc).__name__}: {exc}" for it in items}
        for it in items:
            first, *more = todo.rows[it["id"]]
            _add_peer(run, first, got.get(it["id"], "no result"), todo.refs, it["timeout"])
            for r in more:
                run.add(shared(r, first), "")


def _add_peer(run, r: dict, got, refs: dict, timeout: float) -> None:
    """Record a peer's result: ``(seconds, runs, summary)``, None (timed out), or an exception (text)."""
    if got is None:
        r.update(seconds=None, timeout=timeout)
    elif isinstance(got, dict):  # {"skipped": why}
        r.update(seconds=None, **got)
    elif isinstance(got, tuple | list):
        best, runs, s = got
        r.update(seconds=best, runs=runs, **s)
        r["check"] = check(s, refs.get((r["table"], r["case"])))
    else:
        msg = got if isinstance(got, str) else f"{type(got).__name__}: {got}".strip()
        log(f"{r['engine']} ({r['threads']} threads) failed: {msg.splitlines()[0]}")
        r.update(seconds=None, error=msg)
    _add(run, r)


def _add(run, r: dict) -> None:
    if r.get("check", "").startswith("FAIL"):
        log(f"  MISMATCH {r['engine']} ({r['threads']} threads): {r['check']}")
    if r.get("seconds"):
        run.add(
            r,
            f"  {r['engine']} ({r['threads']} threads): {r['seconds']:.3f} s, "
            f"{r['rows'] / r['seconds'] / 1e6:.2f} M rows/s, {r.get('out_rows', 0):,} rows out, {r['check']}",
        )
    else:
        run.add(r, "")
