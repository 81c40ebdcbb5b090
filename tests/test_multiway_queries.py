"""The multiway-aggregation paper's data and queries (Cederman, Gulisano et al.): the soundcloud generator,
both generators' sources, the twelve queries of
Table 2 (windgate.queries) on every strategy, the CLI's generate --sources and multiway, Spark local[2]."""

from __future__ import annotations

import doctest
import re
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import windgate
from windgate import datasets, queries
from windgate.cli import QUERY_NAMES, SOURCE_FILE, main

#: Every strategy the queries must agree on. tumlmc and wiml are skipped while the extension rejects them.
STRATEGIES = ["pane", "auto", "farm", "mq", "mqlf", "tumlsc", "tumlmc", "wiml"]


def _accepted(strategy: str) -> bool:
    t = pa.table({"ts": [1]})
    try:
        windgate.window_aggregate([t, t], time="ts", size=2, aggs={"*": "count"}, strategy=strategy)
    except windgate.InvalidParameterError as exc:
        if "unknown strategy" in str(exc):
            return False
        raise
    return True


# ----------------------------------------------------------------------------------------------- soundcloud


def test_soundcloud_shape_and_determinism():
    a = datasets.soundcloud(30_000, songs=2_000, seed=4)
    assert a.schema == datasets.SOUNDCLOUD_SCHEMA
    assert a.equals(datasets.soundcloud(30_000, songs=2_000, seed=4))
    assert not a.equals(datasets.soundcloud(30_000, songs=2_000, seed=5))
    ts = a.column("ts").to_numpy()
    assert ts[0] >= 0 and (np.diff(ts) >= 0).all()
    assert 25 <= ts[-1] <= 35  # 1000 comments per tick
    assert a.column("id").to_pylist() == list(range(30_000))
    song = a.column("song").to_numpy()
    assert song.min() >= 0 and song.max() < 2_000
    top = np.bincount(song).max() / song.size
    assert 0.08 < top < 0.17  # Zipf(1) over 2,000: the top song has ~12%
    uniform = datasets.soundcloud(30_000, songs=2_000, song_skew=0, seed=4).column("song").to_numpy()
    assert np.bincount(uniform).max() / uniform.size < 0.003
    length = pc.utf8_length(a.column("comment")).to_numpy()
    assert length.min() >= 10 and length.max() <= 230 and 60 < length.mean() < 120


def test_soundcloud_regexes_find_exactly_the_inserted_addresses():
    t = datasets.soundcloud(20_000, seed=1, p_mail=0.05, p_ip=0.03)
    comments = t.column("comment").to_pylist()
    mail = pc.match_substring_regex(t.column("comment"), datasets.EMAIL_REGEX).to_numpy(zero_copy_only=False)
    ip = pc.match_substring_regex(t.column("comment"), datasets.IP_REGEX).to_numpy(zero_copy_only=False)
    assert 0.04 < mail.mean() < 0.06 and 0.02 < ip.mean() < 0.04
    # Python's re agrees with RE2; a comment matches when it holds an '@' (e-mail) or a digit (IP).
    assert mail.tolist() == [bool(re.search(datasets.EMAIL_REGEX, c)) for c in comments]
    assert ip.tolist() == [bool(re.search(datasets.IP_REGEX, c)) for c in comments]
    assert mail.tolist() == ["@" in c for c in comments]
    assert ip.tolist() == [any(ch.isdigit() for ch in _without_mail(c)) for c in comments]
    none = datasets.soundcloud(5_000, seed=1, p_mail=0, p_ip=0).column("comment")
    assert not pc.any(pc.match_substring_regex(none, datasets.EMAIL_REGEX)).as_py()


def _without_mail(comment: str) -> str:
    return " ".join(w for w in comment.split() if "@" not in w)


