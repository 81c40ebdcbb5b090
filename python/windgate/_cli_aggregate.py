"""``windgate aggregate``: sliding-window aggregation of a Parquet file, streamed by batches, with a progress
bar, a report and, with ``--checkpoint``, resumption after a kill or Ctrl-C (see ``_cli_checkpoint``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import _ui
from ._cli_checkpoint import Checkpoint, batches_from
from ._cli_io import (
    check_out_path,
    int_or_duration,
    open_writer,
    parse_aggs,
    read_failed,
    split_list,
    write_failed,
)
from ._ui import EXIT_OK, CliError


def run(args: argparse.Namespace) -> int:
    """``windgate aggregate``: a Parquet file through a ``WindowAggregator``, batch by batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rich.markup import escape
    from rich.table import Table

    import windgate

    console = _ui.console()
    aggs = parse_aggs(args.agg)
    by = split_list(args.by)
    src = Path(args.input)
    if not src.exists():
        raise CliError(f"--input {str(src)!r}: no such file")
    if src.is_dir():
        raise CliError(f"--input {str(src)!r}: is a directory; expected a Parquet file")
    out = Path(args.out)
    check_out_path(out)
    columns = None if args.columns is None else split_list(args.columns)
    try:
        pf = pq.ParquetFile(src)
        input_schema = pf.schema_arrow
        if columns is not None:
            input_schema = pa.schema([input_schema.field(c) for c in columns])
    except KeyError as exc:
        raise CliError(f"--columns: {exc} is not a column of {str(src)!r}") from exc
    except (OSError, pa.ArrowException) as exc:
        raise read_failed(exc, src, "--input") from exc
    total = pf.metadata.num_rows

    kwargs: dict[str, Any] = dict(
        time=args.time,
        size=int_or_duration(args.size),
        slide=int_or_duration(args.slide),
        offset=int_or_duration(args.offset),
        by=by,
        aggs=aggs,
        lateness=int_or_duration(args.lateness),
        on_late=_on_late(args),
        threads=args.threads,
    )
    if args.tz is not None:
        kwargs["tz"] = args.tz
    if args.allowed_lateness is not None:
        kwargs["allowed_lateness"] = int_or_duration(args.allowed_lateness)
    if args.emit != "final" or args.interval is not None:
        kwargs.update(emit=args.emit, interval=int_or_duration(args.interval))
    late_out = None if args.late_out is None else Path(args.late_out)
    if late_out is not None:
        check_out_path(late_out, "--late-out")
    _check_plain_numbers(kwargs, input_schema)
    if args.strategy is not None:
        kwargs["strategy"] = args.strategy
    if args.scheduler is not None:
        kwargs["farm"] = {"scheduler": args.scheduler}
    if args.null_time is not None:
        kwargs["null_time"] = args.null_time
    agg = windgate.WindowAggregator(**kwargs)
    ckpt, start = _aggregate_checkpoint(args, src, kwargs)
    if ckpt is not None and (snapshot := ckpt.resume()) is not None:
        runtime = {k: kwargs[k] for k in ("threads", "strategy", "farm") if k in kwargs}
        agg = windgate.WindowAggregator.restore(snapshot, **runtime)
        start = ckpt.rows

    writer: pq.ParquetWriter | None = None
    rows_in = rows_out = 0
    late = _LateRows(agg_ref=lambda: agg, path=late_out, compression=args.compression)

    def write(batch: pa.RecordBatch) -> None:
        nonlocal writer, rows_out
        if ckpt is not None:
            ckpt.add(batch)
            rows_out += batch.num_rows
            return
        if writer is None:
            # The operator's output schema once bound, so that no output row still gives its columns.
            schema = agg.schema if agg.schema is not None and len(agg.schema) else batch.schema
            writer = open_writer(out, schema, args.compression)
        if batch.num_rows:
            table = pa.Table.from_batches([batch])
            if table.schema != writer.schema:
                table = table.cast(writer.schema)
            try:
                writer.write_table(table)
            except (OSError, pa.ArrowException) as exc:
                raise write_failed(exc, out) from exc
            rows_out += batch.num_rows

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from batches_from(pf, start, args.batch_rows, columns)
        except (OSError, pa.ArrowException) as exc:
            raise read_failed(exc, src, "--input") from exc

    console.print(
        f"Aggregating [bold]{escape(str(src))}[/] ({total:,} rows, {pf.metadata.num_row_groups} row groups): "
        f"windows {escape(str(kwargs['size']))}"
        + (f" sliding {escape(str(kwargs['slide']))}" if kwargs["slide"] is not None else "")
        + (f" by {escape(', '.join(by))}" if by else "")
        + f", aggs {escape(json.dumps(aggs))}"
    )
    if start:
        console.print(f"Resuming from the checkpoint in {escape(args.checkpoint)} at row {start:,}")
    t0 = time.perf_counter()
    done = False
    try:
        with _ui.progress(console) as progress:
            task = progress.add_task("aggregating", total=total, completed=start)
            for batch in batches():
                write(agg.push(batch))
                if ckpt is None:  # with checkpoints the late rows ride in the snapshots until the end
                    late.take()
                rows_in += batch.num_rows
                progress.advance(task, batch.num_rows)
                if ckpt is not None and ckpt.due():
                    ckpt.commit(agg.snapshot(), start + rows_in, agg.schema, args.compression)
            if agg.schema is None:  # no batch at all: bind the input's schema for the output's
                write(agg.push(pa.RecordBatch.from_pylist([], schema=input_schema)))
            write(agg.flush())
            late.take()
            late.close()
            if ckpt is not None:
                ckpt.finish(out, agg.schema, args.compression)
            elif writer is None:
                write(pa.RecordBatch.from_pylist([], schema=agg.schema))
        done = True
    except KeyboardInterrupt:
        if ckpt is not None:
            print(
                f"checkpoint at row {ckpt.rows:,} in {args.checkpoint}: run the same command to resume",
                file=sys.stderr,
            )
        raise
    finally:
        if writer is not None:
            try:
                writer.close()
            except (OSError, pa.ArrowException) as exc:
                if done:
                    out.unlink(missing_ok=True)
                    raise write_failed(exc, out) from exc
            if not done:
                out.unlink(missing_ok=True)  # no half-written output
        if not done and late.writer is not None:
            late.close()
            late_out.unlink(missing_ok=True)
    seconds = time.perf_counter() - t0

    stats = dict(getattr(agg, "stats", {}) or {})
    report = Table(title="windgate aggregate", show_header=False, title_justify="left")
    report.add_column("what")
    report.add_column("value", justify="right")

    def count(key: str, default: int | None) -> str:
        value = stats.get(key, default)
        return f"{value:,}" if isinstance(value, int) else str(value)

    report.add_row("rows in", count("rows_in", rows_in))
    report.add_row("late rows (dropped)", count("late_rows", 0))
    if late_out is not None:
        report.add_row("late rows written", f"{late.rows:,} to {late_out}")
    if "windows_out" in stats:
        report.add_row("windows out", count("windows_out", None))
    report.add_row("rows out", count("rows_out", rows_out))
    report.add_row("seconds", f"{seconds:.3f}")
    report.add_row("throughput", _ui.fmt_rate(rows_in, seconds))
    report.add_row("output", f"{out} ({_ui.mib(out)})")
    console.print(report)
    return EXIT_OK


