"""Seed 003 §1 timeouts from a known distribution: the quantile and its support."""

import numpy as np
import pytest

from stormwatch.services.advisors.timeouts import (
    TimeoutInputError,
    by_hour,
    merge,
    target_probability,
    timeout_for,
)
from stormwatch.services.analytics.sketches import Sketch
from stormwatch.services.analytics.stats import Distribution, Moments


def test_one_false_timeout_per_hour_at_500_messages_per_second_is_p_of_one_in_1_8_million(
) -> None:
    assert target_probability(500, 1) == pytest.approx(1 / 1_800_000)


def test_a_tolerated_rate_above_the_message_rate_is_refused_naming_the_field() -> None:
    with pytest.raises(TimeoutInputError) as e:
        target_probability(0.1, 3600)  # 1/s tolerated at 0.1 msg/s
    assert e.value.field == "false_timeouts_per_hour"
    with pytest.raises(TimeoutInputError) as e:
        target_probability(0, 1)
    assert e.value.field == "msg_rate_per_s"


def test_the_timeout_is_the_exact_quantile_of_raw_samples_with_no_warning_when_supported(
) -> None:
    # 1..100 000 µs, shuffled: P(X > T) ≤ 1e-3 first holds at T = 99 900 (100 values above).
    rng = np.random.default_rng(3)
    d = Distribution.exact(rng.permutation(np.arange(1, 100_001, dtype=float)))
    r = timeout_for(d, 1e-3)
    assert r["timeout_us"] == 99_900
    assert r["tail_samples_expected"] == pytest.approx(100)
    assert r["warning"] is None
    assert r["exact"] is True


def test_too_few_samples_beyond_the_quantile_give_a_warning_with_the_samples_needed() -> None:
    # 1000 samples at p = 1e-3: one sample expected beyond T, 10 needed → 10 000 samples.
    d = Distribution.exact(np.arange(1, 1001, dtype=float))
    r = timeout_for(d, 1e-3)
    assert r["timeout_us"] == 999
    assert r["samples_needed"] == 10_000
    assert "9000 more" in r["warning"]
    # p·N < 1: T can only be the largest value seen, and the warning says so.
    r = timeout_for(d, 1e-4)
    assert r["timeout_us"] == 1000
    assert "largest value seen" in r["warning"]


def test_losses_count_beyond_every_timeout() -> None:
    vals = np.arange(1, 10_001, dtype=float)
    # 10 000 values and 5 losses at p = 1e-3 (10.005 allowed): 5 left for values → T = 9995.
    r = timeout_for(Distribution.exact(vals, failures=5), 1e-3)
    assert r["timeout_us"] == 9995
    # More losses than the target allows: no timeout can meet it.
    r = timeout_for(Distribution.exact(vals, failures=50), 1e-3)
    assert r["achievable"] is False
    assert r["timeout_us"] is None
    assert "loss rate" in r["warning"]


def test_a_sketched_distribution_gives_the_quantile_within_one_percent() -> None:
    rng = np.random.default_rng(5)
    vals = rng.lognormal(mean=7.0, sigma=0.6, size=200_000)
    exact = timeout_for(Distribution.exact(vals), 1e-3)["timeout_us"]
    m = Moments(samples=vals.size, count=vals.size, total=float(vals.sum()),
                total_sq=float(vals @ vals), minimum=float(vals.min()), maximum=float(vals.max()))
    sk = timeout_for(Distribution.sketched(Sketch.from_values(vals), m), 1e-3)
    assert sk["exact"] is False
    assert sk["timeout_us"] == pytest.approx(exact, rel=0.011)


def test_the_timeout_by_hour_follows_a_slow_hour_and_flags_empty_hours() -> None:
    fast = Distribution.exact(np.arange(1, 10_001, dtype=float))
    slow = Distribution.exact(np.arange(1, 10_001, dtype=float) * 3)
    rows = by_hour({0: fast, 13: slow}, 1e-3)
    assert len(rows) == 24
    assert rows[13]["timeout_us"] == 3 * rows[0]["timeout_us"]
    assert rows[5]["timeout_us"] is None and rows[5]["warning"] == "no samples"


def test_merging_exact_distributions_keeps_samples_and_losses() -> None:
    d = merge([Distribution.exact([1.0, 2.0], failures=1), Distribution.exact([3.0])])
    assert d.moments.samples == 4 and d.moments.failures == 1
    assert list(d.values) == [1.0, 2.0, 3.0]


def test_an_unmet_rate_comes_with_the_best_the_data_supports_and_no_false_promise_of_more_data(
) -> None:
    # 1000 values and 2 losses at one false timeout per hour at 500 msg/s (p = 1/1.8 M): the
    # losses alone exceed p, so more data at this loss rate never meets it.
    vals = np.arange(1, 1001, dtype=float)
    r = timeout_for(Distribution.exact(vals, failures=2), 1 / 1_800_000)
    assert r["achievable"] is False and r["timeout_us"] is None
    assert r["samples_needed"] is None
    # The best supported: 10 values beyond T besides the 2 losses, p = 12/1002, T = 990.
    assert r["best_probability"] == pytest.approx(12 / 1002)
    assert r["best_timeout_us"] == 990


def test_a_rate_the_data_cannot_yet_support_says_how_many_samples_it_needs_at_the_loss_rate(
) -> None:
    vals = np.arange(1, 10_001, dtype=float)
    # p = 1e-4, loss rate 1/10001: 10 / (p - loss rate) samples are needed, not 10 / p.
    r = timeout_for(Distribution.exact(vals, failures=1), 1e-4)
    assert r["achievable"] is True and r["warning"] is not None
    assert r["samples_needed"] == int(np.ceil(10 / (1e-4 - 1 / 10_001)))
    assert r["best_probability"] == pytest.approx(11 / 10_001)
    assert r["best_timeout_us"] == 9990
    # Well supported: no best to offer.
    assert timeout_for(Distribution.exact(vals), 1e-2)["best_probability"] is None
