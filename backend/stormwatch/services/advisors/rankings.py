"""Rankings by a measured statistic, each figure with a 95% confidence interval.

- mean: normal interval, mean ± 1.96·σ/√n.
- a percentile q: the distribution-free order-statistic interval — the values at ranks
  n·q ± 1.96·√(n·q·(1−q)) (the binomial count of samples below the true quantile) — read
  from the raw samples, or from the merged sketch, whose bins add up to 1% relative error
  (widened by that 1%).
- std: chi-square interval on the variance (assumes roughly normal samples; say so).
- loss_rate: Wilson score interval.
"""

from __future__ import annotations

import math
from typing import Any

from scipy import stats as sp_stats

from stormwatch.services.analytics.stats import Distribution

Z95 = 1.959963984540054
SKETCH_RELATIVE_ERROR = 0.01


class RankingError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# Ranked besides any percentile pX (0 < X < 100).
RANK_STATISTICS = ("mean", "std", "loss_rate")


def parse_stat(stat: str) -> tuple[str, float | None]:
    s = stat.strip().lower()
    if s in RANK_STATISTICS:
        return s, None
    if s.startswith("p"):
        try:
            q = float(s[1:].replace("_", "."))
        except ValueError:
            q = -1.0
        if 0 < q < 100:
            return "quantile", q / 100
    raise RankingError("stat", "stat must be mean, std, loss_rate or a percentile such as "
                       "p50, p99, p99.9")


def estimate(d: Distribution, stat: str) -> dict[str, Any]:
    """The statistic with its 95% interval (low, high) and the method used."""
    kind, q = parse_stat(stat)
    m = d.moments
    n = m.count
    out: dict[str, Any] = {"value": None, "ci_low": None, "ci_high": None, "count": n,
                           "samples": m.samples, "ci_method": None}
    if kind == "loss_rate":
        total = m.samples
        if total == 0:
            return out
        phat = m.failures / total
        denom = 1 + Z95 ** 2 / total
        centre = (phat + Z95 ** 2 / (2 * total)) / denom
        half = Z95 * math.sqrt(phat * (1 - phat) / total + Z95 ** 2 / (4 * total ** 2)) / denom
        out.update(value=phat, ci_low=max(centre - half, 0.0), ci_high=min(centre + half, 1.0),
                   ci_method="wilson")
        return out
    if n == 0:
        return out
    if kind == "mean":
        mean = m.mean
        assert mean is not None
        half = Z95 * (m.std or 0.0) / math.sqrt(n)
        out.update(value=mean, ci_low=mean - half, ci_high=mean + half, ci_method="normal")
        return out
    if kind == "std":
        sd = m.std
        if sd is None or n < 2:
            out["value"] = sd
            return out
        var = sd * sd
        lo = math.sqrt((n - 1) * var / sp_stats.chi2.ppf(0.975, n - 1))
        hi = math.sqrt((n - 1) * var / sp_stats.chi2.ppf(0.025, n - 1))
        out.update(value=sd, ci_low=lo, ci_high=hi, ci_method="chi_square")
        return out
    assert q is not None
    half_rank = Z95 * math.sqrt(n * q * (1 - q))
    q_lo = max((n * q - half_rank) / n, 0.0)
    q_hi = min((n * q + half_rank) / n, 1.0)
    v, qlo, qhi = d.quantiles([q, q_lo, q_hi])
    if d.is_exact:
        out.update(value=v, ci_low=qlo, ci_high=qhi, ci_method="order_statistic")
    else:
        e = SKETCH_RELATIVE_ERROR
        out.update(value=v, ci_low=None if qlo is None else qlo * (1 - e),
                   ci_high=None if qhi is None else qhi * (1 + e),
                   ci_method="order_statistic_sketch")
    return out


def rank(groups: dict[str, Distribution], stat: str, descending: bool = False
         ) -> list[dict[str, Any]]:
    rows = [{"key": k, **estimate(d, stat)} for k, d in groups.items()]
    have = [r for r in rows if r["value"] is not None]
    none = [r for r in rows if r["value"] is None]
    have.sort(key=lambda r: r["value"], reverse=descending)
    for i, r in enumerate(have):
        r["rank"] = i + 1
        # Ties within uncertainty: intervals overlapping the neighbour above.
        prev = have[i - 1] if i else None
        r["overlaps_previous"] = bool(
            prev is not None and r["ci_low"] is not None and prev["ci_high"] is not None
            and (r["ci_low"] <= prev["ci_high"] if not descending
                 else r["ci_high"] >= prev["ci_low"]))
    for r in none:
        r["rank"] = None
        r["overlaps_previous"] = False
    return have + none
