"""Calendar windows in a time zone (``tz=``): windows of whole days and weeks that start at local midnight
across daylight-saving changes, checked against a brute force on Python's ``zoneinfo`` for every engine,
batch split, disorder within the lateness bound and restore point, and against Polars'
``group_by_dynamic``; parameter errors."""

from __future__ import annotations

import datetime as dt
import pickle
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scaled import examples

import windgate
from brute import windows_of
from windgate.errors import InvalidParameterError

DAY = 86_400_000  # ms
HOUR = 3_600_000
#: Whole-week windows start on Mondays: 1970-01-05 is the first after the epoch.
MONDAY = 4 * DAY
#: A month on the coordinate of month windows (longer than any month).
MONTH = 31 * DAY
#: Instants (ms) of daylight-saving changes: Berlin changes at 02:00/03:00 local, Santiago at midnight.
CHANGES = {
    "Europe/Berlin": ["2024-03-31T01:00:00+00:00", "2024-10-27T01:00:00+00:00"],
    "America/Santiago": ["2024-04-07T03:00:00+00:00", "2024-09-08T04:00:00+00:00"],
    "America/New_York": ["2024-03-10T07:00:00+00:00", "2024-11-03T06:00:00+00:00"],
}
ZONES = ["Europe/Berlin", "America/Santiago"]
STRATEGIES = ["auto", "pane", "reference", "farm", "shard", "rrcpa", "hsa", "rra", "hoa", "rrca"]
AGGS = {"*": "count", "v": ["sum", "min", "first", "last"]}


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def local(t: int, zone: str) -> int:
    """Wall time (ms on the epoch's scale) at instant ``t`` (ms)."""
    d = dt.datetime.fromtimestamp(t // 1000, ZoneInfo(zone)).replace(tzinfo=None)
    return (d - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1) + t % 1000


def monotone(t: int, zone: str) -> int:
    """The greatest wall time at or before instant ``t``: the wall time, except in the second pass of an
    autumn change's repeated hour, which keeps the wall time reached just before the change."""
    wall = local(t, zone)
    before = t - 3 * HOUR
    if local(before, zone) - before <= wall - t:
        return wall  # the offset did not drop within three hours
    lo, hi = before, t  # the change: the first instant with the lower offset
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if local(mid, zone) - mid == local(before, zone) - before:
            lo = mid
        else:
            hi = mid
    return max(wall, local(hi - 1, zone))


def instant(wall: int, zone: str) -> int:
    """The instant a wall time stands for: the earlier of two at an autumn change, the change itself where
    the wall time does not exist (the first instant whose wall time is past it)."""
    naive = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=wall)
    found = []
    for fold in (0, 1):
        t = int(naive.replace(tzinfo=ZoneInfo(zone), fold=fold).timestamp() * 1000)
        if local(t, zone) == wall:
            found.append(t)
    if found:
        return min(found)
    lo, hi = wall - 16 * HOUR, wall + 16 * HOUR
    while lo < hi:
        mid = (lo + hi) // 2
        if local(mid, zone) >= wall:
            hi = mid
        else:
            lo = mid + 1
    return lo


def month_start(index: int) -> int:
    """Wall time (ms) of midnight on the first of month ``index`` (months since 1970-01)."""
    first = dt.datetime(1970 + index // 12, index % 12 + 1, 1)
    return (first - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)


def coordinate(wall: int, months: bool) -> int:
    """Month windows: the month's index times :data:`MONTH` plus the time since its first; else wall time."""
    if not months:
        return wall
    d = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=wall)
    index = (d.year - 1970) * 12 + d.month - 1
    return index * MONTH + wall - month_start(index)


