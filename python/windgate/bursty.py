"""Bursty arrival times with a chosen index of dispersion, as in the synthetic data sets of
Mencagli, Torquati, Danelutto, De Matteis, *Parallel Continuous Preference Queries over Out-of-Order and
Bursty Data Streams* (2017), Section 4.3.2.

Why: a Poisson stream is the wrong stress test for a parallel window operator. Real streams arrive in bursts:
a pane that falls in a burst holds many times the average number of rows, and that is what unbalances
workers. The **index of dispersion** ``I`` measures how bursty a stream is:

* ``I = lim_{t->inf} Var(N_t) / E[N_t]`` for the number ``N_t`` of arrivals in a window of length ``t``;
* equivalently ``I = SCV * (1 + 2 * sum_{k>=1} r_k)``, with ``SCV`` the squared coefficient of variation of
  the inter-arrival times and ``r_k`` their lag-``k`` autocorrelation.

Poisson arrivals have ``I = 1``; the bursty workloads of that paper have ``I`` in the thousands (1K, 2.5K,
6K). Exponential gaps alone cannot give that: the gaps must be *correlated*, long runs of short gaps (a burst)
and long runs of long gaps (a lull). The smallest model that does this is a two-state Markovian arrival
process, MAP(2) (Mi et al., as in the paper): a "slow" and a "fast" state, each with exponential gaps of its
own mean, and after each arrival the state switches with probability ``p_sf`` (slow to fast) or ``p_fs`` (fast
to slow). Its ``I``, mean and lag-1 autocorrelation have closed forms, so it can be fitted to a target ``I``
exactly.

:func:`fit_map2` fits the model, :func:`arrival_times` draws a trace, :func:`estimate_dispersion` measures
``I`` from any trace. Only numpy is used; sampling is vectorised (runs of states, then all gaps at once).

>>> from windgate.bursty import arrival_times, estimate_dispersion, fit_map2
>>> model = fit_map2(0.001, 1000.0)
>>> round(model.mean, 6), abs(model.dispersion / 1000.0 - 1) < 0.01, model.lag1_autocorrelation >= 0.4
(0.001, True, True)
>>> t = arrival_times(100_000, rate=1000.0, dispersion=1000.0, seed=1)
>>> t.shape, bool((t[1:] >= t[:-1]).all())
((100000,), True)
>>> 0.7 < estimate_dispersion(arrival_times(200_000, rate=1000.0, seed=2)) < 1.3  # Poisson
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import InvalidParameterError

__all__ = ["Map2", "fit_map2", "arrival_times", "estimate_dispersion"]

# Fitting constants of the MAP(2) fit (see fit_map2).
_F_START = 1.0001  # first ratio mean_slow / mean = mean / mean_fast
_P_FS_START = 0.01
_SEARCH_ITERATIONS = 1000
_DISPERSION_TOLERANCE = 0.01  # relative
_MIN_LAG1 = 0.4
_FIT_SEED = 0x004_B0257  # search seed when fit_map2 gets seed=None, so fits are reproducible by default

# estimate_dispersion: stop when two successive doublings each change the value by less than this ...
_CONVERGED = 0.05
# ... or when fewer than this many whole intervals of the doubled length would remain. 100 rather than 50:
# with 50 the last values are noisy enough (about 20% relative error) that I = 1000 was sometimes estimated
# at 0.58 I over 4 M arrivals; with 100 seeds 0..100 gave 0.75 I to 1.21 I for I in {1000, 2500, 6000}.
_MIN_INTERVALS = 100
_DEFAULT_ARRIVALS_PER_INTERVAL = 10


@dataclass(frozen=True)
class Map2:
    """A two-state MAP: exponential gaps with mean ``mean_slow`` or ``mean_fast`` by state; after each
    arrival the state switches slow -> fast with probability ``p_sf`` and fast -> slow with ``p_fs``.

    ``mean_slow == mean_fast`` (with both probabilities 0) is Poisson: exponential gaps, ``I = 1``.
    """

    mean_slow: float
    mean_fast: float
    p_sf: float
    p_fs: float

    @property
    def is_poisson(self) -> bool:
        return self.mean_slow == self.mean_fast

    @property
    def _slow_fraction(self) -> float:
        """Stationary probability that an arrival's gap is drawn in the slow state."""
        total = self.p_fs + self.p_sf
        return 1.0 if total == 0 else self.p_fs / total

    @property
    def mean(self) -> float:
        """Mean inter-arrival time: ``(p_fs * mean_slow + p_sf * mean_fast) / (p_fs + p_sf)``."""
        pi_s = self._slow_fraction
        return pi_s * self.mean_slow + (1.0 - pi_s) * self.mean_fast

    @property
    def dispersion(self) -> float:
        """Asymptotic index of dispersion, in closed form:
        ``1 + 2 p_fs p_sf (l_f - l_s)^2 / ((p_fs + p_sf) (l_f p_fs + l_s p_sf)^2)`` with rates ``l = 1/mean``.

        Checked, not corrected: it equals ``SCV * (1 + 2 sum r_k)`` derived from the chain (``r_k`` decays
        as ``(1 - p_sf - p_fs)^k``) to rounding for random parameters, and simulated traces agree (for
        ``mean_slow=4, mean_fast=0.25, p_fs=0.05, p_sf=0.2`` the formula gives 19.0; Var/Mean of counts over
        20 M arrivals gives 19.0 to 19.5 for windows of 1000 to 10000 mean gaps). It is the MMPP(2) formula
        with switching rates ``p * l`` per unit time.
        """
        if self.is_poisson:
            return 1.0
        l_s, l_f = 1.0 / self.mean_slow, 1.0 / self.mean_fast
        p_fs, p_sf = self.p_fs, self.p_sf
        return 1.0 + 2.0 * p_fs * p_sf * (l_f - l_s) ** 2 / ((p_fs + p_sf) * (l_f * p_fs + l_s * p_sf) ** 2)

    @property
    def lag1_autocorrelation(self) -> float:
        """Lag-1 autocorrelation of the gaps, in closed form, ``0.5 (1 - p_sf - p_fs) (1 - m^2 / (v - m^2))``
        with ``v = E[gap^2] = 2 (p_sf m_f^2 + p_fs m_s^2) / (p_sf + p_fs)``. Checked: it equals
        ``(1 - p_sf - p_fs) Var(E[gap | state]) / Var(gap)`` and matches simulation (0.3068 vs 0.3072)."""
        if self.is_poisson:
            return 0.0
        m = self.mean
        p_fs, p_sf = self.p_fs, self.p_sf
        v = 2.0 * (p_sf * self.mean_fast**2 + p_fs * self.mean_slow**2) / (p_sf + p_fs)
        return 0.5 * (1.0 - p_sf - p_fs) * (1.0 - m * m / (v - m * m))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def _check_positive(name: str, value: object, what: str) -> float:
    if not (_is_number(value) and math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"{name}: expected {what}, got {value!r}")
    return float(value)


