"""Level shifts and cyclical patterns in windowed medians.

Level shifts (seed 003 Lesson 11: cross-region latency moves in abrupt steps of a few
milliseconds) are found by binary segmentation with the L2 cost on the windowed-median
series, after a 3-window running median that removes isolated spikes. Each split must pay
a BIC-like penalty scaled by a robust noise estimate, so a flat series yields no change
points however noisy it is. Cumulative sums make each pass O(n), so week-long series of
30 s windows (20 160 points) take milliseconds; `ruptures`' exact solvers (Pelt, Dynp)
are quadratic in pure Python at that size.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.ndimage import median_filter


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
    smooth = median_filter(x, size=3, mode="nearest")
    pen = penalty_scale * math.log(n) * scale * scale
    bkps = _binary_segmentation(smooth, pen, min_size)
    threshold = min_step if min_step is not None else 3.0 * sigma
    bkps = _merge_small_steps(smooth, bkps, threshold)
    bkps = _drop_excursions(smooth, bkps, threshold, 2 * min_size)
    return {"breakpoints": [int(idx_map[b]) for b in bkps],
            "segments": _segments(x, bkps, idx_map), "noise": sigma}


def _best_split(s1: NDArray[np.float64], s2: NDArray[np.float64], a: int, b: int,
                min_size: int) -> tuple[float, int]:
    """Largest L2 cost reduction from splitting [a, b) at k, and that k."""
    if b - a < 2 * min_size:
        return 0.0, -1
    k = np.arange(a + min_size, b - min_size + 1)
    left_n, right_n = k - a, b - k
    left_s, right_s = s1[k] - s1[a], s1[b] - s1[k]
    total = s1[b] - s1[a]
    gain = left_s**2 / left_n + right_s**2 / right_n - total**2 / (b - a)
    i = int(np.argmax(gain))
    return float(gain[i]), int(k[i])


def _binary_segmentation(x: NDArray[np.float64], pen: float, min_size: int) -> list[int]:
    s1 = np.concatenate([[0.0], np.cumsum(x - x.mean())])
    s2 = np.concatenate([[0.0], np.cumsum((x - x.mean()) ** 2)])
    segments = [(0, x.size)]
    bkps: list[int] = []
    while True:
        best = (0.0, -1, -1)
        for seg_i, (a, b) in enumerate(segments):
            gain, k = _best_split(s1, s2, a, b, min_size)
            if gain > best[0]:
                best = (gain, k, seg_i)
        gain, k, seg_i = best
        if k < 0 or gain <= pen:
            break
        a, b = segments.pop(seg_i)
        segments += [(a, k), (k, b)]
        bkps.append(k)
    return sorted(bkps)


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