def wall_of(c: int, months: bool) -> int:
    return month_start(c // MONTH) + c % MONTH if months else c


def admitted(rows, lateness):
    """The rows a fixed K-slack admits (watermark = largest time seen - K) and the number of late ones."""
    if lateness is None:
        return rows, 0
    wm, top, late, out = None, None, 0, []
    for r in rows:
        if wm is not None and r[0] < wm:
            late += 1
            continue
        if top is None or r[0] > top:
            top, wm = r[0], r[0] - lateness
        out.append(r)
    return out, late


def brute(rows, zone, size, slide, offset, lateness=None, months=False):
    """Every admitted row in the windows of its monotone wall time (for months: of its month coordinate);
    bounds back to instants; ordered by ``(window_start, k)``; ``first``/``last`` by instant, then arrival."""
    keep, late = admitted(rows, lateness)
    grid = offset + (MONDAY if slide % (7 * DAY) == 0 and not months else 0)
    groups: dict[tuple[int, int], list] = {}
    for seq, (t, k, v) in enumerate(keep):
        c = coordinate(monotone(t, zone), months)
        for start in windows_of(c, size, slide, grid):
            groups.setdefault((start, k), []).append((t, seq, v))
    out = []
    for (start, k), members in sorted(groups.items()):
        members.sort()
        vals = [m[2] for m in members]
        out.append(
            {
                "k": k,
                "window_start": instant(wall_of(start, months), zone),
                "window_end": instant(wall_of(start + size, months), zone),
                "count": len(members),
                "sum_v": sum(vals),
                "min_v": min(vals),
                "first_v": vals[0],
                "last_v": vals[-1],
            }
        )
    return out, late


def table(rows, zone):
    return pa.table(
        {
            "ts": pa.array([r[0] for r in rows], pa.int64()).cast(pa.timestamp("ms", tz=zone)),
            "k": pa.array([r[1] for r in rows], pa.int32()),
            "v": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def plain(out: pa.Table) -> list[dict]:
    """Window bounds as instants in ms."""
    out = out.set_column(
        out.schema.get_field_index("window_start"), "window_start", out["window_start"].cast(pa.int64())
    )
    out = out.set_column(
        out.schema.get_field_index("window_end"), "window_end", out["window_end"].cast(pa.int64())
    )
    return out.to_pylist()


@st.composite
def case(draw):
    zone = draw(st.sampled_from(ZONES))
    change = ms(draw(st.sampled_from(CHANGES[zone])))
    months = draw(st.integers(0, 3)) == 0
    if months:
        size, slide = draw(st.sampled_from([(MONTH, MONTH), (3 * MONTH, MONTH), (2 * MONTH, 2 * MONTH)]))
        offset = draw(st.sampled_from([0, 0, 6 * HOUR, DAY]))
    else:
        size, slide = draw(
            st.sampled_from(
                [(DAY, DAY), (2 * DAY, DAY), (7 * DAY, DAY), (7 * DAY, 7 * DAY), (2 * DAY, 2 * DAY)]
            )
        )
        offset = draw(st.sampled_from([0, 0, 6 * HOUR, -HOUR, 2 * HOUR + 30 * 60_000]))
    lateness = draw(st.one_of(st.none(), st.sampled_from([0, HOUR, 5 * HOUR])))
    span = (45 if months else 3) * DAY // 60_000
    row = st.tuples(
        st.integers(-span, span).map(lambda m: change + m * 60_000),
        st.integers(0, 2),
        st.integers(-50, 50),
    )
    rows = draw(st.lists(row, max_size=60))
    if lateness is not None and draw(st.booleans()):
        # Disorder within the bound: event order perturbed by a delay <= lateness (no row is late).
        delays = draw(st.lists(st.integers(0, lateness), min_size=len(rows), max_size=len(rows)))
        by_time = sorted(rows, key=lambda r: r[0])
        rows = [r for _, r in sorted(zip(delays, by_time, strict=True), key=lambda x: x[1][0] + x[0])]
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=4)))
    strategy = draw(st.sampled_from(STRATEGIES))
    return zone, size, slide, offset, lateness, rows, cuts, strategy, months


