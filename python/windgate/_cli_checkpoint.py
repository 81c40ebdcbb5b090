"""``--checkpoint PATH``: a command that resumes where it stopped, with output files as if it never had.

A checkpoint directory holds ``state`` (one file, replaced atomically: the input position, how many output
parts are committed, the run's arguments, then the operator's snapshot) and ``part-NNNNNN.parquet`` files,
the output committed so far. A commit writes the output produced since the last one as a new part, then
replaces ``state``; output not yet committed stays in memory. So after a kill or Ctrl-C the last ``state``
names exactly the parts that belong to it (a part written after it is removed on resume), the operator
continues from its snapshot at the input position it names, and no window is written twice or lost. When
the input ends, the parts are joined into ``--out`` (written to a temporary name, then renamed) and the
directory is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._ui import CliError

STATE = "state"
#: Format of the ``state`` file; a checkpoint of another format is refused, not guessed at.
VERSION = 1


def _part(directory: Path, n: int) -> Path:
    return directory / f"part-{n:06d}.parquet"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Checkpoint:
    """The checkpoint directory of one run: ``fingerprint`` (the arguments that decide the output) must
    match the directory's, else it is refused rather than resumed into another run's output."""

    def __init__(self, directory: Path, fingerprint: dict[str, Any], *, interval: float) -> None:
        self.dir = directory
        self.fingerprint = json.loads(json.dumps(fingerprint, default=str))
        self.interval = interval
        self.rows = 0
        self.parts = 0
        self.pending: list[Any] = []
        self.last_commit = time.monotonic()
        if directory.exists() and not directory.is_dir():
            raise CliError(f"--checkpoint {str(directory)!r}: is a file; expected a directory")
        directory.mkdir(parents=True, exist_ok=True)

    def resume(self) -> bytes | None:
        """The snapshot to restore, if the directory holds a checkpoint of this run; sets ``rows`` and
        ``parts`` and removes parts written after it."""
        state = self.dir / STATE
        if not state.exists():
            return None
        raw = state.read_bytes()
        head, sep, snapshot = raw.partition(b"\n")
        try:
            meta = json.loads(head)
        except ValueError:
            meta = None
        if not sep or not isinstance(meta, dict) or meta.get("version") != VERSION:
            raise CliError(f"--checkpoint {str(self.dir)!r}: its state file is not a windgate checkpoint")
        if meta["args"] != self.fingerprint:
            diff = sorted(k for k in self.fingerprint if meta["args"].get(k) != self.fingerprint[k])
            raise CliError(
                f"--checkpoint {str(self.dir)!r}: it was written by a run with other arguments "
                f"({', '.join(diff)}); rerun with the same ones, or remove the directory to start over"
            )
        self.rows, self.parts = meta["rows"], meta["parts"]
        n = self.parts + 1
        while _part(self.dir, n).exists():
            _part(self.dir, n).unlink()
            n += 1
        return snapshot

    def add(self, batch: Any) -> None:
        """Output to commit with the next checkpoint."""
        if batch.num_rows:
            self.pending.append(batch)

    def due(self) -> bool:
        return time.monotonic() - self.last_commit >= self.interval

    def commit(self, snapshot: bytes, rows: int, schema: Any, compression: str) -> None:
        """Writes the pending output as a part, then the state naming it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.pending:
            table = pa.Table.from_batches(self.pending).cast(schema)
            path = _part(self.dir, self.parts + 1)
            tmp = path.with_name(path.name + ".tmp")
            pq.write_table(table, tmp, compression=compression)
            os.replace(tmp, path)
            self.parts += 1
            self.pending = []
        self.rows = rows
        meta = {"version": VERSION, "rows": rows, "parts": self.parts, "args": self.fingerprint}
        _atomic_write(self.dir / STATE, json.dumps(meta).encode() + b"\n" + snapshot)
        self.last_commit = time.monotonic()

    def finish(self, out: Path, schema: Any, compression: str) -> None:
        """Joins the committed parts and the pending output into ``out``, then removes the directory."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        tmp = out.with_name(out.name + ".tmp")
        with pq.ParquetWriter(tmp, schema, compression=compression) as w:
            for n in range(1, self.parts + 1):
                w.write_table(pq.read_table(_part(self.dir, n)).cast(schema))
            if self.pending:
                w.write_table(pa.Table.from_batches(self.pending).cast(schema))
        os.replace(tmp, out)
        for n in range(1, self.parts + 1):
            _part(self.dir, n).unlink()
        (self.dir / STATE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # something else lives there: leave it
            self.dir.rmdir()


def batches_from(pf: Any, start: int, batch_rows: int, columns: list[str] | None) -> Iterator[Any]:
    """The batches of Parquet file ``pf`` from row ``start`` on (whole row groups skipped unread)."""
    meta = pf.metadata
    first, skipped = 0, 0
    while first < meta.num_row_groups and skipped + meta.row_group(first).num_rows <= start:
        skipped += meta.row_group(first).num_rows
        first += 1
    if first >= meta.num_row_groups:
        return
    skip = start - skipped
    groups = list(range(first, meta.num_row_groups))
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=groups, columns=columns):
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        yield batch.slice(skip) if skip else batch
        skip = 0
