"""Synthetic data sets shaped like the public streams of the papers windgate implements.

:func:`smartgrid` models the smart-plug data of the DEBS 2014 Grand Challenge (the "Energy Consumption" data
of Cederman et al., *Efficient data streaming multiway aggregation through concurrent algorithmic designs and
new abstract data types*): every plug of every household reports, at regular intervals, two measurements with
the same timestamp: ``work`` (property 0, cumulative energy in kWh, never decreasing per plug) and ``load``
(property 1, current power in W, positive, with a per-plug level drawn from a skewed distribution and a
daily cycle). :func:`smartgrid_sources` splits the same rows into several time-sorted sources, as the
data concentrators of Cederman et al. do. :func:`soundcloud` makes their other data set, comments on songs
(40,000 songs, Zipf-skewed, some comments holding an e-mail address or an IP), and :func:`soundcloud_sources`
splits it into time-sorted sources. :func:`bandjoin` makes the two streams of the band-join benchmark of
Gulisano et al., *ScaleJoin: a Deterministic, Disjoint-Parallel and Skew-Resilient Stream Join* (from
CellJoin): R = <ts, x, y, z> and S = <ts, a, b, c, d> with uniform join attributes.

Only numpy and pyarrow are used (no windgate extension), so the module can generate data before the engine
is built. Everything is vectorised: 10 M rows take about a second.

>>> from windgate.datasets import smartgrid
>>> t = smartgrid(10_000, seed=1)
>>> t.num_rows, t.column_names
(10000, ['ts', 'house_id', 'household_id', 'plug_id', 'property', 'value'])
>>> len(set(t["plug_id"].to_pylist())), int(t["plug_id"].to_numpy().max()) < 40 * 25
(1000, True)
"""

from __future__ import annotations

import datetime as _dt
import math

import numpy as np
import pyarrow as pa

from .bursty import arrival_times
from .errors import ColumnTypeError, InvalidParameterError

__all__ = [
    "BANDJOIN_R_SCHEMA",
    "BANDJOIN_S_SCHEMA",
    "POINT_DISTRIBUTIONS",
    "EMAIL_REGEX",
    "IP_REGEX",
    "SMARTGRID_SCHEMA",
    "SOUNDCLOUD_SCHEMA",
    "bandjoin",
    "points",
    "smartgrid",
    "smartgrid_sources",
    "soundcloud",
    "soundcloud_sources",
]

#: Schema of :func:`smartgrid` tables.
SMARTGRID_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("house_id", pa.int32(), nullable=False),
        pa.field("household_id", pa.int32(), nullable=False),
        pa.field("plug_id", pa.int32(), nullable=False),
        pa.field("property", pa.int8(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
    ]
)

#: Schema of the left (R) table of :func:`bandjoin`.
BANDJOIN_R_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("x", pa.int32(), nullable=False),
        pa.field("y", pa.float32(), nullable=False),
        pa.field("z", pa.string(), nullable=False),
    ]
)

#: Schema of the right (S) table of :func:`bandjoin`.
BANDJOIN_S_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("a", pa.int32(), nullable=False),
        pa.field("b", pa.float32(), nullable=False),
        pa.field("c", pa.float64(), nullable=False),
        pa.field("d", pa.bool_(), nullable=False),
    ]
)

#: Schema of :func:`soundcloud` tables.
SOUNDCLOUD_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("user", pa.int64(), nullable=False),
        pa.field("song", pa.int32(), nullable=False),
        pa.field("comment", pa.string(), nullable=False),
    ]
)

#: The e-mail pattern of the f queries of Cederman et al. Plain syntax that RE2 (``pyarrow.compute``) and
#: Java (Spark's ``rlike``) read alike.
EMAIL_REGEX = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
#: The IP pattern of the F queries of Cederman et al. (an e-mail or this): a dotted quad, octets not
#: range-checked.
IP_REGEX = r"\b(?:\d{1,3}\.){3}\d{1,3}\b"

_MS_PER_DAY = 86_400_000


def _start_ms(start: str | _dt.datetime | _dt.date | np.datetime64 | int) -> int:
    """Epoch milliseconds (UTC) of ``start``: an ISO string, a datetime (naive = UTC), a date, a
    ``numpy.datetime64`` or an int (already epoch milliseconds)."""
    if isinstance(start, bool):
        raise ColumnTypeError("start: expected an ISO date/time string, a datetime or epoch milliseconds")
    if isinstance(start, int | np.integer):
        return int(start)
    if isinstance(start, _dt.datetime):
        if start.tzinfo is not None:
            start = start.astimezone(_dt.UTC).replace(tzinfo=None)
        return int(np.datetime64(start, "ms").astype(np.int64))
    if isinstance(start, str):
        text = start.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1]
        try:
            parsed = _dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidParameterError(f"start: cannot read {start!r} as an ISO date/time") from exc
        return _start_ms(parsed)
    if isinstance(start, _dt.date | np.datetime64):
        return int(np.datetime64(start, "ms").astype(np.int64))
    raise ColumnTypeError(
        f"start: expected an ISO date/time string, a datetime or epoch milliseconds, got {start!r}"
    )


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidParameterError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def _check_rows(rows: object) -> int:
    rows = int(rows)
    if rows < 0:
        raise InvalidParameterError(f"rows: expected a non-negative integer, got {rows!r}")
    return rows


