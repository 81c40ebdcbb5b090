"""A brute-force window aggregation in plain Python: the oracle the pytest suite checks windgate against."""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Any


def windows_of(ts: int, size: int, slide: int, offset: int) -> list[int]:
    """Starts of the windows [start, start + size) containing ts, with starts on offset + k * slide."""
    first = ts - size + 1
    j = -((-(first - offset)) // slide)  # ceil
    out = []
    while j * slide + offset <= ts:
        out.append(j * slide + offset)
        j += 1
    return out


def _sort_key(v: Any) -> tuple:
    return (0,) if v is None else (1, v)


def aggregate(
    rows: list[dict[str, Any]],
    *,
    size: int,
    slide: int,
    offset: int,
    by: str | None,
    funcs: list[str],
    column: str = "v",
) -> list[dict[str, Any]]:
    """rows: dicts with ts, the by column and ``column``, in arrival order (single source)."""
    groups: dict[tuple, list[tuple[int, int, Any]]] = defaultdict(list)
    for seq, r in enumerate(rows):
        for start in windows_of(r["ts"], size, slide, offset):
            groups[(start, r[by] if by else None)].append((r["ts"], seq, r[column]))
    out = []
    for (start, key), members in sorted(groups.items(), key=lambda kv: (kv[0][0], _sort_key(kv[0][1]))):
        rec: dict[str, Any] = {}
        if by:
            rec[by] = key
        rec["window_start"] = start
        rec["window_end"] = start + size
        vals = [m for m in members if m[2] is not None]
        xs = [m[2] for m in vals]
        for f in funcs:
            name = "count" if f == "count*" else f"{f}_{column}"
            if f == "count*":
                rec[name] = len(members)
            elif f == "count":
                rec[name] = len(xs)
            elif not xs:
                rec[name] = None
            elif f == "sum":
                rec[name] = math.fsum(xs) if isinstance(xs[0], float) else sum(xs)
            elif f == "min":
                rec[name] = min(xs)
            elif f == "max":
                rec[name] = max(xs)
            elif f == "mean":
                if isinstance(xs[0], float) and all(math.isfinite(x) for x in xs):
                    # The exact mean, rounded once (as windgate gives it); fsum(xs) / n rounds twice.
                    rec[name] = float(sum(map(Fraction, xs)) / len(xs))
                else:
                    rec[name] = math.fsum(xs) / len(xs) if isinstance(xs[0], float) else sum(xs) / len(xs)
            elif f == "first":
                rec[name] = min(vals, key=lambda m: (m[0], m[1]))[2]
            elif f == "last":
                rec[name] = max(vals, key=lambda m: (m[0], m[1]))[2]
            elif f in ("var", "std"):
                if len(xs) < 2:
                    rec[name] = None
                else:
                    fx = [Fraction(x) for x in xs]
                    mean = sum(fx) / len(fx)
                    var = sum((x - mean) ** 2 for x in fx) / (len(fx) - 1)
                    rec[name] = float(var) if f == "var" else math.sqrt(float(var))
            else:
                raise ValueError(f)
        out.append(rec)
    return out


def band_join_order(
    left_ts: Any,
    right_ts: Any,
    matches: Any,
    lower: int,
    upper: int,
    how: str = "inner",
) -> list[tuple[int, int | None]]:
    """The rows of ``windgate.band_join`` with bounds ``l.ts + lower <= r.ts <= l.ts + upper``, in its order,
    without any window: ``(left index, right index or None)``.

    ``matches[i, j]``: the predicates hold for left row i and right row j (the bounds are checked here).
    The merged order is ``(ts, left before right, arrival)``. A pair sorts by ``(later row's merged position,
    1, earlier row's)``; with ``how="left"``, an unmatched left row by ``(closing position, 0, its own)``,
    where its closing position is that of the first later row with a time beyond ``l.ts + upper`` (or after
    everything).
    """
    import numpy as np

    lt = np.asarray(left_ts, dtype=np.int64)
    rt = np.asarray(right_ts, dtype=np.int64)
    nl, nr = len(lt), len(rt)
    ts = np.concatenate([lt, rt])
    side = np.concatenate([np.zeros(nl, np.int64), np.ones(nr, np.int64)])
    seq = np.concatenate([np.arange(nl), np.arange(nr)])
    order = np.lexsort((seq, side, ts))
    pos = np.empty(nl + nr, np.int64)
    pos[order] = np.arange(nl + nr)
    lpos, rpos = pos[:nl], pos[nl:]
    diff = rt[None, :].astype(object) - lt[:, None].astype(object)  # exact, no int64 overflow
    ok = np.asarray(matches, dtype=bool).reshape(nl, nr) & (diff >= lower) & (diff <= upper)
    keyed: list[tuple[tuple[int, int, int], tuple[int, int | None]]] = []
    for i, j in zip(*np.nonzero(ok), strict=True):
        a, b = int(lpos[i]), int(rpos[j])
        keyed.append(((max(a, b), 1, min(a, b)), (int(i), int(j))))
    if how == "left":
        sorted_ts = [int(v) for v in ts[order]]
        end = nl + nr
        for i in np.nonzero(~ok.any(axis=1))[0]:
            p = int(lpos[i])
            bound = int(lt[i]) + upper
            closing = next((q for q in range(p + 1, end) if sorted_ts[q] > bound), end)
            keyed.append(((closing, 0, p), (int(i), None)))
    keyed.sort()
    return [row for _, row in keyed]


def kslack_admitted(rows: list, lateness: int | None) -> tuple[list, int]:
    """The rows (tuples, time first) a fixed K-slack of bound ``lateness`` admits (watermark = largest time
    seen - K; a row below it is late), with their arrival numbers, and the number of late ones."""
    if lateness is None:
        return list(enumerate(rows)), 0
    wm, top, late, out = None, None, 0, []
    for i, r in enumerate(rows):
        if wm is not None and r[0] < wm:
            late += 1
            continue
        if top is None or r[0] > top:
            top, wm = r[0], r[0] - lateness
        out.append((i, r))
    return out, late