def _check_dispersion(value: object) -> float:
    if not (_is_number(value) and math.isfinite(value) and value >= 1):
        raise InvalidParameterError(f"dispersion: expected a number >= 1, got {value!r}")
    return float(value)


def _check_seed(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise InvalidParameterError(f"seed: expected a non-negative integer or None, got {value!r}")
    return int(value)


def _model(m: float, factor: float, p_fs: float) -> Map2:
    m_slow, m_fast = factor * m, m / factor
    # The mean-preserving choice of fit_map2; with these means it is p_sf = factor * p_fs.
    p_sf = p_fs * (m_slow - m) / (m - m_fast)
    return Map2(m_slow, m_fast, p_sf, p_fs)


def _search_p_fs(m: float, factor: float, target: float, rng: np.random.Generator) -> float:
    """The random search for ``p_fs`` of :func:`fit_map2`, plus its direction and a fallback.

    ``I`` falls as ``p_fs`` grows (shorter bursts), so ``p_fs`` is divided by ``U(0, 1)`` when ``I`` is too
    high and multiplied by it when too low (a plain "divide or multiply" leaves the direction open). The
    search converges in ~100 iterations on average but not always within the 1000 allowed, so it falls back on
    the exact inverse of the closed form: with ``mean_slow = F m`` and ``mean_fast = m / F`` the closed form
    reduces to ``I = 1 + 2 (F - 1)^2 / (F (F + 1) p_fs)``.
    """
    p_fs = _P_FS_START
    for _ in range(_SEARCH_ITERATIONS):
        got = _model(m, factor, p_fs).dispersion
        if abs(got - target) <= _DISPERSION_TOLERANCE * target:
            return p_fs
        u = rng.random()
        while u == 0.0:  # pragma: no cover - probability 2**-53
            u = rng.random()
        p_fs = p_fs / u if got > target else p_fs * u
    return 2.0 * (factor - 1.0) ** 2 / (factor * (factor + 1.0) * (target - 1.0))


def fit_map2(mean_interarrival: float, dispersion: float, *, seed: int | None = None) -> Map2:
    """Fit a :class:`Map2` with mean gap ``mean_interarrival`` and index of dispersion ``dispersion``.

    The procedure (a MAP(2) fitted to a mean and an index of dispersion, as Mencagli et al. 2017 do):
    ``mean_slow = F m``, ``mean_fast = m / F`` with ``F`` from 1.0001, ``p_sf = p_fs (mean_slow - m) / (m -
    mean_fast)`` (keeps the mean at ``m``), a random search on ``p_fs`` (from 0.01, up to 1000 steps) until
    the closed-form ``I`` is within 1% of the target; while the lag-1 autocorrelation is below 0.4, double
    ``F`` and search again.

    Beyond that procedure: the lag-1 autocorrelation is below ``(1 - p_sf - p_fs) / 2 < 0.5``, and for a
    target below about 90 no ``F`` reaches 0.4 (a larger ``F`` needs shorter runs, which kill the correlation,
    and eventually a switching probability above 1). The doubling then stops when ``F`` becomes infeasible or
    the autocorrelation stops growing, and the fit with the largest autocorrelation is returned; its mean
    and ``I`` are still on target.

    ``dispersion == 1`` returns the Poisson model (``mean_slow == mean_fast``, no switching). ``seed`` seeds
    the random search; ``None`` uses a fixed seed, so the fit is reproducible either way.
    """
    m = _check_positive("mean_interarrival", mean_interarrival, "a positive finite number of seconds")
    target = _check_dispersion(dispersion)
    seed = _check_seed(seed)
    if target == 1.0:
        return Map2(m, m, 0.0, 0.0)
    rng = np.random.default_rng(_FIT_SEED if seed is None else seed)
    best: Map2 | None = None
    factor = _F_START
    while True:
        model = _model(m, factor, _search_p_fs(m, factor, target, rng))
        if model.p_sf > 1.0 or model.p_fs > 1.0:
            break  # F too large for this target: no valid switching probabilities
        if best is not None and model.lag1_autocorrelation <= best.lag1_autocorrelation:
            break
        best = model
        if model.lag1_autocorrelation >= _MIN_LAG1:
            break
        factor *= 2.0
    if best is None:  # pragma: no cover - F = 1.0001 is feasible for every target > 1
        raise InvalidParameterError(f"dispersion: cannot fit a MAP(2) to {target!r}")
    return best


def _state_runs(model: Map2, n: int, rng: np.random.Generator) -> np.ndarray:
    """States (0 slow, 1 fast) of ``n`` arrivals, starting slow, as run lengths expanded once.

    A slow run has Geometric(p_sf) arrivals and a fast run Geometric(p_fs). The lengths come alternately
    from one stream, in chunks whose boundaries do not change the values, so a longer trace extends a
    shorter one.
    """
    cycle = 1.0 / model.p_sf + 1.0 / model.p_fs  # mean arrivals per slow + fast pair
    pairs = int(min(max(16.0, 1.25 * n / cycle + 16.0), 1 << 22))
    probs = np.array([model.p_sf, model.p_fs])
    lengths: list[np.ndarray] = []
    covered = 0
    while covered < n:
        chunk = rng.geometric(np.tile(probs, pairs))
        lengths.append(chunk)
        covered += int(chunk.sum())
    runs = np.concatenate(lengths)
    ends = np.cumsum(runs)
    k = int(np.searchsorted(ends, n, side="left")) + 1  # runs needed to cover n arrivals
    runs = runs[:k]
    runs[-1] -= int(ends[k - 1]) - n
    states = np.zeros(k, dtype=np.int8)
    states[1::2] = 1
    return np.repeat(states, runs)


def arrival_times(
    n: int,
    *,
    rate: float,
    dispersion: float = 1.0,
    seed: int | None = None,
    start: float = 0.0,
) -> np.ndarray:
    """``n`` arrival times (float64 seconds, non-decreasing, after ``start``) at mean ``rate`` per second,
    from :func:`fit_map2` ``(1 / rate, dispersion)``: exponential gaps (Poisson) for ``dispersion=1``,
    bursts for larger values. The chain starts in the slow state.

    The model depends only on ``rate`` and ``dispersion``; ``seed`` seeds the trace (``None``: fresh
    entropy). For a fixed seed the result is deterministic, and ``arrival_times(n, ...)`` is a prefix of
    ``arrival_times(n + k, ...)``.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InvalidParameterError(f"n: expected a non-negative integer, got {n!r}")
    n = int(n)
    rate = _check_positive("rate", rate, "a positive finite number of arrivals per second")
    model = fit_map2(1.0 / rate, dispersion)
    seed = _check_seed(seed)
    if not (_is_number(start) and math.isfinite(start)):
        raise InvalidParameterError(f"start: expected a finite number of seconds, got {start!r}")
    state_seq, gap_seq = np.random.SeedSequence(seed).spawn(2)
    gaps = np.random.default_rng(gap_seq).standard_exponential(n)
    if model.is_poisson:
        gaps *= model.mean_slow
    elif n:
        means = np.array([model.mean_slow, model.mean_fast])
        gaps *= means[_state_runs(model, n, np.random.default_rng(state_seq))]
    out = np.cumsum(gaps, out=gaps)
    out += float(start)
    return out


def estimate_dispersion(times, *, start_interval: float | None = None) -> float:
    """Estimate the index of dispersion of a trace of arrival times: ``Var(N_t) / E[N_t]`` over consecutive
    intervals of length ``t`` from the first arrival (the last, partial interval is dropped).

    ``t`` starts at ``start_interval`` (default: 10 mean gaps) and doubles until two successive doublings
    each change the value by less than 5%, or until the next doubling would leave fewer than 100 intervals;
    the last value is returned. Var/Mean only approaches ``I`` once ``t`` is long against the bursts, so a
    trace should span many burst cycles; a short trace gives an underestimate.
    """
    t = np.asarray(times, dtype=np.float64)
    if t.ndim != 1:
        raise InvalidParameterError(f"times: expected a 1-D sequence of arrival times, got shape {t.shape}")
    if t.size < 2 or not np.isfinite(t).all():
        raise InvalidParameterError("times: expected at least 2 finite arrival times")
    if bool((t[1:] < t[:-1]).any()):
        raise InvalidParameterError("times: expected non-decreasing arrival times")
    span = float(t[-1] - t[0])
    if span <= 0:
        raise InvalidParameterError("times: expected arrival times that span a positive duration")
    if start_interval is None:
        interval = _DEFAULT_ARRIVALS_PER_INTERVAL * span / (t.size - 1)
        if int(span // interval) < _MIN_INTERVALS:
            need = _DEFAULT_ARRIVALS_PER_INTERVAL * _MIN_INTERVALS + 1
            raise InvalidParameterError(f"times: expected at least {need} arrival times, got {t.size}")
    else:
        interval = _check_positive("start_interval", start_interval, "a positive finite duration")
        if int(span // interval) < _MIN_INTERVALS:
            raise InvalidParameterError(
                f"start_interval: expected at most 1/{_MIN_INTERVALS} of the trace's span {span!r}, "
                f"got {interval!r}"
            )
    k = int(span // interval)
    # Count once at the start interval; each doubling then sums neighbouring pairs (intervals nest).
    idx = np.floor_divide(t - t[0], interval).astype(np.int64)
    counts = np.bincount(idx[idx < k], minlength=k).astype(np.float64)
    values: list[float] = []
    while True:
        values.append(float(counts.var() / counts.mean()))
        if len(values) >= 3 and all(
            abs(values[i] - values[i - 1]) < _CONVERGED * values[i - 1] for i in (-1, -2)
        ):
            break
        if counts.size // 2 < _MIN_INTERVALS:
            break
        half = counts.size // 2
        counts = counts[: 2 * half : 2] + counts[1 : 2 * half : 2]
    return values[-1]
