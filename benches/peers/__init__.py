"""Peer benchmarks: windgate against DuckDB, Polars, pandas and Spark, and windgate's engines against each
other, on the same data with every answer checked.

Run from the repository root as ``python -m benches.peers <suite> [options]`` (``all`` runs every suite
``make bench-peers`` runs); :mod:`.runner` holds what the suites share, :mod:`.report` the JSON and
Markdown, :mod:`.plot` the PNG.
"""