def query(zone, size, slide, offset, lateness, strategy="auto", months=False):
    return dict(
        time="ts",
        size=f"{size // MONTH}mo" if months else f"{size // HOUR}h",
        slide=f"{slide // MONTH}mo" if months else f"{slide // HOUR}h",
        offset=f"{offset // 60_000}m",
        tz=zone,
        by="k",
        aggs=AGGS,
        lateness=None if lateness is None else f"{lateness}ms",
        strategy=strategy,
        threads=2,
    )


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_every_engine_matches_a_zoneinfo_brute_force(c):
    zone, size, slide, offset, lateness, rows, cuts, strategy, months = c
    want, late = brute(rows, zone, size, slide, offset, lateness, months)
    q = query(zone, size, slide, offset, lateness, strategy, months)
    agg = windgate.WindowAggregator(**q)
    parts, start = [], 0
    for end in [*cuts, len(rows)]:
        parts.append(agg.push(table(rows[start:end], zone)))
        start = end
    parts.append(agg.flush())
    got = pa.Table.from_batches([p for p in parts if p.num_rows]) if any(p.num_rows for p in parts) else None
    assert (plain(got) if got is not None else []) == want
    assert agg.stats["late_rows"] == late
    batch = windgate.window_aggregate(table(rows, zone), **q)
    assert plain(batch) == want
    if got is not None:
        assert got.schema.field("window_start").type == pa.timestamp("ms", tz=zone)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_snapshot_restore_and_pickle_continue_exactly(c):
    zone, size, slide, offset, lateness, rows, cuts, strategy, months = c
    q = query(zone, size, slide, offset, lateness, strategy, months)
    whole = windgate.WindowAggregator(**q)
    again = windgate.WindowAggregator(**q)
    a, b, start = [], [], 0
    for i, end in enumerate([*cuts, len(rows)]):
        a.append(whole.push(table(rows[start:end], zone)))
        b.append(again.push(table(rows[start:end], zone)))
        start = end
        if i % 2:
            again = pickle.loads(pickle.dumps(again))
        else:
            again = windgate.WindowAggregator.restore(again.snapshot(), strategy="pane")
    a.append(whole.flush())
    b.append(again.flush())
    assert plain(pa.Table.from_batches(b)) == plain(pa.Table.from_batches(a))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_partial_states_merge_into_the_same_windows(c):
    zone, size, slide, offset, _, rows, cuts, _, months = c
    q = query(zone, size, slide, offset, None, months=months)
    whole = windgate.window_aggregate(table(rows, zone), **q)
    cut = cuts[0] if cuts else len(rows) // 2
    first = windgate.window_aggregate(table(rows[:cut], zone), output="partials", **q)
    second = windgate.window_aggregate(table(rows[cut:], zone), output="partials", row_offset=cut, **q)
    merged = windgate.window_aggregate([pa.concat_tables([second, first])], input="partials", **q)
    assert plain(merged) == plain(whole)


def test_the_update_mode_fires_local_days():
    zone = "Europe/Berlin"
    change = ms(CHANGES[zone][1])
    rows = [(change + m * 3_600_000, 0, m) for m in range(-30, 30, 3)]
    late_row = (change - 20 * HOUR, 0, 100)  # arrives last, within allowed_lateness of its day's end
    q = query(zone, DAY, DAY, 0, HOUR)
    agg = windgate.WindowAggregator(**q, allowed_lateness="2d")
    parts = [agg.push(table(rows, zone)), agg.push(table([late_row], zone)), agg.flush()]
    out = pa.Table.from_batches(parts)
    last = {}
    for r in plain(out):
        last[r["window_start"]] = r
    want, _ = brute([*rows, late_row], zone, DAY, DAY, 0)
    assert [{k: v for k, v in r.items() if k != "revision"} for r in last.values()] == want
    assert max(r["revision"] for r in last.values()) == 1