@pytest.mark.parametrize("split", ["row", "user"])
def test_soundcloud_sources_are_sorted_subsequences(split):
    whole = datasets.soundcloud(12_000, songs=300, seed=2)
    parts = datasets.soundcloud_sources(12_000, sources=5, split=split, songs=300, seed=2)
    assert len(parts) == 5 and sum(p.num_rows for p in parts) == 12_000
    for i, p in enumerate(parts):
        ids = p.column("id").to_numpy()
        assert (np.diff(ids) > 0).all() and (np.diff(p.column("ts").to_numpy()) >= 0).all()
        assert p.equals(whole.take(pa.array(ids)))
        if split == "row":
            assert (ids % 5 == i).all()
        else:
            assert (p.column("user").to_numpy() % 5 == i).all()
    assert sorted(np.concatenate([p.column("id").to_numpy() for p in parts])) == list(range(12_000))


def test_soundcloud_rejects_bad_arguments():
    with pytest.raises(windgate.InvalidParameterError, match="p_mail"):
        datasets.soundcloud(10, p_mail=1.5)
    with pytest.raises(windgate.InvalidParameterError, match="songs"):
        datasets.soundcloud(10, songs=0)
    with pytest.raises(windgate.InvalidParameterError, match="song_skew"):
        datasets.soundcloud(10, song_skew=-1)
    with pytest.raises(windgate.InvalidParameterError, match="split"):
        datasets.soundcloud_sources(10, sources=2, split="song")
    with pytest.raises(TypeError, match="start"):
        datasets.soundcloud(10, start="2013")
    assert datasets.soundcloud(0).num_rows == 0


def test_smartgrid_sources_have_the_papers_243_meters():
    parts = queries.generate("smartgrid", 30_000, sources=4, seed=3)
    plugs = np.concatenate([p.column("plug_id").to_numpy() for p in parts])
    assert len(np.unique(plugs)) == 243
    for i, p in enumerate(parts):
        ts = p.column("ts").cast(pa.int64()).to_numpy()
        assert (np.diff(ts) >= 0).all() and (p.column("plug_id").to_numpy() % 4 == i).all()
        # One reading per meter per second: a 30 s window holds 30 readings (60 rows) of each meter.
    whole = pa.concat_tables(parts)
    per_meter = np.bincount(whole.column("plug_id").to_numpy())
    span_s = (pc.max(whole.column("ts")).as_py() - pc.min(whole.column("ts")).as_py()).total_seconds()
    assert abs(per_meter.mean() / 2 / span_s - 1) < 0.02


# ----------------------------------------------------------------------------------------------- queries


