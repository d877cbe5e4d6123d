"""Level shifts and cyclical patterns in windowed medians.

Level shifts (seed 003 Lesson 11: cross-region latency moves in abrupt steps) are told apart
from the slower changes seed 003 §4.3 calls trends and from periodic swings by modelling
each separately:

1. isolated spikes: a Hampel filter (5-window running median, 5 robust sigmas) replaces
   windows that stand alone far from their neighbours;
2. periodic components: the residual of a long running median (which keeps steps intact,
   as median filters keep edges) is searched for significant cycles (`cyclical_pattern`'s
   false-alarm probability) and their fitted sinusoids are subtracted;
3. candidate change points: binary segmentation with the L2 cost on cumulative sums (O(n)
   per pass, so a week of 30 s windows, 20 160 points, takes milliseconds);
4. every candidate is tested as a *jump between two local trends*: a straight line is fitted
   to up to `half_width` windows on each side (never crossing a neighbouring candidate,
   both sides of equal length) and the jump is the difference of the two lines at the
   boundary. A linear or slowly curving drift gives both lines the same value there (the
   curvature biases of equal-length sides cancel), a step gives its size. The weakest
   candidate is dropped until every remaining jump is at least `z_min` standard errors
   (from the robust noise sigma) and `min_step`.

Each shift carries its time, size, sign, z-score and a confidence (one minus the
Bonferroni-corrected two-sided p-value over the ~n / half_width independent tests).
`ruptures` segments into piecewise-constant (or piecewise-linear) models only, which turns a
drift into a staircase and a swing into a sawtooth; a trend-aware jump test is what the
data needs, and its cost is linear in the number of windows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.ndimage import median_filter
from scipy.stats import norm

# Windows each side of a candidate used to fit the local trends. 30 windows of 30 s (15 min)
# keep the size error of a 1% step on a 10 Hz pair well under 10%, while a 1-hour swing of 2%
# that escaped step 2 biases the jump by < 0.2% (the cubic term of a sine over 15 min).
HALF_WIDTH = 30
# Jumps below this many standard errors are noise (Bonferroni over a week still < 1e-3).
Z_MIN = 6.0
# Windows a shift needs on each side before it is reported (a step in the last few windows
# of a range is confirmed once five windows of the new level are in).
MIN_SIDE = 5
# The long running median whose residual holds the periodic components (periods up to half
# of it are searched: 2 hours at 30 s windows); shorter series use a third of their length.
TREND_WINDOWS = 481
# A cycle is removed before step detection only when its false-alarm probability is below this.
CYCLE_FAP = 1e-3
# Neighbouring frequencies on each side whose median power sets a peak's local noise level.
LOCAL_BINS = 8


def robust_noise(series: NDArray[np.float64]) -> float:
    """Noise sigma from first differences (MAD), insensitive to steps and slow trends."""
    if series.size < 3:
        return 0.0
    d = np.diff(series)
    mad = float(np.median(np.abs(d - np.median(d))))
    return mad * 1.4826 / math.sqrt(2.0)


def despike(x: NDArray[np.float64], sigma: float, width: int = 5,
            n_sigma: float = 5.0) -> NDArray[np.float64]:
    """Hampel filter: windows further than `n_sigma` from their running median take it."""
    if x.size < width or sigma <= 0:
        return x.copy()
    med = median_filter(x, size=width, mode="mirror")
    return np.where(np.abs(x - med) > n_sigma * sigma, med, x)


def _line_at(x: NDArray[np.float64], a: int, b: int, at: float) -> float:
    """Least-squares line through x[a:b] (at positions a..b-1) evaluated at `at`."""
    n = b - a
    if n <= 0:
        return math.nan
    y = x[a:b]
    if n < 4:  # too few points for a slope worth having
        return float(y.mean())
    t = np.arange(a, b, dtype=np.float64)
    tm, ym = t.mean(), y.mean()
    dt = t - tm
    slope = float(np.dot(dt, y - ym) / np.dot(dt, dt))
    return float(ym + slope * (at - tm))


def _jump(x: NDArray[np.float64], k: int, lo: int, hi: int, half_width: int
          ) -> tuple[float, float, float, int]:
    """Jump at boundary k (between k-1 and k): (size, level before, level after, side length)
    from equal-length local lines on [k-L, k) and [k, k+L), L bounded by lo/hi."""
    length = min(half_width, k - lo, hi - k)
    if length < 1:
        return 0.0, math.nan, math.nan, 0
    at = k - 0.5
    before = _line_at(x, k - length, k, at)
    after = _line_at(x, k, k + length, at)
    return after - before, before, after, length


def _abrupt(x: NDArray[np.float64], k: int, lo: int, hi: int, size: float, length: int,
            sigma: float) -> bool:
    """A step keeps its size when measured over half the span; the jump a curve (a swing the
    cycle search missed) leaves between two lines shrinks eightfold (it grows as L^3)."""
    if length < 8:
        return True
    half, _, _, hl = _jump(x, k, lo, hi, length // 2)
    return abs(half - size) <= max(0.5 * abs(size), 3.0 * _jump_se(sigma, hl))


def _jump_se(sigma: float, length: int) -> float:
    # Variance of a fitted line at the end of its L points is 4 sigma^2 / L (1 / L for a mean).
    per_side = 4.0 / length if length >= 4 else 1.0 / max(length, 1)
    return sigma * math.sqrt(2.0 * per_side)


def _binary_segmentation(x: NDArray[np.float64], pen: float, min_size: int,
                         max_bkps: int) -> list[int]:
    s1 = np.concatenate([[0.0], np.cumsum(x - x.mean())])
    segments = [(0, x.size)]
    bkps: list[int] = []
    while len(bkps) < max_bkps:
        best = (0.0, -1, -1)
        for seg_i, (a, b) in enumerate(segments):
            if b - a < 2 * min_size:
                continue
            ks = np.arange(a + min_size, b - min_size + 1)
            left_s, right_s = s1[ks] - s1[a], s1[b] - s1[ks]
            total = s1[b] - s1[a]
            gains = left_s**2 / (ks - a) + right_s**2 / (b - ks) - total**2 / (b - a)
            i = int(np.argmax(gains))
            if gains[i] > best[0]:
                best = (float(gains[i]), int(ks[i]), seg_i)
        gain, k, seg_i = best
        if k < 0 or gain <= pen:
            break
        a, b = segments.pop(seg_i)
        segments += [(a, k), (k, b)]
        bkps.append(k)
    return sorted(bkps)


def remove_cycles(x: NDArray[np.float64], sigma: float, trend_windows: int = TREND_WINDOWS,
                  fap: float = CYCLE_FAP, max_cycles: int = 3
                  ) -> tuple[NDArray[np.float64], list[float]]:
    """x minus its significant periodic components (periods of 4 windows up to a third of
    the trend window), found in the residual of a running median that keeps steps."""
    trend_windows = min(trend_windows, x.size // 3)
    if trend_windows < 24 or sigma <= 0:
        return x, []
    trend = median_filter(x, size=trend_windows, mode="mirror")
    resid = x - trend
    t = np.arange(x.size, dtype=np.float64)
    periods: list[float] = []
    seasonal = np.zeros(x.size)
    for _ in range(max_cycles):
        y = resid - seasonal
        found = _periodogram_peaks(y, sigma, 4.0, trend_windows / 2.0, fap, 1)
        if not found:
            break
        # The FFT grid is n / k: refine the frequency to the best-fitting sinusoid near it.
        k = x.size / found[0][0]
        best = (-1.0, 0.0, np.zeros(x.size))
        for kk in np.linspace(k - 0.5, k + 0.5, 21):
            w = 2 * math.pi * kk / x.size
            basis = np.column_stack([np.cos(w * t), np.sin(w * t)])
            coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
            fit = basis @ coef
            power = float(np.dot(fit, fit))
            if power > best[0]:
                best = (power, x.size / kk, fit)
        _, period, fit = best
        seasonal += fit
        periods.append(float(period))
    return x - seasonal, periods


def level_shifts(series: NDArray[np.float64], min_size: int = 3,
                 min_step: float | None = None, half_width: int = HALF_WIDTH,
                 z_min: float = Z_MIN, noise_floor: float = 0.0) -> dict[str, Any]:
    """Level shifts of `series` (one value per window, NaN for empty windows).

    Returns `shifts` (window index where the new level starts, step, levels just before and
    after, z, confidence), `breakpoints` (their indices), `segments` between them with their
    median levels, the noise sigma and the periods removed as cycles. `min_step` (default
    3 noise sigmas) is the smallest step reported; `noise_floor` is the least noise sigma
    assumed (a series flat between steps has none, and steps would be judged against its
    overall spread instead)."""
    x = np.asarray(series, dtype=np.float64)
    ok = np.isfinite(x)
    idx_map = np.flatnonzero(ok)
    x = x[ok]
    n = x.size
    empty: dict[str, Any] = {"breakpoints": [], "shifts": [], "noise": 0.0, "cycles_removed": []}
    if n < 2 * min_size:
        return {**empty, "segments": _segments(x, [], idx_map)}
    sigma = robust_noise(x)
    scale = max(sigma, noise_floor) if max(sigma, noise_floor) > 0 else max(
        float(np.std(x)), 1e-12)
    clean = despike(x, scale)
    clean, removed = remove_cycles(clean, scale)
    pen = 3.0 * math.log(n) * scale * scale
    cands = _binary_segmentation(clean, pen, min_size, max_bkps=max(20, n // 4))
    threshold = min_step if min_step is not None else 3.0 * scale
    # Backward elimination: drop the weakest candidate, re-test its neighbours, repeat.
    alpha_tests = max(n / max(half_width, 1), 1.0)
    while cands:
        bounds = [0, *cands, n]
        stats = []
        for i, k in enumerate(cands):
            size, _, _, length = _jump(clean, k, bounds[i], bounds[i + 2], half_width)
            se = _jump_se(scale, length) if length else math.inf
            z = abs(size) / se if se > 0 else 0.0
            ok_step = (length >= MIN_SIDE and z >= z_min and abs(size) >= threshold
                       and _abrupt(clean, k, bounds[i], bounds[i + 2], size, length, scale))
            stats.append((ok_step, z))
        weakest = min(range(len(cands)), key=lambda i: (stats[i][0], stats[i][1]))
        if stats[weakest][0]:
            break
        del cands[weakest]
    cands = _drop_excursions(clean, cands, threshold, 2 * min_size)
    shifts = []
    bounds = [0, *cands, n]
    for i, k in enumerate(cands):
        size, before, after, length = _jump(clean, k, bounds[i], bounds[i + 2], half_width)
        z = abs(size) / _jump_se(scale, length)
        p = min(1.0, alpha_tests * 2.0 * float(norm.sf(z)))
        shifts.append({"index": int(idx_map[k]), "step": size, "level_before": before,
                       "level_after": after, "z": z, "confidence": 1.0 - p})
    return {"breakpoints": [int(idx_map[b]) for b in cands], "shifts": shifts,
            "segments": _segments(x, cands, idx_map), "noise": sigma,
            "cycles_removed": removed}


def _drop_excursions(x: NDArray[np.float64], bkps: list[int], threshold: float,
                     max_len: int) -> list[int]:
    """A short segment whose neighbours sit at the same level is a burst, not a shift."""
    bkps = list(bkps)
    i = 0
    while i + 1 < len(bkps):
        a, b = bkps[i], bkps[i + 1]
        prev_start = bkps[i - 1] if i > 0 else 0
        next_end = bkps[i + 2] if i + 2 < len(bkps) else x.size
        if b - a <= max_len:
            before = float(np.median(x[prev_start:a]))
            after = float(np.median(x[b:next_end]))
            if abs(after - before) < threshold:
                del bkps[i : i + 2]
                continue
        i += 1
    return bkps


def _segments(x: NDArray[np.float64], bkps: list[int],
              idx_map: NDArray[np.int64]) -> list[dict[str, Any]]:
    if x.size == 0:
        return []
    bounds = [0, *bkps, x.size]
    out: list[dict[str, Any]] = []
    prev: float | None = None
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        level = float(np.median(x[a:b]))
        out.append({"start_index": int(idx_map[a]), "end_index": int(idx_map[b - 1]),
                    "level": level, "step": None if prev is None else level - prev})
        prev = level
    return out


def _periodogram_peaks(y: NDArray[np.float64], sigma: float, min_period: float,
                       max_period: float, fap: float, top: int
                       ) -> list[tuple[float, float, float, float]]:
    """(period in samples, power / sigma^2, false-alarm probability, amplitude) of the
    strongest periodogram peaks with a false-alarm probability below `fap`.

    Under white noise of variance sigma^2, I_k = |Y_k|^2 / n is sigma^2 times an Exp(1)
    variable, so the largest of M tested frequencies exceeds z sigma^2 with probability
    1 - (1 - e^-z)^M (Scargle 1982, ApJ 263: 835, eq. 14). sigma comes from first
    differences, which slow components barely move; where neighbouring frequencies carry
    more power than white noise would, their median is the noise level instead."""
    n = y.size
    if n < 8 or sigma <= 0:
        return []
    spec = np.abs(np.fft.rfft(y)) ** 2 / n
    k = np.arange(spec.size)
    with np.errstate(divide="ignore"):
        periods = np.where(k > 0, n / np.maximum(k, 1), np.inf)
    valid = (k > 0) & (k < n / 2) & (periods >= min_period) & (periods <= max_period)
    m = int(valid.sum())
    if m == 0:
        return []
    # The noise level at each frequency: white sigma^2, or the median power of its
    # neighbours (/ ln 2, the median of Exp(1)) where that is higher, so what is left of a
    # drift (power falling smoothly with frequency) is not mistaken for a peak.
    padded = np.pad(spec[1:], LOCAL_BINS, mode="reflect")
    local = np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * LOCAL_BINS + 1),
                      axis=1)
    noise = np.maximum(sigma * sigma, np.concatenate([[np.inf], local]) / math.log(2.0))
    z = np.where(valid, spec / noise, 0.0)
    out = []
    for i in np.argsort(z)[::-1][:top]:
        if not valid[i]:
            continue
        # 1 - (1 - e^-z)^M without cancellation for tiny probabilities.
        p = -math.expm1(m * math.log1p(-math.exp(-float(z[i])))) if z[i] < 700 else 0.0
        if p > fap:
            break
        out.append((float(periods[i]), float(z[i]), p, float(2 * math.sqrt(spec[i] * n) / n)))
    return out


def cyclical_pattern(series: NDArray[np.float64], window_s: float,
                     min_period_s: float = 120.0, max_period_s: float | None = None,
                     top: int = 3, fap: float = 0.01) -> dict[str, Any]:
    """Seed 003 Lesson 4: periodic fluctuations with their significance.

    The window series (gaps interpolated) has its level shifts and a quintic trend removed;
    periods from `min_period_s` to `max_period_s` (default: a quarter of the span, so at least
    four cycles are seen) are tested against white noise of the series' robust sigma. Only
    peaks with a false-alarm probability below `fap` are reported, each with its share of
    the variance, amplitude and probability; `significant` is False when there are none (a
    normal answer). The mean profile over the strongest period comes with it."""
    x = np.asarray(series, dtype=np.float64)
    ok = np.isfinite(x)
    none: dict[str, Any] = {"periods": [], "profile": [], "significant": False,
                            "false_alarm_threshold": fap}
    if ok.sum() < 8:
        return none
    t = np.arange(x.size, dtype=np.float64)
    x = np.interp(t, t[ok], x[ok])
    sigma = robust_noise(x)
    # Steps leak power into every low frequency: take them out first.
    shifts = level_shifts(x)
    steps = np.zeros(x.size)
    for s in shifts["shifts"]:
        steps[s["index"]:] += s["step"]
    y = x - steps
    tt = (t - t.mean()) / max(t.std(), 1.0)
    # A quintic trend follows a drift over the span (at most two turns), which a cycle seen
    # at least four times is not; each period found is refitted jointly with that trend.
    trend_basis = np.vander(tt, min(6, x.size // 4), increasing=True)
    upper = max_period_s if max_period_s is not None else x.size * window_s / 4
    found: list[tuple[float, float, float, float]] = []
    basis = trend_basis
    y = y - basis @ np.linalg.lstsq(basis, y, rcond=None)[0]
    total_var = float(np.sum(y**2))
    if total_var == 0 or sigma <= 0:
        return none
    resid = y
    coef = np.zeros(0)
    for _ in range(top):
        peaks = _periodogram_peaks(resid, sigma, min_period_s / window_s, upper / window_s,
                                   fap, 1)
        if not peaks:
            break
        period = peaks[0][0]
        w = 2 * math.pi / period
        basis = np.column_stack([basis, np.cos(w * t), np.sin(w * t)])
        coef, *_ = np.linalg.lstsq(basis, x - steps, rcond=None)
        resid = x - steps - basis @ coef
        found.append(peaks[0])
    out = []
    n = x.size
    n_trend = trend_basis.shape[1]
    for j, (period, _, p, _) in enumerate(found):
        # Amplitude from the joint fit: the trend does not absorb part of the sinusoid.
        c, s_ = coef[n_trend + 2 * j], coef[n_trend + 2 * j + 1]
        amplitude = float(math.hypot(c, s_))
        share = amplitude * amplitude / 2 * n / total_var
        out.append({"period_s": period * window_s, "variance_share": min(float(share), 1.0),
                    "amplitude": amplitude, "false_alarm_probability": p})
    profile: list[dict[str, float]] = []
    if out:
        per = max(int(round(out[0]["period_s"] / window_s)), 1)
        phase = (np.arange(n) % per).astype(np.int64)
        sums = np.bincount(phase, weights=x, minlength=per)
        cnts = np.bincount(phase, minlength=per)
        profile = [{"offset_s": float(i * window_s), "mean": float(sums[i] / cnts[i])}
                   for i in range(per) if cnts[i]]
    return {"periods": out, "profile": profile, "significant": bool(out),
            "false_alarm_threshold": fap}
