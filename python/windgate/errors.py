"""windgate's exception classes.

Every error windgate raises for bad input is a :class:`WindgateError` and also a standard ``ValueError`` or
``TypeError``, so existing ``except ValueError`` code keeps working. Messages name the parameter, column or
source at fault and what was expected.
"""

from __future__ import annotations

__all__ = [
    "WindgateError",
    "InvalidParameterError",
    "ColumnNotFoundError",
    "ColumnTypeError",
    "SchemaMismatchError",
    "LateRowError",
    "WindgateOverflowError",
    "NullTimeError",
    "InvalidValueError",
    "OperatorPoisonedError",
    "InputError",
    "BackpressureError",
    "SparkEnvironmentError",
    "SnapshotError",
    "SnapshotMismatchError",
]


class WindgateError(Exception):
    """Base class of every windgate error."""


class InvalidParameterError(WindgateError, ValueError):
    """A parameter has a bad value (``size=0``, ``slide > size``, an unknown strategy, ...)."""


class ColumnNotFoundError(WindgateError, ValueError):
    """A column named by ``time``, ``by`` or ``aggs`` is not in the input."""


class ColumnTypeError(WindgateError, TypeError):
    """A column or parameter has a type the operation cannot take."""


class SchemaMismatchError(WindgateError, ValueError):
    """Batches or sources disagree on a column's type."""


class LateRowError(WindgateError, ValueError):
    """A late row under ``on_late="error"``, or a source that is not sorted by time."""


class WindgateOverflowError(WindgateError, ValueError):
    """Timestamps whose windows leave the int64 range, or an int64 sum that overflows."""


class NullTimeError(WindgateError, ValueError):
    """A null in the time column (pass ``null_time="drop"`` to drop such rows)."""


class InvalidValueError(WindgateError, ValueError):
    """A value the operation cannot take: NaN or null in a preference dimension or score column."""


class OperatorPoisonedError(WindgateError, RuntimeError):
    """The operator failed earlier (an internal error or an error while emitting) and refuses further work."""


class InputError(WindgateError, ValueError):
    """The input could not be read: an Arrow stream whose producer failed, or data Arrow cannot convert."""


class BackpressureError(WindgateError, RuntimeError):
    """A source ran ``credits`` rows ahead of the sources holding the watermark back.

    The batch was **not** consumed and the operator is still usable: push the lagging sources (or close
    them), then push the batch again. This is how a multi-source operator keeps memory bounded when one
    source stalls.
    """


class SnapshotError(WindgateError, ValueError):
    """Bytes given to ``restore`` are not a whole windgate snapshot (truncated, changed, or another format),
    or were written by a newer windgate than this one."""


class SnapshotMismatchError(SnapshotError):
    """A whole snapshot that does not fit: it belongs to another operator, or was taken with other query
    parameters (the message names the first one). Only runtime settings such as ``threads`` and
    ``strategy`` may differ on restore."""


class SparkEnvironmentError(WindgateError, RuntimeError):
    """The Spark executors cannot run windgate: their Python does not have it (or its dependencies).

    The message says what to set: ``PYSPARK_PYTHON`` / ``spark.pyspark.python`` to an interpreter that has
    windgate installed, or ``spark.archives`` with a packed virtualenv (see the README's "Running on a
    cluster").
    """