def test_queries_table():
    assert list(queries.QUERIES) == list(QUERY_NAMES)
    assert len(queries.QUERIES) == 12
    for name, q in queries.QUERIES.items():
        assert q.name == name and q.order_sensitive == name.endswith("-OS")
        assert q.windows_per_row == (20 if name[0] == "W" else 10)
        assert q.dataset == ("smartgrid" if name[0] in "kwW" else "soundcloud")
    assert queries.QUERIES["w-OI"].kwargs()["size"] == "20s"
    assert queries.QUERIES["K-OS"].kwargs()["slide"] == 3
    result = doctest.testmod(queries, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
    result = doctest.testmod(datasets, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.fixture(scope="module")
def data():
    return {
        "smartgrid": queries.generate("smartgrid", 24_000, sources=4, seed=5),
        "soundcloud": queries.generate("soundcloud", 12_000, sources=3, seed=5, songs=500),
    }


@pytest.fixture(scope="module")
def references(data):
    return {
        name: queries.run_query(name, data[q.dataset], strategy="reference")
        for name, q in queries.QUERIES.items()
    }


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", list(queries.QUERIES))
def test_query_equals_the_reference(name, strategy, data, references):
    if not _accepted(strategy):
        pytest.skip(f"strategy {strategy!r} is not in this build of windgate._native yet")
    q = queries.QUERIES[name]
    want = references[name]
    assert want.num_rows > 100
    got = queries.run_query(name, data[q.dataset], strategy=strategy, threads=2)
    assert got.equals(want)


@pytest.mark.parametrize("name", list(queries.QUERIES))
def test_query_on_the_union_equals_the_sources(name, data, references):
    """One source holding the union in the total order gives the same rows, first() included."""
    q = queries.QUERIES[name]
    assert queries.run_query(name, queries.union(data[q.dataset]), strategy="pane").equals(references[name])


def test_regex_queries_against_brute_force(data, references):
    sources = data["soundcloud"]
    rows = []  # (ts, source, seq, song, id, comment): sorted, this is the total order
    for i, s in enumerate(sources):
        for j, r in enumerate(s.select(["ts", "song", "id", "comment"]).to_pylist()):
            rows.append((r["ts"], i, j, r["song"], r["id"], r["comment"]))
    rows.sort()
    mail = re.compile(datasets.EMAIL_REGEX)
    ip = re.compile(datasets.IP_REGEX)
    first_mail_ip: dict = {}
    count_mail: dict = defaultdict(int)
    for ts, _, _, song, ident, comment in rows:
        is_mail = bool(mail.search(comment))
        is_ip = bool(ip.search(comment))
        for start in range((ts - 20) // 2 * 2 + 2, ts + 1, 2):  # windows [start, start + 20) holding ts
            count_mail[(start, song)] += is_mail
            first_mail_ip.setdefault((start, song), None)
            if (is_mail or is_ip) and first_mail_ip[(start, song)] is None:
                first_mail_ip[(start, song)] = ident
    got = references["f-OI"].to_pylist()
    assert {(r["window_start"], r["song"]): r["sum_is_mail"] for r in got} == dict(count_mail)
    got = references["F-OS"].to_pylist()
    assert {(r["window_start"], r["song"]): r["first_mail_ip_id"] for r in got} == first_mail_ip
    assert sum(v is not None for v in first_mail_ip.values()) > 100


def test_derived_columns_and_errors():
    sg = queries.generate("smartgrid", 100, sources=1)[0]
    load = queries.prepare("w-OI", sg)
    assert load.column_names == ["ts", "plug_id", "load"]
    prop = sg.column("property").to_pylist()
    assert [v is None for v in load.column("load").to_pylist()] == [p == 0 for p in prop]
    sc = queries.generate("soundcloud", 2000, sources=1, p_mail=0.2)[0]
    batch = sc.to_batches()[0]
    prepared = queries.prepare("f-OS", batch)
    assert isinstance(prepared, pa.RecordBatch)
    hit = ["@" in c for c in batch.column("comment").to_pylist()]
    want = [i if h else None for i, h in zip(batch.column("id").to_pylist(), hit, strict=True)]
    assert prepared.column("mail_id").to_pylist() == want
    assert queries.prepare("f-OI", sc).column("is_mail").type == pa.int8()
    with pytest.raises(windgate.ColumnNotFoundError, match="query k-OI runs on smartgrid data"):
        queries.run_query("k-OI", [sc])
    with pytest.raises(windgate.InvalidParameterError, match="query: expected one of"):
        queries.run_query("x-OI", [sc])
    with pytest.raises(windgate.InvalidParameterError, match="dataset"):
        queries.generate("debs", 10, sources=1)


def test_streaming_a_query_with_close_source(data, references):
    """The streaming operator, pushed round-robin over the sources in small batches, then closed source by
    source: the windows come out in order, and in total they equal the batch call."""
    q = queries.QUERIES["K-OS"]
    sources = [queries.prepare(q, s) for s in data["soundcloud"]]
    agg = windgate.WindowAggregator(**q.kwargs(), sources=len(sources), strategy="pane")
    parts = []
    batches = [s.to_batches(max_chunksize=500) for s in sources]
    for k in range(max(len(b) for b in batches)):
        for i, b in enumerate(batches):
            if k < len(b):
                parts.append(agg.push(b[k], source=i))
    early = sum(p.num_rows for p in parts)
    for i in range(len(sources)):
        parts.append(agg.close_source(i))
    parts.append(agg.flush())
    assert 0 < early < references["K-OS"].num_rows
    assert pa.Table.from_batches(parts).equals(references["K-OS"])


# ----------------------------------------------------------------------------------------------- CLI


def test_cli_generate_sources_and_multiway(tmp_path):
    sc = tmp_path / "sc"
    (sc).mkdir()
    (sc / SOURCE_FILE.format(7)).write_bytes(b"stale")  # a previous run's extra source is removed
    args = ["generate", "soundcloud", "--rows", "6000", "--songs", "400", "--sources", "3", "--seed", "2"]
    assert main([*args, "--out", str(sc)]) == 0
    assert sorted(p.name for p in sc.iterdir()) == [SOURCE_FILE.format(i) for i in range(3)]
    want = datasets.soundcloud_sources(6000, sources=3, songs=400, seed=2)
    got = [pq.read_table(sc / SOURCE_FILE.format(i)) for i in range(3)]
    assert all(g.equals(w) for g, w in zip(got, want, strict=True))

    ec = tmp_path / "ec"
    args = ["generate", "smartgrid", "--rows", "8000", "--households", "27", "--plugs-per-household", "9"]
    assert main([*args, "--rate", "486", "--sources", "2", "--out", str(ec)]) == 0
    want = queries.generate("smartgrid", 8000, sources=2)
    assert all(pq.read_table(ec / SOURCE_FILE.format(i)).equals(w) for i, w in enumerate(want))

    for name, directory, tables in (("F-OI", sc, got), ("w-OI", ec, want)):
        out = tmp_path / f"{name}.parquet"
        assert (
            main(
                [
                    "multiway",
                    "--query",
                    name,
                    "--data",
                    str(directory),
                    "--strategy",
                    "pane",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        assert pq.read_table(out).equals(queries.run_query(name, tables, strategy="reference"))


@pytest.mark.parametrize(
    "bad",
    [
        ["generate", "points", "--sources", "2", "--out", "p"],
        ["generate", "soundcloud", "--sources", "0", "--out", "d"],
        ["generate", "soundcloud", "--p-mail", "2", "--out", "d"],
        ["generate", "soundcloud", "--start", "2013-09-01", "--out", "d"],
        ["multiway", "--query", "k-OI", "--data", "nowhere", "--out", "o.parquet"],
        ["multiway", "--query", "k-OI", "--data", ".", "--out", "o.parquet"],
    ],
)
def test_cli_multiway_rejects_bad_arguments(bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(bad) == 2


def test_cli_multiway_wrong_dataset_and_unknown_strategy(tmp_path):
    sc = tmp_path / "sc"
    assert main(["generate", "soundcloud", "--rows", "500", "--out", str(sc)]) == 0
    out = str(tmp_path / "o.parquet")
    assert main(["multiway", "--query", "k-OI", "--data", str(sc), "--out", out]) == 2  # smartgrid query
    assert main(["multiway", "--query", "K-OI", "--data", str(sc), "--strategy", "nope", "--out", out]) == 2


# ----------------------------------------------------------------------------------------------- Spark


@pytest.mark.spark
@pytest.mark.parametrize("name", ["K-OS", "F-OI"])
def test_spark_query_equals_the_local_call(spark, name, data, references):
    """The union in the total order as one DataFrame: Spark breaks ties by row order, so first() agrees;
    the regex column is derived by Spark's rlike."""
    q = queries.QUERIES[name]
    union = queries.union(data[q.dataset])
    df = spark.createDataFrame(union.to_pandas())
    got = queries.spark_query(name, df, threads=1).toArrow()
    want = references[name]
    keys = [("window_start", "ascending"), (q.by, "ascending")]
    assert got.select(want.column_names).cast(want.schema).sort_by(keys).equals(want.sort_by(keys))
