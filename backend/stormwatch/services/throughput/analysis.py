"""Pure analyses of throughput experiments (seed 004 §IV). No database, no FastAPI.

Per-second series are the receiver's samples of one direction of one experiment: bytes
received in that second, stamped at the end of the second (THROUGHPUT_CONTRACT.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from stormwatch.services.analytics.changepoints import level_shifts
from stormwatch.services.analytics.stats import cv_rmse

# A high->low transition is reported only when the level falls by at least this fraction:
# seed 004 Fig. 9 shows ~850 -> ~400 Mbit/s (-53%); a few percent is ordinary TCP wobble.
MIN_RELATIVE_DROP = 0.2
# Each side of a transition needs this many seconds of its level (a burst is not a switch).
MIN_SIDE_S = 3
# Seconds each side used to fit the local trends that tell a step from a ramp.
HALF_WIDTH_S = 30
# Least per-second noise assumed, relative to the median: a rate held exactly (a policer's
# token bucket, a quantised counter) would otherwise leave no noise to judge steps by.
NOISE_FLOOR = 0.001


def direction_stats(bytes_per_s: NDArray[np.float64],
                    loss_ratio: NDArray[np.float64] | None = None,
                    jitter_us: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """Mean, max, min, sample standard deviation and CoV = sigma / mu (seed 004 footnote 3)
    of one direction's per-second throughput, the bytes it moved, and for UDP the mean loss
    ratio and mean and max jitter."""
    v = np.asarray(bytes_per_s, dtype=np.float64)
    v = v[np.isfinite(v)]
    n = int(v.size)
    out: dict[str, Any] = {"seconds": n, "bytes": float(v.sum()) if n else 0.0,
                           "mean_bytes_per_s": None, "max_bytes_per_s": None,
                           "min_bytes_per_s": None, "std_bytes_per_s": None, "cov": None,
                           "loss_ratio_mean": None, "jitter_us_mean": None,
                           "jitter_us_max": None}
    if n:
        mean = float(v.mean())
        std = float(v.std(ddof=1)) if n > 1 else 0.0
        out.update(mean_bytes_per_s=mean, max_bytes_per_s=float(v.max()),
                   min_bytes_per_s=float(v.min()), std_bytes_per_s=std,
                   cov=std / mean if mean > 0 else None)
    if loss_ratio is not None:
        lr = np.asarray(loss_ratio, dtype=np.float64)
        lr = lr[np.isfinite(lr)]
        out["loss_ratio_mean"] = float(lr.mean()) if lr.size else None
    if jitter_us is not None:
        j = np.asarray(jitter_us, dtype=np.float64)
        j = j[np.isfinite(j)]
        if j.size:
            out["jitter_us_mean"] = float(j.mean())
            out["jitter_us_max"] = float(j.max())
    return out


def transitions(times: Sequence[datetime], bytes_per_s: NDArray[np.float64],
                min_relative_drop: float = MIN_RELATIVE_DROP) -> list[dict[str, Any]]:
    """High->low switches inside one direction (seed 004 §IV-D, Fig. 9).

    Candidates are the level shifts of the per-second series (`level_shifts`: isolated dips
    are filtered as spikes, a slow ramp is a trend, not a step), kept when the level falls
    by at least `min_relative_drop` of the level before. The levels are the medians of the
    segments either side. The switch rarely falls on a second's boundary: the second(s) at
    the boundary hold a mix, and the fraction f of a mixed second spent at the high level
    is (v - low) / (high - low); the switch time and the volume before it use that fraction.
    Returns `at`, `offset_s` (from the start of the direction's first second),
    `level_before_bytes_per_s`, `level_after_bytes_per_s` and `bytes_before`.
    """
    v = np.asarray(bytes_per_s, dtype=np.float64)
    n = v.size
    if n < 2 * MIN_SIDE_S or len(times) != n:
        return []
    med = float(np.median(v))
    if med <= 0:
        return []
    res = level_shifts(v, min_size=MIN_SIDE_S, min_step=min_relative_drop * med * 0.5,
                       half_width=min(HALF_WIDTH_S, max(MIN_SIDE_S, n // 4)),
                       noise_floor=NOISE_FLOOR * med)
    segments = res["segments"]
    out: list[dict[str, Any]] = []
    first_start = times[0] - timedelta(seconds=1)
    for i, k in enumerate(res["breakpoints"]):
        high = float(segments[i]["level"])
        low = float(segments[i + 1]["level"])
        if high <= 0 or (high - low) / high < min_relative_drop:
            continue
        span = high - low
        f1 = float(np.clip((v[k - 1] - low) / span, 0.0, 1.0))
        f2 = float(np.clip((v[k] - low) / span, 0.0, 1.0)) if k < n else 0.0
        # One boundary second is mixed: the one further from its side's level (noise keeps
        # the other near 1 or 0). Seconds before it moved `high`'s worth each.
        if f2 > 1.0 - f1:
            mixed, frac = k, f2
        else:
            mixed, frac = k - 1, f1
        at = times[mixed] - timedelta(seconds=1) + timedelta(seconds=frac)
        before = float(v[:mixed].sum()) + frac * high
        out.append({"at": at, "offset_s": (at - first_start).total_seconds(),
                    "level_before_bytes_per_s": high, "level_after_bytes_per_s": low,
                    "bytes_before": before})
    return out


def asymmetry(forward_mean: float | None, reverse_mean: float | None) -> float | None:
    """Direction asymmetry (seed 004 Fig. 4): forward mean over reverse mean; 1 is
    symmetric, None when either side is unknown or the reverse carried nothing."""
    if forward_mean is None or reverse_mean is None or reverse_mean <= 0:
        return None
    return forward_mean / reverse_mean


def mean_and_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation over experiments (None when too few)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if v.size == 0:
        return None, None
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else None


def az_pair_cv_rmse(series: dict[tuple[str, str], dict[datetime, float]]
                    ) -> list[dict[str, Any]]:
    """CV_RMSE (seed 004 §IV-C, design.md) between every two AZ pairs of one region pair,
    over the slots (hours) both measured: X and Y are their experiment means in the same
    slot. `series` maps (src_zone, dst_zone) to {slot: mean bytes/s}."""
    keys = sorted(series)
    out: list[dict[str, Any]] = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            common = sorted(series[a].keys() & series[b].keys())
            x = np.asarray([series[a][t] for t in common], dtype=np.float64)
            y = np.asarray([series[b][t] for t in common], dtype=np.float64)
            out.append({"a": {"src_zone": a[0], "dst_zone": a[1]},
                        "b": {"src_zone": b[0], "dst_zone": b[1]},
                        "slots": len(common), "cv_rmse": cv_rmse(x, y) if common else None})
    return out


@dataclass(frozen=True)
class Measured:
    """One direction of one experiment, reduced to its mean."""

    start: datetime
    end: datetime
    mean_bytes_per_s: float


def degradations(runs: Sequence[Measured], fraction: float, min_duration: timedelta
                 ) -> tuple[float | None, list[dict[str, Any]]]:
    """Long degradations of one flow (seed 004 §IV-C, Fig. 8a): maximal runs of consecutive
    experiments whose mean is below `fraction` of the flow's norm (the median of its
    experiment means in the range), lasting from the first one's start to the last one's end
    at least `min_duration`. Returns the norm and the runs with start, end, level (mean of
    the runs' means), norm and experiment count."""
    ordered = sorted(runs, key=lambda r: r.start)
    if not ordered:
        return None, []
    norm = float(np.median([r.mean_bytes_per_s for r in ordered]))
    out: list[dict[str, Any]] = []
    current: list[Measured] = []

    def close() -> None:
        if current and current[-1].end - current[0].start >= min_duration:
            out.append({"start": current[0].start, "end": current[-1].end,
                        "level_bytes_per_s": float(np.mean([r.mean_bytes_per_s
                                                             for r in current])),
                        "norm_bytes_per_s": norm, "experiments": len(current)})
        current.clear()

    for r in ordered:
        if r.mean_bytes_per_s < fraction * norm:
            current.append(r)
        else:
            close()
    close()
    return norm, out