def _check_rate(rate: object, unit: str) -> float:
    if isinstance(rate, bool) or not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise InvalidParameterError(f"rate: expected a positive number of rows per {unit}, got {rate!r}")
    return float(rate)


def _check_disorder(disorder: object, unit: str) -> float:
    if isinstance(disorder, bool) or not (
        isinstance(disorder, int | float) and math.isfinite(disorder) and disorder >= 0
    ):
        raise InvalidParameterError(f"disorder: expected a non-negative number of {unit}, got {disorder!r}")
    return float(disorder)


def _arrival_order(ts: np.ndarray, disorder: float, rng: np.random.Generator) -> np.ndarray | None:
    """The order in which rows with event times ``ts`` (non-decreasing) arrive when each is delayed by a
    uniform ``[0, disorder)`` (in ``ts`` units, resolved to 1e-6 of a unit); None when nothing moves. A stable
    sort keeps event order on ties; nearly sorted input makes it fast."""
    if disorder <= 0 or ts.size < 2:
        return None
    arrival = ts - ts.min()  # relative, so that epoch-scale times do not overflow
    arrival *= 1_000_000
    arrival += rng.integers(0, max(int(round(disorder * 1e6)), 1), size=ts.size, dtype=np.int64)
    return np.argsort(arrival, kind="stable")


