"""Rankings with confidence intervals that cover the truth and say how they were made."""

import numpy as np
import pytest

from stormwatch.services.advisors.rankings import RankingError, estimate, rank
from stormwatch.services.analytics.sketches import Sketch
from stormwatch.services.analytics.stats import Distribution, Moments


def _sketched(v: np.ndarray) -> Distribution:
    m = Moments(samples=v.size, count=v.size, total=float(v.sum()), total_sq=float(v @ v),
                minimum=float(v.min()), maximum=float(v.max()))
    return Distribution.sketched(Sketch.from_values(v), m)


def test_the_percentile_interval_covers_the_true_quantile_in_about_95_percent_of_samples(
) -> None:
    rng = np.random.default_rng(11)
    true_p90 = float(np.exp(5 + 0.5 * 1.2815515655446004))  # lognormal(5, 0.5) p90
    hits = 0
    for _ in range(200):
        e = estimate(Distribution.exact(rng.lognormal(5, 0.5, 500)), "p90")
        hits += e["ci_low"] <= true_p90 <= e["ci_high"]
        assert e["ci_method"] == "order_statistic"
    assert 0.90 <= hits / 200 <= 0.99


def test_a_sketched_percentile_interval_is_widened_by_the_sketch_error() -> None:
    v = np.random.default_rng(2).lognormal(5, 0.5, 5000)
    exact = estimate(Distribution.exact(v), "p99")
    sk = estimate(_sketched(v), "p99")
    assert sk["ci_method"] == "order_statistic_sketch"
    assert sk["value"] == pytest.approx(exact["value"], rel=0.011)
    assert sk["ci_low"] < exact["value"] < sk["ci_high"]
    assert sk["ci_high"] - sk["ci_low"] > exact["ci_high"] - exact["ci_low"]


def test_ranking_orders_by_value_and_marks_overlapping_intervals() -> None:
    rng = np.random.default_rng(4)
    groups = {"fast": Distribution.exact(rng.normal(100, 5, 2000)),
              "also_fast": Distribution.exact(rng.normal(100.2, 5, 2000)),
              "slow": Distribution.exact(rng.normal(200, 5, 2000)),
              "empty": Distribution.exact([])}
    rows = rank(groups, "mean")
    assert [r["key"] for r in rows[:3]] in (["fast", "also_fast", "slow"],
                                            ["also_fast", "fast", "slow"])
    assert rows[1]["overlaps_previous"] is True
    assert rows[2]["overlaps_previous"] is False
    assert rows[3]["key"] == "empty" and rows[3]["rank"] is None
    mean = rows[2]
    assert mean["ci_low"] < 200 < mean["ci_high"]


def test_loss_rate_uses_a_wilson_interval_and_unknown_stats_are_refused() -> None:
    e = estimate(Distribution.exact(np.ones(990), failures=10), "loss_rate")
    assert e["value"] == pytest.approx(0.01)
    assert e["ci_low"] < 0.01 < e["ci_high"] and e["ci_method"] == "wilson"
    with pytest.raises(RankingError) as err:
        estimate(Distribution.exact([1.0]), "median-ish")
    assert err.value.field == "stat"