def test_days_of_23_and_25_hours_in_berlin():
    zone = "Europe/Berlin"
    t = pa.table(
        {
            "ts": pa.array(
                [ms("2024-03-31T12:00:00+00:00"), ms("2024-10-27T12:00:00+00:00")],
                pa.timestamp("ms", tz=zone),
            )
        }
    )
    out = windgate.window_aggregate(t, time="ts", size="1d", tz=zone, aggs={"*": "count"})
    lengths = [
        (e - s) // HOUR
        for s, e in zip(
            *(out[c].cast(pa.int64()).to_pylist() for c in ("window_start", "window_end")), strict=True
        )
    ]
    assert lengths == [23, 25]
    assert [str(v) for v in out["window_start"].to_pylist()] == [
        "2024-03-31 00:00:00+01:00",
        "2024-10-27 00:00:00+02:00",
    ]


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
@pytest.mark.parametrize("every", ["1d", "2d", "3d", "1w", "2w", "1mo", "3mo", "5mo"])
def test_the_same_windows_as_polars_group_by_dynamic(zone, every):
    pl = pytest.importorskip("polars")
    start = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    times = [start + dt.timedelta(minutes=37 * i) for i in range(0, 40_000, 7)]  # two years
    df = pl.DataFrame({"ts": times, "v": list(range(len(times)))}).with_columns(
        pl.col("ts").dt.cast_time_unit("ms").dt.convert_time_zone(zone)
    )
    want = (
        df.group_by_dynamic(
            "ts", every=every, period=every, closed="left", label="left", include_boundaries=True
        )
        .agg(pl.len().alias("count"), pl.col("v").sum().alias("sum_v"))
        .select(
            pl.col("_lower_boundary").alias("window_start"),
            pl.col("_upper_boundary").alias("window_end"),
            pl.col("count").cast(pl.Int64),
            "sum_v",
        )
    )
    got = windgate.window_aggregate(
        df.to_arrow(), time="ts", size=every, tz=zone, aggs={"*": "count", "v": "sum"}
    )
    assert pl.from_arrow(got).equals(want)


def test_windows_shorter_than_a_day_keep_the_utc_grid():
    t = pa.table({"ts": pa.array([0, 45 * 60_000, 3 * HOUR + 1], pa.timestamp("ms", tz="+05:30"))})
    q = dict(time="ts", size="1h", aggs={"*": "count"})
    assert windgate.window_aggregate(t, tz="Asia/Kolkata", **q).equals(windgate.window_aggregate(t, **q))


def test_tz_none_and_a_zoneinfo():
    t = pa.table({"ts": pa.array([ms("2024-10-27T12:00:00+00:00")], pa.timestamp("ms", tz="UTC"))})
    q = dict(time="ts", size="1d", aggs={"*": "count"})
    berlin = windgate.window_aggregate(t, tz=ZoneInfo("Europe/Berlin"), **q)
    assert berlin.equals(windgate.window_aggregate(t, tz="Europe/Berlin", **q))
    assert berlin["window_start"].cast(pa.int64()).to_pylist() == [ms("2024-10-26T22:00:00+00:00")]
    assert windgate.window_aggregate(t, tz=None, **q)["window_start"].cast(pa.int64()).to_pylist() == [
        ms("2024-10-27T00:00:00+00:00")
    ]


@pytest.mark.parametrize(
    ("kwargs", "column", "match"),
    [
        (
            {"tz": "Mars/Olympus", "size": "1d"},
            pa.timestamp("ms", tz="UTC"),
            r'^tz: unknown time zone "Mars/Olympus"',
        ),
        ({"tz": 5, "size": "1d"}, pa.timestamp("ms", tz="UTC"), "^tz: expected a time zone"),
        ({"tz": "UTC", "size": 10}, pa.int64(), "^tz: the time column 'ts' is Int64"),
        ({"tz": "UTC", "size": "1d"}, pa.timestamp("ms"), "^tz: .* without a zone"),
        ({"tz": "UTC", "size": "1d", "slide": "1h"}, pa.timestamp("ms", tz="UTC"), "^slide: with tz="),
        ({"tz": "UTC", "size": "36h"}, pa.timestamp("ms", tz="UTC"), "^size: with tz=.*got size 1d12h"),
        ({"tz": "UTC", "gap": "1h"}, pa.timestamp("ms", tz="UTC"), "^tz: session windows"),
        ({"tz": "UTC", "size": "1d", "strategy": "mq"}, pa.timestamp("ms", tz="UTC"), '^tz: strategy "mq"'),
    ],
)
def test_bad_parameters_name_them(kwargs, column, match):
    t = pa.table({"ts": pa.array([1, 2], pa.int64()).cast(column)})
    with pytest.raises(InvalidParameterError, match=match):
        windgate.window_aggregate(t, time="ts", aggs={"*": "count"}, **kwargs)
    if kwargs["tz"] == "Mars/Olympus":  # checked before any data
        with pytest.raises(InvalidParameterError, match=match):
            windgate.WindowAggregator(time="ts", aggs={"*": "count"}, **kwargs)