def smartgrid(
    rows: int,
    *,
    households: int = 40,
    houses: int | None = None,
    plugs_per_household: int = 25,
    rate: float = 1000.0,
    start: str | _dt.datetime | _dt.date | np.datetime64 | int = "2013-09-01T00:00:00",
    disorder: float = 0.0,
    seed: int = 0,
    batch_rows: int | None = None,
    dispersion: float | None = None,
) -> pa.Table:
    """Smart-plug readings shaped like the DEBS 2014 Grand Challenge data, as a :class:`pyarrow.Table`.

    Columns (see :data:`SMARTGRID_SCHEMA`):

    ``ts`` (``timestamp[ms, tz=UTC]``)
        Event time. Readings come at ``rate`` rows per second of event time: reading ``r`` (rows ``2r`` and
        ``2r + 1``) gets ``start + floor((r + u) * 2000 / rate)`` ms with ``u`` uniform in ``[0, 1)``, so the
        times are jittered but never decrease in row order. With ``dispersion`` set, reading times are
        instead ``start + floor(1000 * a_r)`` ms with ``a_r`` from :func:`windgate.bursty.arrival_times`
        (``rate / 2`` readings per second, index of dispersion ``dispersion``): the same mean rate, in
        bursts; still non-decreasing in row order, and both rows of a reading still share ``ts``.
    ``house_id``, ``household_id``, ``plug_id`` (``int32``)
        Global ids: ``households * plugs_per_household`` plugs (default 1000, the key users group by); plug
        ``p`` belongs to household ``p // plugs_per_household``; household ``h`` lives in house
        ``h * houses // households``. ``houses`` defaults to ``max(1, households // 4)``.
    ``property`` (``int8``)
        0 = work (cumulative kWh), 1 = load (W). Each reading is a work row followed by a load row with the
        same ``ts`` and plug, as in the DEBS 2014 files.
    ``value`` (``float64``)
        Load: positive, ``base_plug * (1 + 0.5 sin(daily phase)) * noise`` with ``base_plug`` log-normal
        (median 40 W, sigma 1, so a few plugs draw most of the power) and log-normal noise, rounded to mW.
        Work: a per-plug starting meter reading plus the energy of the loads reported so far, rounded to Wh
        (monotone per plug). Each load counts for the plug's report interval: the nominal one for regular
        arrivals, the actual time since the plug's previous reading with ``dispersion``.

    Plugs report round-robin in a fixed shuffled order, so all keys are equally frequent (each plug reports
    every ``households * plugs_per_household * 2 / rate`` seconds).

    ``disorder`` (seconds, default 0 = rows in event-time order): each row gets an arrival delay uniform in
    ``[0, disorder)`` and the rows are returned in arrival order (ties keep event order). A row then arrives
    less than ``disorder`` seconds of event time after the largest timestamp seen so far, so
    ``lateness=f"{disorder}s"`` drops nothing.

    ``dispersion`` (default ``None`` = the regular arrivals above): the index of dispersion of the reading
    arrivals, ``Var(N_t) / E[N_t]`` for large ``t`` (see :mod:`windgate.bursty`): 1 gives Poisson arrivals,
    thousands give bursts (Mencagli et al. 2017 use 1000, 2500, 6000). Keys still report round-robin, so a
    burst raises the rate of every plug at once.

    ``batch_rows`` splits the table into record batches (chunks) of that many rows; the rows do not depend on
    it. The result is deterministic for a ``seed`` and the other arguments.

    >>> from windgate.datasets import smartgrid
    >>> t = smartgrid(4, households=1, plugs_per_household=2, rate=2.0, seed=3)
    >>> t.column("property").to_pylist()
    [0, 1, 0, 1]
    >>> t.column("ts").to_pylist()[0].isoformat()
    '2013-09-01T00:00:00.357000+00:00'
    >>> smartgrid(1000, disorder=2.0).num_rows
    1000
    """
    rows = _check_rows(rows)
    households = _check_positive_int("households", households)
    plugs_per_household = _check_positive_int("plugs_per_household", plugs_per_household)
    houses = max(1, households // 4) if houses is None else _check_positive_int("houses", houses)
    if houses > households:
        raise InvalidParameterError(f"houses: expected at most households={households}, got {houses}")
    rate = _check_rate(rate, "second")
    disorder = _check_disorder(disorder, "seconds")
    if batch_rows is not None:
        batch_rows = _check_positive_int("batch_rows", batch_rows)
    if dispersion is not None and not (
        isinstance(dispersion, int | float)
        and not isinstance(dispersion, bool)
        and math.isfinite(dispersion)
        and dispersion >= 1
    ):
        raise InvalidParameterError(f"dispersion: expected None or a number >= 1, got {dispersion!r}")
    start_ms = _start_ms(start)

    n_plugs = households * plugs_per_household
    n_readings = (rows + 1) // 2
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED_D0E5]))

    # Per plug: report slot in the round-robin cycle, load level, initial meter reading.
    slot_plug = rng.permutation(n_plugs).astype(np.int32)  # slot s of each cycle is plug slot_plug[s]
    base_w = rng.lognormal(mean=math.log(40.0), sigma=1.0, size=n_plugs)
    work0_kwh = rng.uniform(0.0, 5_000.0, size=n_plugs)
    phase = rng.uniform(0.0, 2 * math.pi, size=n_plugs)

    reading_ms = 2000.0 / rate
    if dispersion is None:
        # Event times of the readings, jittered inside their slot so they never decrease.
        r = np.arange(n_readings, dtype=np.float64)
        r += rng.random(n_readings)
        r *= reading_ms
        ts_reading = np.floor(r).astype(np.int64)
        del r
    else:
        # Bursty event times: a MAP(2) trace at the same mean rate of readings (seconds -> ms, floored, so
        # still non-decreasing). Its seed comes from rng, so the table stays a function of `seed`.
        r = arrival_times(
            n_readings, rate=rate / 2.0, dispersion=float(dispersion), seed=int(rng.integers(1 << 63))
        )
        r *= 1000.0
        ts_reading = np.floor(r).astype(np.int64)
        del r
    ts_reading += start_ms

    cycles = -(-n_readings // n_plugs)
    plug_reading = np.tile(slot_plug, cycles)[:n_readings]  # reading i comes from plug slot_plug[i % n_plugs]

    # Load: skewed per-plug level, daily cycle, multiplicative noise; rounded to mW (always > 0).
    day_frac = ((ts_reading - start_ms) % _MS_PER_DAY).astype(np.float64)
    day_frac *= 2 * math.pi / _MS_PER_DAY
    day_frac += phase[plug_reading]
    load = np.sin(day_frac, out=day_frac)
    load *= 0.5
    load += 1.0
    load *= base_w[plug_reading]
    load *= rng.lognormal(mean=0.0, sigma=0.25, size=n_readings)
    np.round(load, 3, out=load)
    np.maximum(load, 0.001, out=load)

    # Work: cumulative energy per plug. Readings of a plug sit n_plugs apart, so a (cycles, n_plugs) matrix
    # holds each plug's readings in one column and a cumulative sum down the columns integrates the load.
    energy = np.zeros(cycles * n_plugs, dtype=np.float64)
    energy[:n_readings] = load
    if dispersion is None:
        energy *= reading_ms * n_plugs / 3_600_000_000.0  # W * ms -> kWh over the plug's report interval
    else:
        # Bursty: the plug's actual interval, ms since its previous reading (the nominal one for its first).
        interval_ms = np.full(n_readings, reading_ms * n_plugs)
        interval_ms[n_plugs:] = ts_reading[n_plugs:] - ts_reading[:-n_plugs]
        energy[:n_readings] *= interval_ms
        energy /= 3_600_000_000.0
        del interval_ms
    energy = energy.reshape(cycles, n_plugs)
    np.cumsum(energy, axis=0, out=energy)
    energy += work0_kwh[slot_plug]
    work = energy.reshape(-1)[:n_readings]
    work = np.round(work, 3)
    del energy

    # Interleave: row 2i = work of reading i, row 2i + 1 = load of reading i; then cut to `rows`.
    ts = np.repeat(ts_reading, 2)[:rows]
    plug = np.repeat(plug_reading, 2)[:rows]
    value = np.empty(2 * n_readings, dtype=np.float64)
    value[0::2] = work
    value[1::2] = load
    value = value[:rows]
    prop = np.tile(np.array([0, 1], dtype=np.int8), n_readings)[:rows]
    del ts_reading, plug_reading, load, work

    if disorder > 0 and rows > 1:
        # Arrival = event time + delay, in integer microseconds; a stable sort keeps event order on ties.
        # Rows arrive nearly sorted, which the stable (timsort/radix) sort handles quickly.
        max_delay_us = int(round(disorder * 1e6))
        arrival = ts * 1000
        arrival += rng.integers(0, max(max_delay_us, 1), size=rows, dtype=np.int64)
        order = np.argsort(arrival, kind="stable")
        del arrival
        ts = ts[order]
        plug = plug[order]
        value = value[order]
        prop = prop[order]
        del order

    household = (plug // plugs_per_household).astype(np.int32)
    house = (household.astype(np.int64) * houses // households).astype(np.int32)

    table = pa.Table.from_arrays(
        [
            pa.array(ts, type=pa.int64()).cast(SMARTGRID_SCHEMA.field("ts").type),
            pa.array(house, type=pa.int32()),
            pa.array(household, type=pa.int32()),
            pa.array(plug, type=pa.int32()),
            pa.array(prop, type=pa.int8()),
            pa.array(value, type=pa.float64()),
        ],
        schema=SMARTGRID_SCHEMA,
    )
    if batch_rows is not None and rows > 0:
        table = pa.Table.from_batches(table.to_batches(max_chunksize=batch_rows), schema=SMARTGRID_SCHEMA)
    return table


def smartgrid_sources(rows: int, *, sources: int, **kwargs) -> list[pa.Table]:
    """The rows of :func:`smartgrid` (same arguments) split into ``sources`` tables by plug, round-robin.

    Plug ``p`` goes to source ``p % sources``, so each plug (key) lives in exactly one source, and each
    source is sorted by ``ts`` (a stable sort, so ties keep their order in :func:`smartgrid`'s output). With
    ``disorder=0`` every source is a subsequence of the single-stream table. Together the sources hold exactly
    the ``rows`` rows of ``smartgrid(rows, ...)``; a source may be empty when there are fewer plugs than
    sources.

    >>> from windgate.datasets import smartgrid_sources
    >>> parts = smartgrid_sources(10_000, sources=3, seed=1)
    >>> [p.num_rows for p in parts], sum(p.num_rows for p in parts)
    ([3340, 3330, 3330], 10000)
    >>> all(set(p["plug_id"].to_numpy() % 3) == {i} for i, p in enumerate(parts))
    True
    """
    sources = _check_positive_int("sources", sources)
    batch_rows = kwargs.pop("batch_rows", None)
    table = smartgrid(rows, **kwargs)
    plug = table.column("plug_id").to_numpy()
    ts = table.column("ts").cast(pa.int64()).to_numpy()
    source_of_row = (plug % sources).astype(np.int16 if sources <= np.iinfo(np.int16).max else np.int64)
    # One stable sort by (source, ts) and a split, instead of one filter and sort per source: a stable sort by
    # ts (skipped when already sorted; timsort when nearly sorted), then a stable (radix) sort by source.
    if ts.size and bool(np.all(ts[1:] >= ts[:-1])):
        order = np.arange(ts.size)
    else:
        order = np.argsort(ts, kind="stable")
    order = order[np.argsort(source_of_row[order], kind="stable")]
    bounds = np.searchsorted(source_of_row[order], np.arange(sources + 1), side="left")
    out = []
    for i in range(sources):
        part = table.take(pa.array(order[bounds[i] : bounds[i + 1]]))
        part = part.combine_chunks()
        if batch_rows is not None and part.num_rows > 0:
            part = pa.Table.from_batches(part.to_batches(max_chunksize=int(batch_rows)), schema=table.schema)
        out.append(part)
    return out


# ----------------------------------------------------------------------------------------------- soundcloud

#: Words of the synthetic comments: lower-case letters only, so no word matches EMAIL_REGEX or IP_REGEX.
_WORD_TEXT = """
love this track song beat drop bass vocals mix remix sound amazing awesome great nice cool fire sick
dope chill vibe vibes wow omg yes so much more please upload again next part when where who what the
a an and or but is it that my your our best ever never heard before playing repeat loop all day
night summer winter follow me check out new album release live show tour guitar piano drums synth
melody lyrics voice intro outro break build perfect favorite banger classic wait for till here there
"""
_WORDS = tuple(_WORD_TEXT.split())
_MAIL_DOMAINS = ("gmail.com", "yahoo.com", "hotmail.com", "outlook.com", "mail.ru", "web.de", "proton.me")
_POOL_SIZE = 1024  # distinct e-mail addresses and IPs the comments draw from
_COMMENT_CHUNK = 1 << 16  # rows per generated string chunk (fixed: the rows do not depend on anything else)
_MIN_WORDS, _MAX_WORDS = 4, 30  # tokens per comment: about 20 to 200 characters


def _comment_pool() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tokens comments are made of, each with a trailing space: the words, then ``_POOL_SIZE`` e-mail
    addresses, then ``_POOL_SIZE`` dotted quads. Returns (bytes, start of each token, length of each
    token with its space). A constant: drawn from a fixed seed."""
    rng = np.random.default_rng(0x5C_0DE)
    words = np.array(_WORDS)
    mails = [
        f"{a}.{b}{'' if n < 0 else n}@{_MAIL_DOMAINS[d]}"
        for a, b, n, d in zip(
            words[rng.integers(0, words.size, _POOL_SIZE)],
            words[rng.integers(0, words.size, _POOL_SIZE)],
            rng.integers(-50, 100, _POOL_SIZE),
            rng.integers(0, len(_MAIL_DOMAINS), _POOL_SIZE),
            strict=True,
        )
    ]
    quads = np.concatenate(
        [rng.integers(1, 224, (_POOL_SIZE, 1)), rng.integers(0, 256, (_POOL_SIZE, 3))], axis=1
    )
    ips = [".".join(map(str, q)) for q in quads.tolist()]
    tokens = [f"{t} ".encode() for t in (*_WORDS, *mails, *ips)]
    length = np.array([len(t) for t in tokens], dtype=np.int64)
    start = np.cumsum(length) - length
    return np.frombuffer(b"".join(tokens), dtype=np.uint8), start, length


def _comments(rows: int, p_mail: float, p_ip: float, rng: np.random.Generator) -> pa.ChunkedArray:
    """``rows`` comments of ``_MIN_WORDS`` to ``_MAX_WORDS`` words; with probability ``p_mail`` one word is
    replaced by an e-mail address and (independently) with probability ``p_ip`` another by an IP. Built
    from Arrow buffers, ``_COMMENT_CHUNK`` rows at a time (one gather of the token bytes per chunk)."""
    buf, start, length = _comment_pool()
    n_words = len(_WORDS)
    chunks = []
    for lo in range(0, max(rows, 1), _COMMENT_CHUNK):
        m = min(rows - lo, _COMMENT_CHUNK)
        nw = rng.integers(_MIN_WORDS, _MAX_WORDS + 1, size=m)
        first = np.cumsum(nw) - nw  # index of each row's first token
        tok = rng.integers(0, n_words, size=int(nw.sum()))
        mail = np.flatnonzero(rng.random(m) < p_mail)
        mail_pos = rng.integers(0, nw[mail])
        tok[first[mail] + mail_pos] = n_words + rng.integers(0, _POOL_SIZE, mail.size)
        ip = np.flatnonzero(rng.random(m) < p_ip)
        ip_pos = rng.integers(0, nw[ip])
        taken = np.full(m, -1)
        taken[mail] = mail_pos
        clash = taken[ip] == ip_pos  # the row's e-mail is there: use the next word
        ip_pos[clash] = (ip_pos[clash] + 1) % nw[ip][clash]
        tok[first[ip] + ip_pos] = n_words + _POOL_SIZE + rng.integers(0, _POOL_SIZE, ip.size)
        copy = length[tok]
        copy[first + nw - 1] -= 1  # no space after a row's last token
        out_start = np.cumsum(copy) - copy
        total = int(copy.sum())
        gather = np.repeat(start[tok] - out_start, copy)
        gather += np.arange(total)
        offsets = np.append(out_start[first], total).astype(np.int32)
        chunks.append(pa.StringArray.from_buffers(m, pa.py_buffer(offsets), pa.py_buffer(buf[gather])))
    return pa.chunked_array(chunks, type=pa.string())


def _zipf(n: int, s: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws from ``0..n-1`` with P(rank k) proportional to ``(k + 1) ** -s`` (s = 0: uniform),
    the ranks then renamed by a random permutation so that popular ids are spread over the id range."""
    if s == 0:
        ranks = rng.integers(0, n, size=size)
    else:
        cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -s)
        cdf /= cdf[-1]
        ranks = np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), n - 1)
    return rng.permutation(n)[ranks]


