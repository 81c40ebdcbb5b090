"""One call at a time per streaming operator.

An operator's native state is mutable and its calls release the GIL, so two Python threads could otherwise
reach it at once (PyO3 would refuse the second with a bare ``RuntimeError: Already borrowed``). Calls from
several threads are serialised in arrival order instead; a call made *during* another call on the same thread
(a generator feeding ``push`` that pushes into the same operator) is refused with a :class:`WindgateError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import WindgateError

T = TypeVar("T")


class Serialised:
    """Base of the streaming operators' Python classes: ``self._call(fn, ...)`` runs ``fn`` under the lock."""

    _lock: threading.RLock

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            try:
                return fn(*args)
            except RuntimeError as e:
                if isinstance(e, WindgateError) or "borrow" not in str(e):
                    raise
                raise WindgateError(
                    f"{type(self).__name__}: called again while one of its calls is still running on this "
                    "thread (an input stream that pushes into the same operator?); operators take one call "
                    "at a time"
                ) from None
