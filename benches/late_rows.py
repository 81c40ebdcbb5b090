"""Late rows under a fixed and the adaptive lateness bound (the measured example of ``docs/time.md``).

``python -m benches.late_rows [--rows N] [--disorder SECONDS] [--batch-rows N]``: smart-grid readings whose
arrival delays are uniform in ``[0, disorder)`` seconds, so that no row arrives more than ``disorder`` seconds
of event time behind the largest time seen before it; prints the late rows, the final slack K and the rows
later than every row before them ("record" lateness) for ``lateness=f"{disorder}s"``, ``"adaptive"`` and a
few smaller fixed bounds, over the same stream.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa

import windgate
from windgate.datasets import smartgrid


def lateness_profile(ts: np.ndarray) -> tuple[int, int, np.ndarray]:
    """How far each row is behind the largest time before it (0 for a new maximum), the number of rows
    that are later than every row before them (where the adaptive K grows), and the delays."""
    prev_max = np.maximum.accumulate(np.concatenate([[ts[0]], ts[:-1]]))
    behind = np.maximum(prev_max - ts, 0)
    record = np.maximum.accumulate(behind)
    records = int(np.count_nonzero(np.diff(np.concatenate([[0], record])) > 0))
    return int(behind.max()), records, behind


def adaptive_late(ts: np.ndarray) -> np.ndarray:
    """Which rows the adaptive K-slack drops, row by row in Python (the rule of ``order/kslack.rs``, after
    Mencagli et al.): K grows, at each new maximum, to the gap between it and the smallest time seen since the
    previous maximum; the watermark is ``max - K`` and never moves back."""
    late = np.zeros(len(ts), dtype=bool)
    t_max = buf_min = wm = None
    k = 0
    for i, t in enumerate(ts.tolist()):
        buf_min = t if buf_min is None else min(buf_min, t)
        if t_max is None or t > t_max:
            t_max = t
            k = max(k, t - buf_min)
            buf_min = None
            wm = t - k if wm is None else max(wm, t - k)
        late[i] = t < wm
    return late


def run(table: pa.Table, lateness, batch_rows: int) -> tuple[int, int, str | None]:
    agg = windgate.WindowAggregator(
        time="ts", size="1m", by="plug_id", aggs={"*": "count"}, lateness=lateness, threads=1
    )
    for batch in table.to_batches(max_chunksize=batch_rows):
        agg.push(batch)
    stats = agg.stats
    agg.flush()
    return stats["late_rows"], stats["slack"], stats["watermark_time"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--disorder", type=float, default=30.0)
    p.add_argument("--batch-rows", type=int, default=10_000)
    args = p.parse_args(argv)
    table = smartgrid(args.rows, disorder=args.disorder, seed=1)
    ts = table["ts"].cast(pa.int64()).to_numpy()
    worst, records, behind = lateness_profile(ts)
    print(
        f"{args.rows:,} rows, delays uniform in [0, {args.disorder:g} s): the latest row is "
        f"{worst / 1000:g} s behind the largest time before it; {records} rows are later than every row "
        "before them; "
        f"{int(np.count_nonzero(behind))} rows arrive behind an earlier one"
    )
    late = adaptive_late(ts)
    first = ts < ts.min() + 60_000
    print(
        f"adaptive, row by row in Python: {int(late.sum())} late rows, {int(late[first].sum())} of them "
        f"in the first minute of event time ({int(first.sum()):,} rows), {int(late[~first].sum())} in the "
        "remaining "
        f"{(ts.max() - ts.min()) / 60_000 - 1:.1f} minutes"
    )
    print(f"{'lateness':>12} {'late rows':>10} {'final K':>10}  watermark")
    bounds = [f"{args.disorder:g}s", "adaptive", f"{args.disorder / 2:g}s", "1s", "0s"]
    for lateness in bounds:
        late, k, wm = run(table, lateness, args.batch_rows)
        print(f"{lateness:>12} {late:>10,} {k / 1000:>9g}s  {wm}")


if __name__ == "__main__":
    main()