def _check_probability(name: str, value: object) -> float:
    if isinstance(value, bool) or not (isinstance(value, int | float) and 0 <= value <= 1):
        raise InvalidParameterError(f"{name}: expected a probability in [0, 1], got {value!r}")
    return float(value)


def _check_skew(name: str, value: object) -> float:
    if isinstance(value, bool) or not (
        isinstance(value, int | float) and math.isfinite(value) and value >= 0
    ):
        raise InvalidParameterError(f"{name}: expected a Zipf exponent >= 0, got {value!r}")
    return float(value)


def soundcloud(
    rows: int,
    *,
    songs: int = 40_000,
    users: int = 100_000,
    song_skew: float = 1.0,
    user_skew: float = 0.8,
    rate: float = 1000.0,
    p_mail: float = 0.02,
    p_ip: float = 0.01,
    start: int = 0,
    seed: int = 0,
) -> pa.Table:
    """Comments on songs shaped like the SoundCloud data of Cederman et al., as a :class:`pyarrow.Table`
    in time order.

    Columns (see :data:`SOUNDCLOUD_SCHEMA`):

    ``ts`` (``int64``)
        Event time in abstract ticks: Poisson arrivals at ``rate`` comments per tick, floored to whole ticks
        (so about ``rate`` rows share each tick), starting at ``start``; never decreasing in row order.
    ``id`` (``int64``)
        The row's position, ``0..rows-1``: a global sequence number (the order of the single stream).
    ``user`` (``int64``), ``song`` (``int32``)
        Zipf-distributed: ``song`` over ``songs`` ids (exponent ``song_skew``, 1.0 by default: the top song
        gets about 9% of the comments of 40,000, half the songs share under 10%), ``user`` over ``users``
        ids (exponent ``user_skew``); popular ids are spread over the range by a random permutation.
    ``comment`` (``string``)
        4 to 30 lower-case words (about 20 to 200 characters). With probability ``p_mail`` one word is an
        e-mail address (matches :data:`EMAIL_REGEX`) and, independently, with probability ``p_ip`` another
        is a dotted quad (matches :data:`IP_REGEX`); the words themselves match neither.

    Deterministic for a ``seed`` and the other arguments.

    >>> from windgate.datasets import soundcloud, EMAIL_REGEX
    >>> t = soundcloud(10_000, songs=500, seed=1)
    >>> t.column_names, t.num_rows
    (['ts', 'id', 'user', 'song', 'comment'], 10000)
    >>> import pyarrow.compute as pc
    >>> 150 < pc.sum(pc.match_substring_regex(t["comment"], EMAIL_REGEX).cast("int64")).as_py() < 250
    True
    """
    rows = _check_rows(rows)
    songs = _check_positive_int("songs", songs)
    users = _check_positive_int("users", users)
    song_skew = _check_skew("song_skew", song_skew)
    user_skew = _check_skew("user_skew", user_skew)
    rate = _check_rate(rate, "tick")
    p_mail = _check_probability("p_mail", p_mail)
    p_ip = _check_probability("p_ip", p_ip)
    if isinstance(start, bool) or not isinstance(start, int | np.integer):
        raise ColumnTypeError(f"start: expected an int (ticks), got {start!r}")
    start = int(start)
    if rows and not (abs(start) < 2**62 and 2 * rows / rate < 2**62):
        raise InvalidParameterError(f"start: {start} puts the times outside int64")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x50_C10D]))
    gaps = rng.exponential(1.0 / rate, size=rows)
    ts = np.floor(np.cumsum(gaps, out=gaps)).astype(np.int64)
    ts += start
    song = _zipf(songs, song_skew, rows, rng).astype(np.int32)
    user = _zipf(users, user_skew, rows, rng).astype(np.int64)
    comment = _comments(rows, p_mail, p_ip, rng)
    return pa.Table.from_arrays(
        [
            pa.array(ts, pa.int64()),
            pa.array(np.arange(rows, dtype=np.int64)),
            pa.array(user),
            pa.array(song),
            comment,
        ],
        schema=SOUNDCLOUD_SCHEMA,
    )


