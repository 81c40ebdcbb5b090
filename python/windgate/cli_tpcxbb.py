"""``windgate tpcxbb``: generate the TPCx-BB-like streams and run Q1-Q4/Q15 as ordered pipelines.

::

    windgate tpcxbb generate --rows 1000000 --seed 0 --out data/tpcxbb  # clickstream, store_sales .parquet
    windgate tpcxbb run --query q2 --data data/tpcxbb --threads 2 --scheduler ct --out out/q2.parquet
    windgate tpcxbb run --query q2 --data data/tpcxbb --sequential --out out/q2-seq.parquet

The queries and data are specified in docs/tpcxbb.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from . import _ui
from ._cli_io import (
    COMPRESSIONS,
    check_out_path,
    make_out_dir,
    positive_int,
    read_failed,
    write_parquet,
    write_table,
)
from ._ui import EXIT_OK, CliError

__all__ = ["add_parser"]

QUERIES = ("q1", "q2", "q3", "q4", "q15")
SCHEDULERS = ("ct", "ct_input", "lp", "qst", "et")


def add_parser(sub) -> None:
    """Adds ``tpcxbb generate`` and ``tpcxbb run`` to the command line's subparsers."""
    t = sub.add_parser("tpcxbb", help="TPCx-BB-like streams and queries (Q1-Q4, Q15) as ordered pipelines")
    tsub = t.add_subparsers(dest="tpcxbb_command", required=True, metavar="ACTION")

    g = tsub.add_parser("generate", help="write clickstream.parquet and store_sales.parquet to a directory")
    g.add_argument("--rows", type=int, default=1_000_000, help="rows per table (default 1,000,000)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--days", type=int, default=28, help="days of event time from 2024-01-01 (default 28)")
    g.add_argument("--items", type=int, default=5000, help="items (default 5000)")
    g.add_argument("--users", type=int, default=None, help="users (default max(1000, rows / 20))")
    g.add_argument("--stores", type=int, default=20, help="stores (default 20)")
    g.add_argument(
        "--row-group-rows", type=positive_int, default=1 << 20, help="Parquet row group size (default 1Mi)"
    )
    g.add_argument(
        "--compression", choices=COMPRESSIONS, default="zstd", help="Parquet compression (default zstd)"
    )
    g.add_argument("--out", required=True, help="output directory")
    g.set_defaults(func=_cmd_generate)

    r = tsub.add_parser("run", help="run one query over a directory written by `tpcxbb generate`")
    r.add_argument("--query", required=True, choices=QUERIES, help="see docs/tpcxbb.md")
    r.add_argument("--data", required=True, help="directory with clickstream.parquet and store_sales.parquet")
    r.add_argument("--threads", type=positive_int, default=None, help="worker threads (default: all cores)")
    r.add_argument("--scheduler", choices=SCHEDULERS, default="ct", help="scheduling heuristic (default ct)")
    r.add_argument("--reorder", choices=["nonblocking", "locked"], default="nonblocking")
    r.add_argument("--partitioning", choices=["hybrid", "partitioned"], default="hybrid")
    r.add_argument("--sequential", action="store_true", help="the sequential executor (the reference)")
    r.add_argument(
        "--chunk-rows", type=positive_int, default=None, help="rows per pipeline item (default 8192)"
    )
    r.add_argument("--out", required=True, help="output Parquet file")
    r.add_argument(
        "--compression", choices=COMPRESSIONS, default="zstd", help="Parquet compression (default zstd)"
    )
    r.set_defaults(func=_cmd_run)


def _cmd_generate(args: argparse.Namespace) -> int:
    from . import tpcxbb

    console = _ui.console()
    if args.rows < 0:
        raise CliError(f"--rows: expected a non-negative count, got {args.rows}")
    out = Path(args.out)
    make_out_dir(out)
    console.print(f"TPCx-BB-like streams: {args.rows:,} rows per table, seed {args.seed}, {args.days} days")
    with _ui.step(console, 1, 2, "generating"):
        tables = tpcxbb.generate(
            args.rows, args.seed, days=args.days, users=args.users, items=args.items, stores=args.stores
        )
    console.print("[bold cyan]\\[2/2][/] writing Parquet ...")
    for name, table in zip(tpcxbb.TABLES, tables, strict=True):
        path = out / f"{name}.parquet"
        write_parquet(
            table,
            path,
            console,
            row_group_rows=args.row_group_rows,
            compression=args.compression,
            label=name,
        )
        console.print(f"      {path} ({_ui.mib(path)})")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rich.table import Table

    from . import tpcxbb

    console = _ui.console()
    name = tpcxbb.table_of(args.query)
    path = Path(args.data) / f"{name}.parquet"
    out = Path(args.out)
    check_out_path(out)
    if not path.is_file():
        raise CliError(
            f"--data {args.data!r}: no {name}.parquet (windgate tpcxbb generate --out DIR writes it)"
        )
    try:
        data = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise read_failed(exc, path, "--data") from exc
    pipeline = tpcxbb.query(args.query)
    how = "sequential executor" if args.sequential else f"scheduler {args.scheduler}"
    console.print(
        f"Query [bold]{args.query}[/] ({' -> '.join(k for k, _ in pipeline.ops)}) over {path} "
        f"({data.num_rows:,} rows), {how}"
    )
    t0 = time.perf_counter()
    with console.status("running"):
        result = pipeline.run(
            data,
            threads=args.threads,
            scheduler=args.scheduler,
            reorder=args.reorder,
            partitioning=args.partitioning,
            sequential=args.sequential,
            chunk_rows=args.chunk_rows,
        )
    seconds = time.perf_counter() - t0
    write_table(result, out, args.compression)

    stats = pipeline.stats or {}
    report = Table(title=f"windgate tpcxbb {args.query}", title_justify="left")
    for column in ("operator", "kind", "chunks in", "chunks out", "busy s", "max workers"):
        report.add_column(column, justify="left" if column in ("operator", "kind") else "right")
    for op in stats.get("ops", []):
        kind = op["kind"] + (f" ({op['partitions']})" if "partitions" in op else "")
        report.add_row(
            op["name"],
            kind,
            f"{op['inputs']:,}",
            f"{op['outputs']:,}",
            f"{op['busy_s']:.3f}",
            str(op["max_workers"]),
        )
    console.print(report)
    latency = stats.get("latency_s")
    console.print(
        f"rows in {data.num_rows:,}, rows out {result.num_rows:,}, {seconds:.3f} s, "
        f"{_ui.fmt_rate(data.num_rows, seconds)}, threads {stats.get('threads')}, "
        f"latency {'-' if latency is None else f'{latency * 1e3:.2f} ms'}; output {out} ({_ui.mib(out)})"
    )
    return EXIT_OK
