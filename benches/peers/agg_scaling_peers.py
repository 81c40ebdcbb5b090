"""The ``agg_scaling`` suite's cells and its peers: the aggregate sets, the :class:`Case` of one cell, the
summary every check compares, and the window aggregation written for DuckDB (the direct SQL, and pane
partials under a RANGE frame; :class:`DuckDB` holds one connection per data set) and for Polars
(``group_by_dynamic``, and pane partials under ``rolling_*_by``; :data:`POLARS_QUERIES`), the Polars ones
timed by :func:`polars_worker` in a subprocess per thread count (``python -m benches.peers agg_scaling
--worker polars``, started and stopped by :func:`run_polars`) so that ``POLARS_MAX_THREADS`` takes effect.
"""

from __future__ import annotations

import gc
import json
import os
import select
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import runner
from .report import best_of, log, more_runs

#: The suite whose ``--worker polars`` runs :func:`polars_worker`.
SUITE = "agg_scaling"
TIME, KEY = "ts", "key"
#: Aggregate sets of table 3 (and count+sum+max of the others): name -> windgate's ``aggs``.
AGG_SETS = {
    "count": {"*": "count"},
    "count+sum+max": {"*": "count", "value": ["sum", "max"]},
    "mean+std+min+max+first+last": {"value": ["mean", "std", "min", "max", "first", "last"]},
}
STANDARD = "count+sum+max"
#: Every engine's cell runs for at least this many seconds of timed runs (``--repeat`` runs at least, at most
#: ``report.MAX_RUNS``; none with ``--quick``), its best kept. A windgate cell takes tens of milliseconds, so
#: five runs last a tenth of a second, and on a shared two-core machine a pause of the second core for a few
#: tenths decides a whole two-thread cell (1.28x and 1.88x from one build, minutes apart); a peer's cell
#: lasts a second anyway.
MIN_SECONDS = 1.0
ORDERS = ("random", "regular")
PEERS = ("duckdb", "duckdb panes+frame", "polars", "polars panes+rolling")
REFS = ("numpy read pass", "numpy bincount")


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


# --------------------------------------------------------------------------------------------- DuckDB


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

    def run(self, query: str, threads: int, repeat: int, timeout: float, slide_ms: int, min_total: float):
        """Best of ``repeat`` runs and ``min_total`` seconds (as :func:`report.best_of`, with ``timeout`` as
        the budget), the query interrupted once ``timeout`` seconds have passed in all; None when not even one
        run finished."""
        self.con.execute(f"SET threads={threads}")
        runs: list[float] = []
        out = None  # the last finished run's result
        timer = threading.Timer(timeout, self.con.interrupt)
        timer.start()
        try:
            while more_runs(runs, repeat, min_total) and (not runs or sum(runs) + runs[-1] <= timeout):
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


# --------------------------------------------------------------------------------------------- Polars


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
            run = lambda q=query, c=case, d=df: q(d, c)  # noqa: E731
            best, runs, res = best_of(run, repeat, item["timeout"], item.get("min_seconds", 0.0))
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
            SUITE,
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