def soundcloud_sources(rows: int, *, sources: int, split: str = "row", **kwargs) -> list[pa.Table]:
    """The rows of :func:`soundcloud` (same keyword arguments) split into ``sources`` time-sorted tables.

    ``split="row"`` (default): row ``i`` goes to source ``i % sources`` (round-robin: equal rates, every
    song on every source, ties in ``ts`` across sources). ``split="user"``: a user's comments all go to
    source ``user % sources`` (user ids are a random permutation of popularity ranks), so the sources' rates
    differ with the Zipf-skewed users, as shards keyed by user would. Each source is a subsequence of the
    single table, so it is sorted by ``ts``, and together the sources hold its ``rows`` rows (``id`` tells
    where each row was).

    >>> from windgate.datasets import soundcloud_sources
    >>> parts = soundcloud_sources(10_000, sources=3, songs=500, seed=1)
    >>> [p.num_rows for p in parts]
    [3334, 3333, 3333]
    >>> import numpy as np
    >>> all(bool(np.all(np.diff(p["ts"].to_numpy()) >= 0)) for p in parts)
    True
    """
    sources = _check_positive_int("sources", sources)
    if split not in ("row", "user"):
        raise InvalidParameterError(f"split: expected 'row' or 'user', got {split!r}")
    table = soundcloud(rows, **kwargs)
    if split == "row":
        which = np.arange(table.num_rows) % sources
    else:
        which = table.column("user").to_numpy() % sources
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(sources + 1), side="left")
    return [table.take(pa.array(order[bounds[i] : bounds[i + 1]])).combine_chunks() for i in range(sources)]