def _on_late(args: argparse.Namespace) -> str:
    """``--on-late``, ``keep`` when ``--late-out`` is given (which ``keep`` needs)."""
    if args.late_out is not None and args.on_late not in (None, "keep"):
        raise CliError(
            f"--late-out: late rows are written only with --on-late keep, got --on-late {args.on_late}"
        )
    if args.on_late == "keep" and args.late_out is None:
        raise CliError("--on-late keep: give --late-out PATH for the late rows")
    return "keep" if args.late_out is not None else (args.on_late or "drop")


class _LateRows:
    """The late rows of ``--late-out``: taken from the operator and appended to a Parquet file."""

    def __init__(self, agg_ref: Any, path: Path | None, compression: str) -> None:
        self.agg_ref, self.path, self.compression = agg_ref, path, compression
        self.writer: Any = None
        self.rows = 0

    def take(self) -> None:
        if self.path is None:
            return
        batch = self.agg_ref().late_rows()
        if batch is None:
            return
        if self.writer is None:
            self.writer = open_writer(self.path, batch.schema, self.compression, param="--late-out")
        if batch.num_rows:
            self.writer.write_batch(batch)
            self.rows += batch.num_rows

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


#: Nanoseconds per unit of a timestamp column (``time_unit`` names) and of date32 columns.
_UNIT_NS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1, "day": 86_400 * 10**9}


def _check_plain_numbers(kwargs: dict[str, Any], schema: Any) -> None:
    """A number without a unit (``--lateness 5``) on a timestamp or date time column is an error naming the
    option: its meaning would depend on the column's unit (5 ns on ns data). Integer time columns take
    numbers; ``0`` is the same everywhere. (The operator rejects it too, naming the keyword instead.)"""
    from . import _specs
    from .errors import InvalidParameterError

    time = kwargs["time"]
    if time not in schema.names:
        return  # the operator names the missing column
    t = schema.field(time).type
    try:
        unit = _specs.time_unit(t)
    except Exception:
        return  # the operator names the bad type
    if unit == "plain":
        return
    for key in ("size", "slide", "offset", "lateness", "allowed_lateness", "interval"):
        value = kwargs.get(key)
        if isinstance(value, int) and value != 0:
            flag = f"--{key.replace('_', '-')}"
            meaning = _specs.format_duration(value * _UNIT_NS[unit])
            raise InvalidParameterError(
                f"{flag} {value}: the time column {time!r} is a {t}, so a number without a unit would mean "
                f"{meaning}; pass a duration such as {flag} {value}s (or {value}ms, {value}m, {value}h)"
            )


def _aggregate_checkpoint(args: argparse.Namespace, src: Path, kwargs: dict[str, Any]) -> tuple[Any, int]:
    """The run's :class:`~windgate._cli_checkpoint.Checkpoint` (``--checkpoint``), or ``None``; and the row
    to start at (0 until a checkpoint is resumed)."""
    if args.checkpoint is None:
        return None, 0
    # What decides the output: the query and the input (not how it runs, nor how it is read in batches).
    fingerprint = {k: v for k, v in kwargs.items() if k not in ("threads", "strategy", "farm")}
    fingerprint.update(input=str(src.resolve()), input_bytes=src.stat().st_size, columns=args.columns)
    return Checkpoint(Path(args.checkpoint), fingerprint, interval=args.checkpoint_interval), 0
