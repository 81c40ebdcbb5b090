"""The smart-grid and band-join generators and the CLI's generate and aggregate commands."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import windgate
from windgate import datasets
from windgate.bursty import estimate_dispersion
from windgate.cli import main


def test_smartgrid_is_deterministic_and_disorder_stays_within_bound():
    a = datasets.smartgrid(20_000, households=4, plugs_per_household=5, seed=7)
    b = datasets.smartgrid(20_000, households=4, plugs_per_household=5, seed=7)
    assert a.equals(b)
    assert a.column("plug_id").to_numpy().max() < 20
    d = datasets.smartgrid(20_000, households=4, plugs_per_household=5, seed=7, disorder=3.0)
    agg = windgate.WindowAggregator(time="ts", size="10s", by="plug_id", aggs={"*": "count"}, lateness="3s")
    agg.push(d)
    assert agg.stats["late_rows"] == 0
    sources = datasets.smartgrid_sources(10_000, sources=3, households=2, plugs_per_household=5)
    assert sum(s.num_rows for s in sources) == 10_000


def test_cli_generate_and_aggregate(tmp_path, capsys):
    data = tmp_path / "sg.parquet"
    out = tmp_path / "agg.parquet"
    assert main(["generate", "smartgrid", "--rows", "30000", "--households", "2", "--out", str(data)]) == 0
    code = main(
        [
            "aggregate",
            "--input",
            str(data),
            "--out",
            str(out),
            "--time",
            "ts",
            "--size",
            "60s",
            "--slide",
            "10s",
            "--by",
            "plug_id",
            "--agg",
            "*=count",
            "--agg",
            "value=sum,max",
        ]
    )
    assert code == 0
    got = pq.read_table(out)
    want = windgate.window_aggregate(
        pq.read_table(data),
        time="ts",
        size="60s",
        slide="10s",
        by="plug_id",
        aggs={"*": "count", "value": ["sum", "max"]},
    )
    assert got.equals(want.cast(got.schema))


def test_cli_bad_input_is_one_clean_line(tmp_path):
    data = tmp_path / "sg.parquet"
    pq.write_table(pa.table({"ts": [1, 2]}), data)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "windgate",
            "aggregate",
            "--input",
            str(data),
            "--out",
            str(tmp_path / "o.parquet"),
            "--time",
            "ts",
            "--size",
            "0",
            "--agg",
            "*=count",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "size: expected a positive window size" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "bad",
    [
        ["generate", "smartgrid", "--rows", "-5", "--out", "x.parquet"],
        ["generate", "bandjoin", "--rows", "-5", "--out", "d"],
        ["generate", "bandjoin", "--rate", "0", "--out", "d"],
        ["generate", "bandjoin", "--disorder", "-1", "--out", "d"],
        ["generate", "bandjoin", "--start", "2013-09-01", "--out", "d"],
    ],
)
def test_cli_rejects_bad_generator_arguments(bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(bad) == 2


def test_bandjoin_schemas_ranges_and_times():
    r, s = datasets.bandjoin(50_000, rate=50.0, seed=3, start=1_000)
    assert r.schema == datasets.BANDJOIN_R_SCHEMA
    assert s.schema == datasets.BANDJOIN_S_SCHEMA
    assert r.column_names == ["ts", "x", "y", "z"] and s.column_names == ["ts", "a", "b", "c", "d"]
    assert r.num_rows == s.num_rows == 50_000
    for t in (r, s):
        ts = t.column("ts").to_numpy()
        assert np.all(np.diff(ts) >= 0)  # sorted without disorder
        assert ts[0] == 1_000 and ts[-1] == 1_000 + 50_000 // 50 - 1
        assert np.bincount(ts - 1_000).max() <= 2 * 50  # about `rate` rows per time unit
    for col in ("x", "a"):
        v = (r if col == "x" else s).column(col).to_numpy()
        assert v.min() == 1 and v.max() == 10_000  # 50k draws hit both ends of [1, 10000]
        assert abs(v.mean() - 5000.5) < 100
    for col in ("y", "b"):
        v = (r if col == "y" else s).column(col).to_numpy()
        assert 1.0 <= v.min() < 2.0 and 9_999.0 < v.max() <= 10_000.0
        assert abs(v.mean() - 5000.5) < 100
        assert len(np.unique(v)) > 49_000  # floats, not rounded ints
    z = r.column("z").to_pylist()
    assert {len(v) for v in z} == {20} and len(set(z)) == len(z)
    c = s.column("c").to_numpy()
    assert c.min() >= 0.0 and c.max() < 1.0
    assert 0.45 < s.column("d").to_numpy(zero_copy_only=False).mean() < 0.55


def test_bandjoin_time_band_has_the_expected_candidate_pairs():
    # Each left row meets about (2w + 1) * rate right rows with |l.ts - r.ts| <= w (fewer at the ends).
    r, s = datasets.bandjoin(100_000, rate=100.0)
    lt, rt = r.column("ts").to_numpy(), s.column("ts").to_numpy()
    pairs = int((np.searchsorted(rt, lt + 100, "right") - np.searchsorted(rt, lt - 100, "left")).sum())
    assert 1.85e9 < pairs < 2.01e9


def test_bandjoin_is_deterministic_by_seed_and_disorder_stays_within_bound():
    a = datasets.bandjoin(20_000, seed=7)
    b = datasets.bandjoin(20_000, seed=7)
    c = datasets.bandjoin(20_000, seed=8)
    assert a[0].equals(b[0]) and a[1].equals(b[1])
    assert not a[0].equals(c[0]) and not a[1].equals(c[1])
    assert not a[0].column("x").equals(a[1].column("a"))  # the two sides are independent
    d = datasets.bandjoin(20_000, seed=7, disorder=5)
    for sorted_side, shuffled in zip(a, d, strict=True):
        ts = shuffled.column("ts").to_numpy()
        assert not np.all(np.diff(ts) >= 0)
        # Every row arrives less than `disorder` units after the largest ts seen before it...
        assert np.all(np.maximum.accumulate(ts) - ts < 5)
        # ... and they are the same rows (rows of one ts may swap: compare sorted by every column).
        keys = [(c, "ascending") for c in shuffled.column_names]
        assert shuffled.sort_by(keys).equals(sorted_side.sort_by(keys))


def test_bandjoin_rejects_bad_arguments():
    with pytest.raises(ValueError, match="rate"):
        datasets.bandjoin(10, rate=0)
    with pytest.raises(ValueError, match="disorder"):
        datasets.bandjoin(10, disorder=-1)
    with pytest.raises(TypeError, match="start"):
        datasets.bandjoin(10, start="2013-09-01")
    r, s = datasets.bandjoin(0)
    assert r.num_rows == s.num_rows == 0 and r.schema == datasets.BANDJOIN_R_SCHEMA


def test_cli_generate_bandjoin_writes_left_and_right(tmp_path):
    out = tmp_path / "bj"
    args = ["generate", "bandjoin", "--rows", "5000", "--rate", "20", "--seed", "4", "--disorder", "2"]
    assert main([*args, "--out", str(out)]) == 0
    left, right = pq.read_table(out / "left.parquet"), pq.read_table(out / "right.parquet")
    want_left, want_right = datasets.bandjoin(5000, rate=20.0, seed=4, disorder=2)
    assert left.equals(want_left) and right.equals(want_right)


# ----------------------------------------------------------------------------------------------- points


@pytest.mark.parametrize("distribution", datasets.POINT_DISTRIBUTIONS)
def test_points_distributions(distribution):
    t = datasets.points(4000, dims=3, distribution=distribution, seed=5)
    assert t.column_names == ["ts", "id", "d0", "d1", "d2"]
    assert t.column("id").to_pylist() == list(range(4000))  # no disorder: event order
    ts = t.column("ts").cast(pa.int64()).to_numpy()
    assert (np.diff(ts) >= 0).all()
    d = np.stack([t.column(f"d{k}").to_numpy() for k in range(3)])
    r = np.corrcoef(d)[0, 1]
    if distribution == "independent":
        assert d.min() >= 0 and d.max() < 1000 and abs(r) < 0.1
    elif distribution == "correlated":
        assert r > 0.5
    else:
        assert r < -0.3
    assert datasets.points(4000, dims=3, distribution=distribution, seed=5).equals(t)


def test_points_disorder_is_bounded_and_bursts_have_the_dispersion():
    t = datasets.points(20_000, disorder=2.0, seed=1)
    ts = t.column("ts").cast(pa.int64()).to_numpy()
    assert (ts < np.maximum.accumulate(ts)).any()
    assert (np.maximum.accumulate(ts) - ts).max() < 2000  # ms
    bursty = datasets.points(200_000, rate=1000.0, dispersion=1000.0, seed=2)
    seconds = bursty.column("ts").cast(pa.int64()).to_numpy() / 1000.0
    assert estimate_dispersion(seconds) > 50


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dims": 0},
        {"distribution": "uniform"},
        {"distribution": "correlated", "correlation": -0.5},
        {"distribution": "anticorrelated", "dims": 3, "correlation": -0.6},
        {"distribution": "independent", "correlation": 0.5},
    ],
)
def test_points_bad_arguments(kwargs):
    with pytest.raises(windgate.InvalidParameterError) as e:
        datasets.points(10, **kwargs)
    assert str(e.value).split(":")[0] in kwargs


def test_cli_generate_points(tmp_path):
    out = tmp_path / "p.parquet"
    assert main(["generate", "points", "--rows", "500", "--dims", "4", "--out", str(out)]) == 0
    t = pq.read_table(out)
    assert t.num_rows == 500 and t.column_names[-1] == "d3"
