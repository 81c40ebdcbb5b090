"""Property-test depth: ``examples(n)`` is ``n`` hypothesis examples scaled by the environment's
``WINDGATE_EXAMPLES`` (a factor, default 1), so a deeper run of the determinism suites needs no edit
(``WINDGATE_EXAMPLES=10 pytest tests/test_time_ranges.py``); the fault suite's ``WINDGATE_FAULT_EXAMPLES``
multiplies on top of it."""

from __future__ import annotations

import os


def examples(n: int) -> int:
    """``n`` examples times ``WINDGATE_EXAMPLES`` (at least 1)."""
    return max(1, int(n * float(os.environ.get("WINDGATE_EXAMPLES", "1"))))