_Z_ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
_Z_LEN = 20


def _random_strings(n: int, rng: np.random.Generator) -> pa.Array | pa.ChunkedArray:
    """``n`` random strings of ``_Z_LEN`` letters and digits, built straight from Arrow buffers (chunks of at
    most 2**24 strings, so int32 offsets never overflow)."""
    chunks = []
    for lo in range(0, max(n, 1), 1 << 24):
        m = min(n - lo, 1 << 24)
        data = _Z_ALPHABET[rng.integers(0, _Z_ALPHABET.size, size=m * _Z_LEN, dtype=np.uint8)]
        offsets = np.arange(0, (m + 1) * _Z_LEN, _Z_LEN, dtype=np.int32)
        chunks.append(pa.StringArray.from_buffers(m, pa.py_buffer(offsets), pa.py_buffer(data)))
    return chunks[0] if len(chunks) == 1 else pa.chunked_array(chunks, type=pa.string())


def _band_times(rows: int, rate: float, start: int, rng: np.random.Generator) -> np.ndarray:
    """``start + floor((i + u_i) / rate)`` for row ``i``, ``u_i`` uniform in ``[0, 1)``: ``rate`` rows per
    time unit, jittered, never decreasing."""
    t = np.arange(rows, dtype=np.float64)
    t += rng.random(rows)
    t /= rate
    ts = np.floor(t).astype(np.int64)
    ts += start
    return ts


