"""Summary statistics, Welch's t-test and CV_RMSE against numpy/scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from stormwatch.services.analytics.sketches import Sketch
from stormwatch.services.analytics.stats import Distribution, Moments, cv_rmse, welch_t_test


def test_the_exact_summary_equals_numpy() -> None:
    rng = np.random.default_rng(1)
    v = rng.lognormal(6, 0.5, 10_000)
    s = Distribution.exact(v, failures=25).summary()
    assert s["samples"] == 10_025 and s["loss_rate"] == pytest.approx(25 / 10_025)
    assert s["mean"] == pytest.approx(v.mean())
    assert s["std"] == pytest.approx(v.std(ddof=1))
    assert s["cov"] == pytest.approx(v.std(ddof=1) / v.mean())
    assert s["percentiles"]["p99_99"] == np.quantile(v, 0.9999, method="lower")
    assert s["beyond"]["p99_99"] == 10_000 - 1 - int(0.9999 * 9_999)
    assert s["max_over_mean"] == pytest.approx(v.max() / v.mean())


def test_a_sketched_distribution_clamps_to_the_observed_range() -> None:
    v = np.array([100.0, 100.0, 100.0])
    m = Moments(samples=3, count=3, total=300, total_sq=30_000, minimum=100, maximum=100)
    d = Distribution.sketched(Sketch.from_values(v), m)
    assert d.quantiles([0.0, 0.5, 1.0]) == [100.0, 100.0, 100.0]
    assert d.box()["p95"] == 100.0


def test_histogram_and_tail_cdf() -> None:
    v = np.arange(1, 1001, dtype=float)
    d = Distribution.exact(v)
    h = d.histogram(100)
    assert sum(b["count"] for b in h) == 1000
    tail = d.cdf(tail_fraction=0.05)
    assert tail[-1]["fraction"] == 1.0
    assert tail[1]["fraction"] >= 0.95 and tail[0]["fraction"] < 0.95


def test_welch_matches_scipy() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(100, 10, 500), rng.normal(103, 25, 300)
    got = welch_t_test(Distribution.exact(a), Distribution.exact(b))
    want = stats.ttest_ind(a, b, equal_var=False)
    assert got["t"] == pytest.approx(want.statistic)
    assert got["p_value"] == pytest.approx(want.pvalue)


def test_cv_rmse_follows_its_definition() -> None:
    x = np.array([10.0, 12.0, 11.0, 13.0])
    y = np.array([11.0, 12.0, 10.0, 15.0])
    want = np.sqrt(np.mean((x - y) ** 2)) / ((x.mean() + y.mean()) / 2)
    assert cv_rmse(x, y) == pytest.approx(want)


def test_only_non_empty_histogram_buckets_count_against_the_limit() -> None:
    body = np.full(1000, 75_000.0)
    spikes = np.array([2_000_000.0, 3_000_000.0])
    d = Distribution.exact(np.concatenate([body, spikes]))
    hist = d.histogram(50.0)  # 58 000 buckets wide, three of them non-empty
    assert [b["count"] for b in hist] == [1000.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="non-empty"):
        Distribution.exact(np.arange(20_000) * 1.5).histogram(1.0)
