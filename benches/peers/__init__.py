"""Peer benchmarks: windgate against DuckDB, Polars, pandas and Spark, and windgate's engines against each
other, on the same data with every answer checked.

Run from the repository root as ``python -m benches.peers <suite> [options]`` (``all`` runs every suite
``make bench-peers`` runs; see :mod:`.__main__`). :mod:`.runner` holds what the suites share (options, the
Polars worker subprocess, the run's load, results and exit code), :mod:`.report` the JSON and Markdown,
:mod:`.plot` the PNG. A suite is one module named after it (``window_aggregate``, ``band_join``, ...) with a
``main(argv)``; a large one keeps its peers' queries in ``<suite>_peers`` (and ``preference`` its shared
helpers and scheduler sections in ``preference_common`` and ``preference_schedulers``).
"""
