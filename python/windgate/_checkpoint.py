"""Checkpoints of the streaming operators: ``snapshot()``, ``restore()`` and pickling, written once.

Every streaming class (:class:`windgate.WindowAggregator`, :class:`windgate.BandJoiner`, the preference
queries) derives from :class:`Checkpointed`. The extension writes the operator's whole logical state as
versioned, checksummed bytes (see ``docs/architecture.md``, "Checkpoints"); the bytes also carry the
normalised keyword arguments the operator was built with, so that :meth:`Checkpointed.restore` can say which
parameter a caller tried to change. Pickling goes through the same bytes, so operators cross process
boundaries (``multiprocessing``, Ray, Dask, Spark closures).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, TypeVar

from . import _native
from ._options import OperatorOptions
from ._serial import Serialised
from .errors import InvalidParameterError, SnapshotMismatchError

#: The snapshot annotation holding the normalised keyword arguments.
KWARGS_KEY = "python.kwargs"

C = TypeVar("C", bound="Checkpointed")


def _canonical(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples become lists), for comparing parameters."""
    return json.loads(json.dumps(value, default=repr, sort_keys=True))


def _bytes(data: Any) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise InvalidParameterError(
        f"data: expected the bytes of a snapshot (from .snapshot()), got {type(data).__name__}"
    )


class Checkpointed(Serialised):
    """Base of the streaming classes: a native operator built from normalised keyword arguments, with
    checkpoints.

    A subclass sets ``_native_class`` (the extension's class, with ``snapshot(annotation)`` and a static
    ``restore(data, overrides)`` taking a dict of runtime settings), ``_declaration`` and ``_entry`` (its
    options in :mod:`windgate._options`) and calls :meth:`_build` from ``__init__``.
    """

    _native_class: ClassVar[Any]
    _declaration: ClassVar[OperatorOptions]
    _entry: ClassVar[str]
    #: Settings that change how the operator runs, never its rows: the only ones ``restore`` may change.
    _runtime: ClassVar[tuple[str, ...]] = ("threads", "strategy", "farm")

    _inner: Any
    _kwargs: dict[str, Any]

    def _build(self, kwargs: dict[str, Any], **extra: Any) -> None:
        Serialised.__init__(self)
        self._kwargs = kwargs
        self._inner = self._native_class(**kwargs, **extra)

    def snapshot(self) -> bytes:
        """The operator's whole state as bytes: open windows, watermarks, late-row state, counters.

        Take it between calls; :meth:`restore` builds an operator that continues exactly where this one
        stands (same rows, same order), with any ``threads`` and ``strategy``. The bytes are versioned and
        checksummed; the GIL is released while they are written.
        """
        note = json.dumps(self._kwargs, default=repr, sort_keys=True)
        return self._call(self._inner.snapshot, note)

    @classmethod
    def restore(cls: type[C], data: bytes, **overrides: Any) -> C:
        """An operator continuing from ``data`` (the bytes of :meth:`snapshot`).

        ``overrides`` may set the runtime settings (``threads``, ``strategy``, ``farm``); any other
        keyword must equal the snapshot's value, else :class:`windgate.errors.SnapshotMismatchError`
        names it. Bytes that are truncated, changed or not a snapshot raise
        :class:`windgate.errors.SnapshotError`.
        """
        data = _bytes(data)
        info = _native.snapshot_info(data)
        names = cls._declaration.entry_points[cls._entry]
        unknown = sorted(set(overrides) - set(names))
        if unknown:
            raise InvalidParameterError(
                f"{unknown[0]}: {cls.__name__}.restore takes the keywords of {cls.__name__} "
                f"({', '.join(names)}), got {unknown[0]!r}"
            )
        given = {n: cls._declaration.options[n].convert(v, n) for n, v in overrides.items()}
        stored = json.loads(info["annotations"].get(KWARGS_KEY, "null")) or {}
        for name, value in given.items():
            if name in cls._runtime or name not in stored:
                continue
            if _canonical(value) != _canonical(stored[name]):
                raise SnapshotMismatchError(
                    f"{name}: the snapshot was taken with {name}={stored[name]!r}, got {value!r}; a "
                    f"snapshot restores only into the same query (runtime settings "
                    f"{', '.join(cls._runtime)} may differ)"
                )
        runtime = {n: v for n, v in given.items() if n in cls._runtime}
        op = cls.__new__(cls)
        Serialised.__init__(op)
        op._kwargs = {**stored, **runtime}
        op._inner = cls._native_class.restore(data, runtime)
        return op

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_unpickle, (type(self), self.snapshot()))


def _unpickle(cls: type[C], data: bytes) -> C:
    """``pickle``'s way back: :meth:`Checkpointed.restore` with the snapshot's own settings."""
    return cls.restore(data)
