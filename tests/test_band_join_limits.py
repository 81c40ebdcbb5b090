"""Band join under hostile input: one side stalled or pushed alone, retries after a rejected batch, parameter
bounds, credits, bounded memory on a long stream and Ctrl-C. Runs that could hang go to a subprocess with a
timeout, so a deadlock fails the test instead of blocking the suite."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pytest

import windgate


def _run(code: str, timeout: float = 60) -> str:
    """Runs `code` in a fresh interpreter; fails on a hang or an error, returns its stdout."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {timeout} s (deadlock)")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _pairs(batches) -> list[tuple[int, int]]:
    out = []
    for b in batches:
        if b.num_rows:
            out += zip(b.column("left_ts").to_pylist(), b.column("right_ts").to_pylist(), strict=True)
    return out


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_band_join_with_lateness_returns_on_every_thread_count(threads):
    # All of the left input comes before the right: nothing of it is ready until the right arrives.
    out = _run(
        f"""
        import numpy as np, pyarrow as pa, windgate
        t = pa.table({{"ts": np.arange(200_000)}})
        print(windgate.band_join(t, t, time="ts", window=1, lateness=0, threads={threads}).num_rows)
        """
    )
    assert out.split() == ["599998"]


@pytest.mark.parametrize("threads", [2, 8])
def test_a_side_pushed_alone_past_the_engines_lag_bound(threads):
    out = _run(
        f"""
        import numpy as np, pyarrow as pa, windgate
        j = windgate.BandJoiner(time="ts", window=10, lateness=0, threads={threads}, strategy="scalejoin")
        b = pa.record_batch({{"ts": np.arange(70_000)}})
        print(j.push(b, side="left").num_rows)
        print(j.push(b, side="right").num_rows + j.flush().num_rows)
        """
    )
    assert out.split() == ["0", str(21 * 70_000 - 110)]


@pytest.mark.parametrize("strategy", ["reference", "serial", "scalejoin"])
def test_a_rejected_batch_can_be_pushed_again(strategy):
    def run(retry: bool):
        j = windgate.BandJoiner(
            time="ts", window=10, lateness=0, on_late="error", threads=3, strategy=strategy
        )
        outs = [j.push(pa.record_batch({"ts": [2, 6]}), side="right")]
        if retry:
            with pytest.raises(windgate.LateRowError, match=r"left input: row 1 of this batch has time 0"):
                j.push(pa.record_batch({"ts": [7, 0, 8]}), side="left")
        outs.append(j.push(pa.record_batch({"ts": [7, 8]}), side="left"))
        outs.append(j.flush())
        return _pairs(outs), j.stats["rows_in_left"]

    assert run(True) == run(False) == ([(7, 2), (7, 6), (8, 2), (8, 6)], 2)


def test_parameter_bounds():
    t = pa.table({"ts": [0, 1]})
    for call in (windgate.band_join, None):
        with pytest.raises(windgate.InvalidParameterError, match=r"threads: expected at most 254"):
            if call:
                call(t, t, time="ts", window=1, threads=10_000)
            else:
                windgate.BandJoiner(time="ts", window=1, threads=10_000)
    for credits in (0, -1, 1.5, True, "1"):
        with pytest.raises(windgate.WindgateError, match=r"credits: expected"):
            windgate.BandJoiner(time="ts", window=1, credits=credits)
    assert windgate.band_join(t, t, time="ts", window=2**62, lateness=2**62).num_rows == 4
    big = pa.table({"ts": [0, 1], "v": [-1e308, 1e308]})
    out = windgate.band_join(big, big, time="ts", window=1, on=[windgate.band("v", "v", 1e308)])
    assert out.num_rows == 2  # (-1e308, 1e308) are 2e308 apart: only the equal values match


def test_credits_refuse_a_side_that_runs_ahead_of_a_stalled_one():
    def pushes(j, refused: bool):
        outs = [j.push(pa.record_batch({"ts": [0]}), side="right")]
        for k in range(10):
            outs.append(j.push(pa.record_batch({"ts": np.arange(k * 100, (k + 1) * 100)}), side="left"))
        # A table of three chunks is one push: refused whole.
        chunks = [pa.record_batch({"ts": np.arange(1000 + 10 * i, 1010 + 10 * i)}) for i in range(3)]
        more = pa.Table.from_batches(chunks)
        if refused:
            with pytest.raises(
                windgate.BackpressureError, match=r"left input has 998 rows pending .*right input holds"
            ):
                j.push(more, side="left")
            s = j.stats
            assert (s["rows_in_left"], s["pending_rows_left"], s["backpressured"]) == (1000, 998, 1)
        # The stalled side is never refused.
        outs.append(j.push(pa.record_batch({"ts": np.arange(1, 2000)}), side="right"))
        assert j.stats["pending_rows_left"] == 0
        outs.append(j.push(more, side="left"))
        outs.append(j.flush())
        return _pairs(outs)

    got = pushes(windgate.BandJoiner(time="ts", window=5, lateness=0, credits=1000, threads=2), True)
    want = pushes(windgate.BandJoiner(time="ts", window=5, lateness=0, credits=None), False)
    assert got == want and len(got) == 11 * 1030 - 15  # left 0-4 miss partners below 0


def test_memory_stays_bounded_on_a_long_stream():
    j = windgate.BandJoiner(time="ts", window=100, lateness=10, threads=2)
    step, total = 1000, 2_000_000
    held = pairs = 0
    for k in range(total // step):
        ts = np.arange(k * step, (k + 1) * step)
        ts = ts + ts % 7 - 3  # disorder within the lateness
        for side in ("left", "right"):
            pairs += j.push(pa.record_batch({"ts": ts}), side=side).num_rows
            s = j.stats
            held = max(held, s["retained_rows"] + s["window_rows"] + s["buffered_rows"])
    pairs += j.flush().num_rows
    assert pairs > 100 * total
    assert held < 10_000, held
    assert j.stats["late_rows"] == 0


def test_ctrl_c_interrupts_a_long_join_and_poisons_the_joiner():
    script = textwrap.dedent(
        """
        import sys, numpy as np, pyarrow as pa, windgate
        n = 300_000
        # No pair matches, but every row is compared with the whole window: minutes of work.
        t = pa.table({"ts": np.arange(n), "v": np.arange(n, dtype=np.float64)})
        j = windgate.BandJoiner(time="ts", window=n, lateness=0, threads=2, index=False,
                                on=[windgate.band("v", "v", -0.0 + 0.0)])
        j.push(t, side="left")
        print("ready", flush=True)
        try:
            j.push(t, side="right")
            j.flush()
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        try:
            j.push(t.slice(0, 1), side="right")
        except windgate.OperatorPoisonedError:
            print("poisoned")
        """
    )
    p = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert out.split() == ["interrupted", "poisoned"], err