def test_the_command_line_takes_tz(tmp_path):
    import pyarrow.parquet as pq

    from windgate.cli import main

    zone = "Europe/Berlin"
    change = ms(CHANGES[zone][1])
    rows = [(change + m * 600_000, m % 3, m) for m in range(-400, 400, 7)]
    data, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(table(rows, zone), data)
    args = [
        "--time",
        "ts",
        "--size",
        "1d",
        "--by",
        "k",
        "--agg",
        "*=count",
        "--agg",
        "v=sum",
        "--lateness",
        "1h",
    ]
    assert main(["aggregate", "--input", str(data), "--out", str(out), "--tz", zone, *args]) == 0
    want = windgate.window_aggregate(
        table(rows, zone), time="ts", size="1d", by="k", aggs={"*": "count", "v": "sum"}, tz=zone
    )
    got = pq.read_table(out)
    assert got.equals(want.cast(got.schema))
    assert got["window_start"].cast(pa.int64()).to_pylist()[0] == ms("2024-10-23T22:00:00+00:00")


def test_months_need_a_zone_and_a_restore_keeps_tz():
    from windgate.errors import SnapshotMismatchError

    t = pa.table({"ts": pa.array([1, 2], pa.timestamp("ms", tz="UTC"))})
    q = dict(time="ts", aggs={"*": "count"})
    with pytest.raises(InvalidParameterError, match='^size: cannot read duration "1mo": calendar months'):
        windgate.window_aggregate(t, size="1mo", **q)
    with pytest.raises(InvalidParameterError, match="^slide: month windows"):
        windgate.window_aggregate(t, size="1mo", slide="1d", tz="UTC", **q)
    with pytest.raises(InvalidParameterError, match="^offset: month windows"):
        windgate.window_aggregate(t, size="1mo", offset="-1d", tz="UTC", **q)
    agg = windgate.WindowAggregator(size="3mo", tz="Europe/Berlin", lateness="1h", **q)
    agg.push(t)
    again = windgate.WindowAggregator.restore(agg.snapshot())
    assert again.flush().equals(agg.flush())
    agg = windgate.WindowAggregator(size="1d", tz="Europe/Berlin", lateness="1h", **q)
    agg.push(t)
    with pytest.raises(SnapshotMismatchError, match="^tz"):
        windgate.WindowAggregator.restore(agg.snapshot(), tz="UTC")


@pytest.mark.parametrize("size", ["1d", "1mo"])
def test_early_firings_end_in_the_final_windows(size):
    zone = "America/Santiago"
    change = ms(CHANGES[zone][1])
    rows = [(change + m * 3_600_000, m % 2, m) for m in range(-900, 900, 5)]
    q = dict(time="ts", size=size, tz=zone, by="k", aggs=AGGS, lateness="1h")
    agg = windgate.WindowAggregator(**q, emit="early", interval="6h")
    parts = [agg.push(table(rows[i : i + 40], zone)) for i in range(0, len(rows), 40)] + [agg.flush()]
    out = [r for r in plain(pa.Table.from_batches(parts)) if r.pop("final")]
    assert out == plain(windgate.window_aggregate(table(rows, zone), **q))
    assert len(out) > 2


def test_several_sources_merge_into_the_same_local_days():
    zone = "Europe/Berlin"
    change = ms(CHANGES[zone][1])
    rows = [(change + m * 600_000, m % 3, m) for m in range(-600, 600, 7)]
    q = dict(time="ts", size="1d", tz=zone, by="k", aggs={"*": "count", "v": "sum"})
    agg = windgate.WindowAggregator(**q, sources=2)
    parts = []
    for i in range(0, len(rows), 30):
        parts.append(agg.push(table(rows[i : i + 30 : 2], zone), 0))
        parts.append(agg.push(table(rows[i + 1 : i + 30 : 2], zone), 1))
    parts.append(agg.flush())
    got = pa.Table.from_batches([p for p in parts if p.num_rows])
    assert plain(got) == plain(windgate.window_aggregate(table(rows, zone), **q))
    assert sum(p.num_rows for p in parts[:-1]) > 0  # days closed before the end
