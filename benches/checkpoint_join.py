"""Time and size of a BandJoiner checkpoint, about 1k and 100k live rows (docs/checkpoints.md, "Band join").

    python benches/checkpoint_join.py

Both sides get ``n / 2`` rows (an int64 time and a float64 band column) inside one window, pushed in
alternating slices so that every row is ready and stored in a window; then ``snapshot()`` and
``BandJoiner.restore()`` are timed (best of 5) and the snapshot's size is printed.
"""

from __future__ import annotations

import time

import pyarrow as pa

import windgate


def joiner(n: int, threads: int) -> windgate.BandJoiner:
    half = n // 2
    j = windgate.BandJoiner(
        time="ts", window=10 * n, on=[windgate.band("x", "a", 0.5)], lateness=0, threads=threads
    )
    step = max(half // 20, 1)
    for start in range(0, half, step):
        ts = pa.array(range(start, min(start + step, half)), pa.int64())
        values = pa.array([float(t % 997) for t in ts.to_pylist()], pa.float64())
        j.push(pa.record_batch({"ts": ts, "x": values}), side="left")
        j.push(pa.record_batch({"ts": ts, "a": values}), side="right")
    return j


def best(f, repeat: int = 5) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    for n in (1_000, 100_000):
        j = joiner(n, threads=3)
        s = j.stats
        live = s["window_rows"] + s["buffered_rows"]
        t_snap, data = best(j.snapshot)
        t_restore, k = best(lambda data=data: windgate.BandJoiner.restore(data, threads=3))
        print(
            f"{n:>7} rows pushed, {live} live: snapshot {len(data) / 1e6:.2f} MB, "
            f"snapshot() {t_snap * 1e3:.2f} ms, restore() {t_restore * 1e3:.2f} ms, "
            f"together {(t_snap + t_restore) * 1e3:.2f} ms"
        )


if __name__ == "__main__":
    main()
