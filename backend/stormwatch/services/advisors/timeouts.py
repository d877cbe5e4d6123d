"""Seed 003 §1: a timeout set from the measured distribution, not guessed.

A protocol sending `msg_rate_per_s` messages and tolerating `false_per_hour` false timeouts
needs P(no reply within T) ≤ p = false_per_hour / 3600 / msg_rate_per_s. Lost replies
(status ≠ 0) exceed every T, so with L losses among N samples and C values:
L/N + (C/N)·(1 − F(T)) ≤ p  ⇔  F(T) ≥ 1 − (p·N − L)/C, and T is that quantile of the values —
exact from raw samples (the order statistic at or above it) or from a merged sketch (1%
relative error). When p·N, the number of samples expected beyond T, is small, the quantile
rests on a handful of observations (at p·N < 1 it is the largest one seen): we warn.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from stormwatch.services.analytics.sketches import Sketch, merge_sketches
from stormwatch.services.analytics.stats import Distribution, Moments

# Samples expected beyond T below which T is flagged: with k exceedances the tail
# probability is estimated with relative standard error ≈ 1/√k (≈ 32% at 10).
MIN_TAIL_SAMPLES = 10


class TimeoutInputError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def target_probability(msg_rate_per_s: float, false_per_hour: float) -> float:
    if not msg_rate_per_s > 0 or not math.isfinite(msg_rate_per_s):
        raise TimeoutInputError("msg_rate_per_s", "msg_rate_per_s must be a positive number")
    if not false_per_hour > 0 or not math.isfinite(false_per_hour):
        raise TimeoutInputError("false_timeouts_per_hour",
                                "false_timeouts_per_hour must be a positive number")
    per_s = false_per_hour / 3600.0
    if per_s > msg_rate_per_s:
        raise TimeoutInputError("false_timeouts_per_hour",
                                "the tolerated false-timeout rate exceeds the message rate")
    return per_s / msg_rate_per_s


def _quantile_t(d: Distribution, p: float) -> tuple[float | None, float | None]:
    """(q, T): the quantile of the values taken as T for P(beyond T) ≤ p, and T (µs); (None,
    None) when the losses alone exceed p."""
    n, losses, count = d.moments.samples, d.moments.failures, d.moments.count
    allowed = p * n - losses
    if allowed < 0 or count == 0:
        return None, None
    q = min(max(1.0 - allowed / count, 0.0), 1.0)
    if d.values is not None:
        # The smallest observed value with at most `allowed` values above it.
        idx = min(max(math.ceil(count - allowed) - 1, 0), count - 1)
        return q, float(d.values[idx])
    return q, d.quantiles([q])[0]


def timeout_for(d: Distribution, p: float) -> dict[str, Any]:
    """T with P(RTT > T) ≤ p over `d` (values in µs), and how well the data supports it.

    Where it does not (too few samples beyond T, or losses alone above p), also the best the
    data does support: the smallest probability with MIN_TAIL_SAMPLES values beyond T besides
    the losses, and its T; and how many samples p needs at the measured loss rate (None when
    that loss rate alone exceeds p: no amount of data helps)."""
    n = d.moments.samples
    losses = d.moments.failures
    count = d.moments.count
    tail_expected = p * n
    loss_rate = losses / n if n else 0.0
    needed = math.ceil(MIN_TAIL_SAMPLES / (p - loss_rate)) if p > loss_rate else None
    out: dict[str, Any] = {"samples": n, "losses": losses, "target_probability": p,
                           "tail_samples_expected": tail_expected, "exact": d.is_exact,
                           "timeout_us": None, "quantile": None, "achievable": True,
                           "warning": None, "samples_needed": needed,
                           "best_probability": None, "best_timeout_us": None}
    if n == 0 or count == 0:
        out["achievable"] = False
        out["warning"] = "no samples in the range"
        return out
    q, t = _quantile_t(d, p)
    if q is None or tail_expected < MIN_TAIL_SAMPLES:
        best = min(1.0, (losses + MIN_TAIL_SAMPLES) / n)
        out["best_probability"] = best
        out["best_timeout_us"] = _quantile_t(d, best)[1]
    if q is None:
        out["achievable"] = False
        out["warning"] = (f"the loss rate ({loss_rate:.3g}) alone exceeds the tolerated "
                          f"probability {p:.3g}: no timeout meets it")
        return out
    out["quantile"] = q
    out["timeout_us"] = t
    if tail_expected < MIN_TAIL_SAMPLES:
        need = math.ceil(MIN_TAIL_SAMPLES / p)
        out["warning"] = (f"only {tail_expected:.3g} of {n} samples are expected beyond T; "
                          f"at least {MIN_TAIL_SAMPLES} are needed ({need} samples, "
                          f"{max(need - n, 0)} more)"
                          + ("; T is the largest value seen" if tail_expected < 1 else ""))
    return out


def by_hour(hours: dict[int, Distribution], p: float) -> list[dict[str, Any]]:
    """T per UTC hour of day (seed 003 Lesson 4: latency follows the day)."""
    rows = []
    for h in range(24):
        d = hours.get(h)
        if d is None:
            rows.append({"hour": h, "samples": 0, "timeout_us": None, "warning": "no samples"})
            continue
        r = timeout_for(d, p)
        rows.append({"hour": h, "samples": r["samples"], "timeout_us": r["timeout_us"],
                     "warning": r["warning"]})
    return rows


def merge(dists: list[Distribution]) -> Distribution:
    """One distribution from several (values concatenated, or sketches merged)."""
    if all(d.values is not None for d in dists):
        vals = np.concatenate([d.values for d in dists if d.values is not None]) if dists else \
            np.zeros(0)
        out = Distribution.exact(vals, failures=sum(d.moments.failures for d in dists))
        out.moments.samples = sum(d.moments.samples for d in dists)
        return out
    m = Moments()
    for d in dists:
        m.add(d.moments)
    sk = merge_sketches([d.sketch if d.sketch is not None else Sketch.from_values(
        d.values if d.values is not None else []) for d in dists])
    return Distribution.sketched(sk, m)
