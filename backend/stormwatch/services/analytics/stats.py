"""Distributions from raw samples (exact) or merged sketches (within 1% relative error),
with the statistics of the design's Analytics section. Percentiles always come from the
samples or a merged sketch of them, never from averaging per-window percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sp_stats

from stormwatch.services.analytics.sketches import Sketch, key_values, quantiles_from_bins

SUMMARY_PERCENTILES = (5.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999)


def pct_label(p: float) -> str:
    """99.99 -> 'p99_99', 50 -> 'p50'."""
    text = f"{p:g}"
    return "p" + text.replace(".", "_")


def beyond_count(count: float, q: float) -> int:
    """Samples above the percentile's rank: the p-th percentile is the sample of rank
    floor(q (n - 1)) (0-based), so n - 1 - that rank lie beyond it (seed 003 Lesson 7: a
    tail percentile with few samples beyond it is not supported by the data)."""
    n = int(round(count))
    if n <= 0:
        return 0
    return n - 1 - int(math.floor(q * (n - 1) + 1e-9))


def parse_percentiles(text: str | Sequence[float]) -> list[float]:
    if isinstance(text, str):
        items = [t.strip().lstrip("pP").replace("_", ".") for t in text.split(",") if t.strip()]
        ps = [float(t) for t in items]
    else:
        ps = [float(p) for p in text]
    for p in ps:
        if not 0.0 <= p <= 100.0 or math.isnan(p):
            raise ValueError(f"percentile {p} is outside [0, 100]")
    return ps


@dataclass
class Moments:
    """Mergeable counts and power sums of one series or group."""

    samples: int = 0  # every sample, including losses and failures
    failures: int = 0
    count: int = 0  # samples carrying a value
    total: float = 0.0
    total_sq: float = 0.0
    minimum: float = math.inf
    maximum: float = -math.inf

    def add(self, other: Moments) -> None:
        self.samples += other.samples
        self.failures += other.failures
        self.count += other.count
        self.total += other.total
        self.total_sq += other.total_sq
        self.minimum = min(self.minimum, other.minimum)
        self.maximum = max(self.maximum, other.maximum)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation (n - 1)."""
        if self.count < 2:
            return 0.0 if self.count == 1 else None
        var = (self.total_sq - self.total * self.total / self.count) / (self.count - 1)
        return math.sqrt(max(var, 0.0))

    @property
    def failure_rate(self) -> float | None:
        return self.failures / self.samples if self.samples else None