def bandjoin(
    rows: int,
    *,
    rate: float = 100.0,
    seed: int = 0,
    disorder: float = 0,
    start: int = 0,
) -> tuple[pa.Table, pa.Table]:
    """The two streams of ScaleJoin's band-join benchmark (Gulisano et al.; the data of CellJoin): ``(R, S)``,
    each a :class:`pyarrow.Table` of ``rows`` rows.

    ``R`` (left, :data:`BANDJOIN_R_SCHEMA`): ``ts`` (``int64``), ``x`` (``int32``, uniform on
    ``[1, 10000]``), ``y`` (``float32``, uniform on ``[1, 10000]``), ``z`` (``string``, 20 random letters and
    digits).

    ``S`` (right, :data:`BANDJOIN_S_SCHEMA`): ``ts`` (``int64``), ``a`` (``int32``, uniform on
    ``[1, 10000]``), ``b`` (``float32``, uniform on ``[1, 10000]``), ``c`` (``float64``, uniform on
    ``[0, 1)``), ``d`` (``bool``, fair coin).

    The benchmark predicate is ``|x - a| <= 10 and |y - b| <= 10``: about 1 in 250,000 pairs (21/10**4 times
    20/10**4) match. ``ts`` is in plain time units: each side has ``rate`` rows per time unit, row ``i`` at
    ``start + floor((i + u) / rate)`` with ``u`` uniform in ``[0, 1)``, so the times are jittered but never
    decrease in row order. With a window of ``w`` units a left row meets about ``(2w + 1) * rate`` right rows
    in the time band: 100,000 rows a side, ``rate=100`` and ``w=100`` give about 2 G candidate pairs.

    ``disorder`` (time units, default 0 = rows in ``ts`` order): each row gets an arrival delay uniform in
    ``[0, disorder)`` and each table is returned in arrival order (ties keep ``ts`` order). A row then arrives
    less than ``disorder`` units after the largest ``ts`` seen so far on its side, so ``lateness=disorder``
    drops nothing.

    The two sides use independent random streams; the result is deterministic for a ``seed`` and the other
    arguments.

    >>> from windgate.datasets import bandjoin
    >>> r, s = bandjoin(1000, rate=10.0, seed=1)
    >>> r.column_names, s.column_names
    (['ts', 'x', 'y', 'z'], ['ts', 'a', 'b', 'c', 'd'])
    >>> r.num_rows, s.num_rows, r["ts"][0].as_py(), r["ts"][999].as_py(), len(r["z"][0].as_py())
    (1000, 1000, 0, 99, 20)
    >>> r2, _ = bandjoin(1000, rate=10.0, seed=1, disorder=5)
    >>> sorted(r2["ts"].to_pylist()) == r["ts"].to_pylist()
    True
    """
    rows = _check_rows(rows)
    rate = _check_rate(rate, "time unit")
    disorder = _check_disorder(disorder, "time units")
    if isinstance(start, bool) or not isinstance(start, int | np.integer):
        raise ColumnTypeError(f"start: expected an int (time units), got {start!r}")
    start = int(start)
    if rows and not (abs(start) < 2**62 and rows / rate < 2**62):
        raise InvalidParameterError(f"start: {start} puts the times outside int64")
    if disorder > 0 and (rows / rate + disorder) * 1e6 >= 2**62:
        raise InvalidParameterError(
            f"disorder: arrivals are resolved to 1e-6 time units, and {rows:,} rows at rate {rate:g} span "
            "too many units for that; use a larger rate"
        )

    r_rng, s_rng = (
        np.random.default_rng(child) for child in np.random.SeedSequence([int(seed), 0xBA2D_5CA1]).spawn(2)
    )

    r_ts = _band_times(rows, rate, start, r_rng)
    x = r_rng.integers(1, 10_001, size=rows, dtype=np.int32)
    y = r_rng.uniform(1.0, 10_000.0, size=rows).astype(np.float32)
    z = _random_strings(rows, r_rng)
    if (order := _arrival_order(r_ts, disorder, r_rng)) is not None:
        r_ts, x, y, z = r_ts[order], x[order], y[order], z.take(order)
    left = pa.Table.from_arrays(
        [pa.array(r_ts, pa.int64()), pa.array(x, pa.int32()), pa.array(y, pa.float32()), z],
        schema=BANDJOIN_R_SCHEMA,
    )

    s_ts = _band_times(rows, rate, start, s_rng)
    a = s_rng.integers(1, 10_001, size=rows, dtype=np.int32)
    b = s_rng.uniform(1.0, 10_000.0, size=rows).astype(np.float32)
    c = s_rng.random(rows)
    d = s_rng.random(rows) < 0.5
    if (order := _arrival_order(s_ts, disorder, s_rng)) is not None:
        s_ts, a, b, c, d = s_ts[order], a[order], b[order], c[order], d[order]
    right = pa.Table.from_arrays(
        [
            pa.array(s_ts, pa.int64()),
            pa.array(a, pa.int32()),
            pa.array(b, pa.float32()),
            pa.array(c, pa.float64()),
            pa.array(d, pa.bool_()),
        ],
        schema=BANDJOIN_S_SCHEMA,
    )
    return left, right


