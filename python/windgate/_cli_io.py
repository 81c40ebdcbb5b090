"""Argument types and file handling of the ``windgate`` command line (:mod:`windgate.cli`): every problem
with an argument or a file it names becomes a :class:`CliError` (one ``error: ...`` line, exit status 2)
that names the option and what was expected, never a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ._ui import EXIT_USAGE, CliError, progress

__all__ = [
    "COMPRESSIONS",
    "OneLineParser",
    "check_out_path",
    "make_out_dir",
    "open_writer",
    "positive_int",
    "read_failed",
    "write_failed",
    "write_parquet",
    "write_table",
]

#: Parquet compressions pyarrow writes (``--compression``).
COMPRESSIONS = ("zstd", "snappy", "gzip", "brotli", "lz4", "none")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (``windgate aggregate: error: argument
    --batch-rows: expected a positive int, got '0'``) with exit status 2, without the usage block."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {' '.join(message.split())} (see --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def positive_int(text: str) -> int:
    """argparse ``type=``: an int of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}")
    return value


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def check_out_path(path: Path, param: str = "--out") -> None:
    """Refuses a directory and creates the parent directory of an output file."""
    if path.is_dir():
        raise CliError(f"{param} {str(path)!r}: is a directory; expected a Parquet file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{param} {str(path)!r}: cannot create its directory ({_reason(exc)})") from exc


def make_out_dir(path: Path, param: str = "--out") -> None:
    """Creates an output directory; a file in the way or no permission is a :class:`CliError`."""
    if path.exists() and not path.is_dir():
        raise CliError(f"{param} {str(path)!r}: exists and is not a directory; expected a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{param} {str(path)!r}: cannot create the directory ({_reason(exc)})") from exc


def open_writer(path: Path, schema: Any, compression: str, *, param: str = "--out"):
    """A ``pyarrow.parquet.ParquetWriter`` on ``path``; an unwritable path or a directory is a
    :class:`CliError` naming ``param``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_out_path(path, param)
    try:
        return pq.ParquetWriter(path, schema, compression=compression)
    except (OSError, pa.ArrowException) as exc:
        raise CliError(f"{param} {str(path)!r}: cannot write it ({_reason(exc)})") from exc


def write_table(table: Any, path: Path, compression: str, *, param: str = "--out") -> None:
    """``pyarrow.parquet.write_table`` whose failures name ``param`` (the schema is kept for zero rows)."""
    import pyarrow as pa

    writer = open_writer(path, table.schema, compression, param=param)
    try:
        with writer:
            writer.write_table(table)
    except (OSError, pa.ArrowException) as exc:
        path.unlink(missing_ok=True)
        raise CliError(f"{param} {str(path)!r}: cannot write it ({_reason(exc)})") from exc


def write_failed(exc: BaseException, path: Path, param: str = "--out") -> CliError:
    """The error for a write that failed midway (disk full, ...)."""
    return CliError(f"{param} {str(path)!r}: cannot write it ({_reason(exc)})")


def read_failed(exc: BaseException, path: Path | str, param: str) -> CliError:
    """The error for an input that cannot be read as Parquet."""
    return CliError(f"{param} {str(path)!r}: cannot read it as Parquet ({_reason(exc)})")


def write_parquet(table, path: Path, console, *, row_group_rows: int, compression: str, label: str) -> None:
    """Write ``table`` to ``path`` in row groups of ``row_group_rows``, with a progress bar; a failed write
    leaves no half-written file."""
    import pyarrow as pa

    writer = open_writer(path, table.schema, compression)
    try:
        with progress(console) as bar, writer:
            task = bar.add_task(label, total=table.num_rows)
            for start in range(0, table.num_rows, row_group_rows):
                part = table.slice(start, row_group_rows)
                writer.write_table(part, row_group_size=row_group_rows)
                bar.advance(task, part.num_rows)
            if table.num_rows == 0:
                writer.write_table(table)
    except (OSError, pa.ArrowException) as exc:
        path.unlink(missing_ok=True)
        raise write_failed(exc, path) from exc
    except BaseException:
        path.unlink(missing_ok=True)  # no half-written output
        raise


# ---------------------------------------------------------------------------------------- argument values

_INT = re.compile(r"[+-]?\d+")


def int_or_duration(text: str | None) -> int | str | None:
    """``"600"`` -> 600 (in the time column's unit), ``"10s"`` -> ``"10s"`` (a duration string)."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if _INT.fullmatch(text) else text


def parse_aggs(specs: Sequence[str]) -> dict[str, str | list[str]]:
    """``["*=count", "value=sum,max"]`` -> ``{"*": "count", "value": ["sum", "max"]}`` (order kept)."""
    merged: dict[str, list[str]] = {}
    for spec in specs:
        column, sep, funcs = spec.partition("=")
        names = [f.strip() for f in funcs.split(",") if f.strip()]
        if not sep or not column.strip() or not names:
            raise CliError(
                f"--agg {spec!r}: expected COLUMN=FUNC[,FUNC...], e.g. '*=count' or 'value=sum,max'"
            )
        bucket = merged.setdefault(column.strip(), [])
        bucket.extend(n for n in names if n not in bucket)
    return {col: funcs[0] if len(funcs) == 1 else funcs for col, funcs in merged.items()}


def split_list(values: Sequence[str] | None) -> list[str] | None:
    if not values:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return out or None