@dataclass
class Distribution:
    """Exact (sorted raw values) or sketched (merged DDSketch + moments)."""

    moments: Moments
    values: NDArray[np.float64] | None = None  # sorted, exact
    sketch: Sketch | None = None
    _cum: NDArray[np.float64] | None = field(default=None, repr=False)

    @classmethod
    def exact(cls, values: NDArray[np.float64] | Sequence[float],
              failures: int = 0, presorted: bool = False) -> Distribution:
        v = np.asarray(values, dtype=np.float64)
        if not presorted:
            v = np.sort(v)
        m = Moments(samples=int(v.size) + failures, failures=failures, count=int(v.size),
                    total=float(v.sum()), total_sq=float(np.dot(v, v)),
                    minimum=float(v[0]) if v.size else math.inf,
                    maximum=float(v[-1]) if v.size else -math.inf)
        return cls(m, values=v)

    @classmethod
    def sketched(cls, sketch: Sketch, moments: Moments) -> Distribution:
        return cls(moments, sketch=sketch)

    @property
    def is_exact(self) -> bool:
        return self.values is not None

    @property
    def count(self) -> int:
        return self.moments.count

    def quantiles(self, qs: Sequence[float]) -> list[float | None]:
        """Quantiles for q in [0, 1]."""
        if self.count == 0:
            return [None for _ in qs]
        if self.values is not None:
            # The lower rank, as the sketches (docs/analysis.md, "One percentile rule").
            return [float(x) for x in np.quantile(self.values, list(qs), method="lower")]
        assert self.sketch is not None
        out = quantiles_from_bins(self.sketch.offset, self.sketch.counts, self.sketch.zero_count,
                                  qs)
        lo, hi = self.moments.minimum, self.moments.maximum
        # The sketch's bin value can sit up to 1% outside the observed range; clamp to it.
        return [None if x is None else min(max(x, lo), hi) for x in out]

    def percentiles(self, ps: Sequence[float]) -> dict[str, float | None]:
        return dict(zip([pct_label(p) for p in ps], self.quantiles([p / 100 for p in ps]),
                        strict=True))

    def beyond(self, ps: Sequence[float]) -> dict[str, int]:
        """How many samples lie above each percentile (keyed like `percentiles`)."""
        return {pct_label(p): beyond_count(self.count, p / 100) for p in ps}

    def summary(self, percentiles: Sequence[float] = SUMMARY_PERCENTILES) -> dict[str, Any]:
        m = self.moments
        mean, std = m.mean, m.std
        pcts = self.percentiles(percentiles)
        p9999 = self.quantiles([0.9999])[0]
        return {
            "samples": m.samples,
            "count": m.count,
            "failures": m.failures,
            "loss_rate": m.failure_rate,
            "mean": mean,
            "std": std,
            "cov": (std / mean) if (mean and std is not None) else None,
            "min": m.minimum if m.count else None,
            "max": m.maximum if m.count else None,
            "percentiles": pcts,
            "beyond": self.beyond(percentiles),
            "p99_99_over_mean": (p9999 / mean) if (mean and p9999 is not None) else None,
            "max_over_mean": (m.maximum / mean) if (mean and m.count) else None,
            "exact": self.is_exact,
        }

    def box(self) -> dict[str, Any]:
        """Seed 003 Fig. 3: box at p25/p50/p75, whiskers at p5/p95, plus the mean."""
        q = self.quantiles([0.05, 0.25, 0.5, 0.75, 0.95])
        return {"count": self.count, "p5": q[0], "p25": q[1], "p50": q[2], "p75": q[3],
                "p95": q[4], "mean": self.moments.mean, "loss_rate": self.moments.failure_rate}

    def _points(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(value, weight) pairs: raw values with weight 1, or sketch bins at their value."""
        if self.values is not None:
            return self.values, np.ones(self.values.size)
        assert self.sketch is not None
        s = self.sketch
        nz = np.flatnonzero(s.counts)
        vals = key_values(s.offset + nz)
        vals = np.clip(vals, self.moments.minimum, self.moments.maximum)
        w = s.counts[nz]
        if s.zero_count:
            vals = np.concatenate([[0.0], vals])
            w = np.concatenate([[s.zero_count], w])
        return vals, w

    def histogram(self, bucket_width: float, max_buckets: int = 10_000) -> list[dict[str, float]]:
        if bucket_width <= 0:
            raise ValueError("bucket_width must be positive")
        if self.count == 0:
            return []
        vals, w = self._points()
        idx = np.floor(vals / bucket_width).astype(np.int64)
        # Only non-empty buckets count against the limit: buckets narrow enough to resolve a
        # 75 ms body to 50 us stay allowed when rare spikes reach seconds.
        keys, inv = np.unique(idx, return_inverse=True)
        if keys.size > max_buckets:
            raise ValueError(f"bucket width {bucket_width} gives {keys.size} non-empty "
                             f"buckets (max {max_buckets})")
        counts = np.bincount(inv.ravel(), weights=w)
        return [{"lower": int(k) * bucket_width, "upper": (int(k) + 1) * bucket_width,
                 "count": float(c)} for k, c in zip(keys.tolist(), counts, strict=True)]

    def cdf(self, tail_fraction: float | None = None,
            max_points: int = 2000) -> list[dict[str, float]]:
        """CDF points (value, fraction <= value); `tail_fraction=0.05` keeps the top 5%."""
        if self.count == 0:
            return []
        vals, w = self._points()
        uniq, inv = np.unique(vals, return_inverse=True)
        wsum = np.bincount(inv, weights=w)
        frac = np.cumsum(wsum) / wsum.sum()
        if tail_fraction is not None:
            keep = frac >= 1.0 - tail_fraction
            first = max(int(np.argmax(keep)) - 1, 0) if keep.any() else 0
            uniq, frac = uniq[first:], frac[first:]
        if uniq.size > max_points:
            # Even spacing in rank keeps both the body and the tail legible.
            pick = np.unique(np.searchsorted(frac, np.linspace(frac[0], 1.0, max_points)))
            pick = np.clip(pick, 0, uniq.size - 1)
            uniq, frac = uniq[pick], frac[pick]
        return [{"value": float(v), "fraction": float(f)} for v, f in zip(uniq, frac, strict=True)]


def welch_t_test(a: Distribution, b: Distribution) -> dict[str, Any]:
    """Welch's unequal-variance t-test on the means (seed 003 §4.3), from moments only."""
    ma, mb = a.moments, b.moments
    if ma.count < 2 or mb.count < 2:
        raise ValueError("each group needs at least two samples")
    va, vb = (ma.std or 0.0) ** 2, (mb.std or 0.0) ** 2
    se2 = va / ma.count + vb / mb.count
    mean_a, mean_b = ma.mean or 0.0, mb.mean or 0.0
    if se2 == 0:
        t = math.inf if mean_a != mean_b else 0.0
        dof = float(ma.count + mb.count - 2)
        p = 0.0 if mean_a != mean_b else 1.0
    else:
        t = (mean_a - mean_b) / math.sqrt(se2)
        dof = se2**2 / ((va / ma.count) ** 2 / (ma.count - 1)
                        + (vb / mb.count) ** 2 / (mb.count - 1))
        p = float(2 * sp_stats.t.sf(abs(t), dof))
    return {"mean_a": mean_a, "mean_b": mean_b, "std_a": ma.std, "std_b": mb.std,
            "count_a": ma.count, "count_b": mb.count, "t": t, "dof": dof, "p_value": p,
            "difference": mean_a - mean_b}


def cv_rmse(x: NDArray[np.float64], y: NDArray[np.float64]) -> float | None:
    """Seed 004 §IV-C: sqrt(E[(X - Y)^2]) / mean(E[X], E[Y]) over aligned windows."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size == 0:
        return None
    denom = (x.mean() + y.mean()) / 2
    if denom == 0:
        return None
    return float(np.sqrt(np.mean((x - y) ** 2)) / denom)