#: The point distributions of :func:`points` (Mencagli et al. 2017, Section 4.3.2).
POINT_DISTRIBUTIONS = ("independent", "correlated", "anticorrelated")


def points(
    rows: int,
    *,
    dims: int = 2,
    distribution: str = "independent",
    correlation: float | None = None,
    rate: float = 1000.0,
    dispersion: float | None = None,
    disorder: float = 0.0,
    start: str | _dt.datetime | _dt.date | np.datetime64 | int = "2013-09-01T00:00:00",
    seed: int = 0,
) -> pa.Table:
    """d-dimensional points for skyline, top-δ dominant and top-k queries (the synthetic data sets of
    Mencagli et al. 2017, Section 4.3.2).

    Columns: ``ts`` (``timestamp[ms, tz=UTC]``), ``id`` (``int64``, the row's position in event order), then
    ``d0`` ... ``d{dims-1}`` (``float64``).

    * ``distribution="independent"``: every dimension uniform on ``[0, 1000)``.
    * ``"correlated"`` / ``"anticorrelated"``: multivariate normal, mean 500, sigma 30, the same pairwise
      ``correlation`` between all dimensions (default 0.7, and ``-0.9 / (dims - 1)`` for anticorrelated, the
      strongest anticorrelation that keeps the covariance positive definite is ``> -1 / (dims - 1)``).
    * Arrivals: ``rate`` points per second of event time with exponential gaps (Poisson), or bursts with index
      of dispersion ``dispersion`` (:func:`windgate.bursty.arrival_times`).
    * ``disorder`` (seconds): each row is delayed by a uniform ``[0, disorder)`` and the rows come in arrival
      order, so ``lateness=f"{disorder}s"`` drops nothing.

    Deterministic for a ``seed`` and the other arguments.

    >>> from windgate.datasets import points
    >>> t = points(1000, dims=3, distribution="anticorrelated", seed=1)
    >>> t.column_names
    ['ts', 'id', 'd0', 'd1', 'd2']
    >>> import numpy as np
    >>> bool(np.corrcoef(t.column("d0").to_numpy(), t.column("d1").to_numpy())[0, 1] < -0.3)
    True
    """
    rows = _check_rows(rows)
    dims = _check_positive_int("dims", dims)
    if distribution not in POINT_DISTRIBUTIONS:
        raise InvalidParameterError(
            f"distribution: expected one of {', '.join(POINT_DISTRIBUTIONS)}, got {distribution!r}"
        )
    rate = _check_rate(rate, "second")
    disorder = _check_disorder(disorder, "seconds")
    rng = np.random.default_rng(seed)
    if distribution == "independent":
        if correlation is not None:
            raise InvalidParameterError(
                "correlation: only for the correlated and anticorrelated distributions"
            )
        values = rng.uniform(0.0, 1000.0, size=(rows, dims))
    else:
        values = _correlated(rng, rows, dims, distribution, correlation)
    arrivals = arrival_times(rows, rate=rate, dispersion=1.0 if dispersion is None else dispersion, seed=seed)
    ts = _start_ms(start) + np.floor(arrivals * 1000.0).astype(np.int64)
    columns = {"ts": ts, "id": np.arange(rows, dtype=np.int64)}
    columns.update({f"d{k}": values[:, k] for k in range(dims)})
    order = _arrival_order(ts.copy(), disorder * 1000.0, rng)
    if order is not None:
        columns = {name: col[order] for name, col in columns.items()}
    schema = pa.schema(
        [
            pa.field("ts", pa.timestamp("ms", tz="UTC"), nullable=False),
            pa.field("id", pa.int64(), nullable=False),
        ]
        + [pa.field(f"d{k}", pa.float64(), nullable=False) for k in range(dims)]
    )
    return pa.table([pa.array(columns[f.name], type=f.type) for f in schema], schema=schema)


def _correlated(
    rng: np.random.Generator, rows: int, dims: int, distribution: str, correlation: float | None
) -> np.ndarray:
    """Multivariate normal (mean 500, sigma 30) with one pairwise correlation, checked to be valid."""
    if correlation is None:
        correlation = 0.7 if distribution == "correlated" else -0.9 / max(dims - 1, 1)
    c = float(correlation)
    lowest = -1.0 / (dims - 1) if dims > 1 else -1.0
    if not (lowest < c < 1.0) or (distribution == "correlated") != (c > 0):
        sign = "in (0, 1)" if distribution == "correlated" else f"in ({lowest:g}, 0)"
        raise InvalidParameterError(
            f"correlation: expected a value {sign} for {distribution} points in {dims} dimensions, got {c!r}"
        )
    cov = np.full((dims, dims), c * 30.0**2)
    np.fill_diagonal(cov, 30.0**2)
    return rng.multivariate_normal(np.full(dims, 500.0), cov, size=rows, method="cholesky")
