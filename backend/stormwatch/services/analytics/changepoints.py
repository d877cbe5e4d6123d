"""Level shifts and cyclical patterns in windowed medians.

Level shifts (seed 003 Lesson 11: cross-region latency moves in abrupt steps of a few
milliseconds) are found with `ruptures` PELT on the windowed-median series (medians already
shed the spikes), with an L2 cost and a BIC-like penalty scaled by a robust noise estimate,
so a flat series yields no change points however noisy it is.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import ruptures as rpt
from numpy.typing import NDArray


def robust_noise(series: NDArray[np.float64]) -> float:
    """Noise sigma from first differences (MAD), insensitive to the steps themselves."""
    if series.size < 3:
        return 0.0
    d = np.diff(series)
    mad = float(np.median(np.abs(d - np.median(d))))
    return mad * 1.4826 / math.sqrt(2.0)


def level_shifts(series: NDArray[np.float64], min_size: int = 3,
                 min_step: float | None = None, penalty_scale: float = 3.0) -> dict[str, Any]:
    """Change points of `series` (one value per window).

    Returns breakpoints as window indices where a new level starts, each segment's level
    (median) and each step (new level minus old). Steps smaller than `min_step` (default:
    3 noise sigmas) are merged into their neighbours.
    """
    x = np.asarray(series, dtype=np.float64)
    ok = np.isfinite(x)
    idx_map = np.flatnonzero(ok)
    x = x[ok]
    n = x.size
    if n < 2 * min_size:
        return {"breakpoints": [], "segments": _segments(x, [], idx_map), "noise": 0.0}
    sigma = robust_noise(x)
    scale = sigma if sigma > 0 else max(float(np.std(x)), 1e-12)
    # L2 cost ~ deviation^2 / sigma^2; a few log(n) per change point keeps flat series clean.
    pen = penalty_scale * math.log(n) * scale * scale
    algo = rpt.Pelt(model="l2", min_size=min_size, jump=1).fit(x.reshape(-1, 1))
    bkps = [b for b in algo.predict(pen=pen) if b < n]
    threshold = min_step if min_step is not None else 3.0 * sigma
    bkps = _merge_small_steps(x, bkps, threshold)
    return {"breakpoints": [int(idx_map[b]) for b in bkps],
            "segments": _segments(x, bkps, idx_map), "noise": sigma}


def _merge_small_steps(x: NDArray[np.float64], bkps: list[int], threshold: float) -> list[int]:
    bkps = list(bkps)
    changed = True
    while changed and bkps:
        changed = False
        bounds = [0, *bkps, x.size]
        levels = [float(np.median(x[a:b])) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        steps = [abs(levels[i + 1] - levels[i]) for i in range(len(bkps))]
        smallest = int(np.argmin(steps))
        if steps[smallest] < threshold:
            del bkps[smallest]
            changed = True
    return bkps


def _segments(x: NDArray[np.float64], bkps: list[int], idx_map: NDArray[np.int64]) -> list[dict[str, Any]]:
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


def cyclical_pattern(series: NDArray[np.float64], window_s: float,
                     min_period_s: float = 120.0, max_period_s: float | None = None,
                     top: int = 3) -> dict[str, Any]:
    """Seed 003 Lesson 4: periodic fluctuations, from the spectrum of the detrended series.

    Returns the strongest periods with their share of the variance and the amplitude of the
    corresponding sinusoid, plus the mean profile over the strongest period.
    """
    x = np.asarray(series, dtype=np.float64)
    ok = np.isfinite(x)
    if ok.sum() < 8:
        return {"periods": [], "profile": []}
    # Fill gaps with the median so the FFT sees an evenly spaced series.
    x = np.where(ok, x, np.nanmedian(x))
    n = x.size
    t = np.arange(n)
    slope, intercept = np.polyfit(t, x, 1)
    y = x - (slope * t + intercept)
    total_var = float(np.sum(y**2))
    if total_var == 0:
        return {"periods": [], "profile": []}
    spec = np.abs(np.fft.rfft(y)) ** 2
    freqs = np.fft.rfftfreq(n, d=window_s)
    periods = np.where(freqs > 0, 1.0 / np.where(freqs > 0, freqs, 1), np.inf)
    upper = max_period_s if max_period_s is not None else n * window_s / 2
    valid = (freqs > 0) & (periods >= min_period_s) & (periods <= upper)
    order = np.argsort(spec * valid)[::-1]
    out = []
    # Parseval: a one-sided bin k holds 2|Y_k|^2 / n of the sum of squares.
    for k in order[:top]:
        if not valid[k] or spec[k] == 0:
            continue
        share = float(2 * spec[k] / n / total_var)
        out.append({"period_s": float(periods[k]), "variance_share": min(share, 1.0),
                    "amplitude": float(2 * math.sqrt(spec[k]) / n)})
    profile: list[dict[str, float]] = []
    if out:
        per = max(int(round(out[0]["period_s"] / window_s)), 1)
        phase = t % per
        sums = np.bincount(phase, weights=x, minlength=per)
        cnts = np.bincount(phase, minlength=per)
        profile = [{"offset_s": float(i * window_s), "mean": float(sums[i] / cnts[i])}
                   for i in range(per) if cnts[i]]
    return {"periods": out, "profile": profile}
