"""Throughput analyses against hand-computed values, and transitions on shapes that could
fool them (noise, a slow ramp, a single dip, a short burst, a periodic swing, a step on a
drift, a step inside one second)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from stormwatch.services.throughput import analysis

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
HIGH, LOW = 850e6 / 8, 400e6 / 8  # seed 004 Fig. 9: ~850 -> ~400 Mbit/s


def seconds(n: int) -> list[datetime]:
    # Samples are stamped at the end of their second.
    return [T0 + timedelta(seconds=i + 1) for i in range(n)]


def switching(n: int, switch_s: float, high: float = HIGH, low: float = LOW) -> np.ndarray:
    """Per-second bytes of a flow at `high` that switches to `low` at `switch_s`."""
    out = np.empty(n)
    for i in range(n):
        frac_high = min(max(switch_s - i, 0.0), 1.0)
        out[i] = frac_high * high + (1 - frac_high) * low
    return out


def test_direction_stats_match_hand_computed_mean_extremes_cov_and_bytes():
    v = np.array([100.0, 200.0, 300.0, 400.0])
    st = analysis.direction_stats(v, np.array([0.0, 0.1, np.nan, 0.3]),
                                  np.array([10.0, 30.0, np.nan, 20.0]))
    # mean 250; sample variance ((150^2 + 50^2) * 2) / 3 = 50000 / 3; sigma = 129.0994
    assert st["mean_bytes_per_s"] == 250.0
    assert st["min_bytes_per_s"] == 100.0 and st["max_bytes_per_s"] == 400.0
    assert st["std_bytes_per_s"] == pytest.approx(math.sqrt(50000 / 3))
    assert st["cov"] == pytest.approx(math.sqrt(50000 / 3) / 250)
    assert st["bytes"] == 1000.0 and st["seconds"] == 4
    assert st["loss_ratio_mean"] == pytest.approx(0.4 / 3)
    assert st["jitter_us_mean"] == pytest.approx(20.0) and st["jitter_us_max"] == 30.0


def test_cov_of_a_constant_series_is_zero_and_of_an_empty_one_unknown():
    assert analysis.direction_stats(np.full(10, 5.0))["cov"] == 0.0
    assert analysis.direction_stats(np.array([]))["cov"] is None


def test_cv_rmse_between_two_az_pairs_matches_the_hand_computed_value():
    # X = 10, 20, 30; Y = 12, 18, 33 in the same three hours. Differences -2, 2, -3:
    # sqrt((4 + 4 + 9) / 3) = sqrt(17/3) = 2.3805; means 20 and 21 -> denominator 20.5.
    h = [T0 + timedelta(hours=i) for i in range(4)]
    out = analysis.az_pair_cv_rmse({
        ("a", "a"): {h[0]: 10.0, h[1]: 20.0, h[2]: 30.0},
        ("b", "b"): {h[0]: 12.0, h[1]: 18.0, h[2]: 33.0, h[3]: 99.0},  # h[3] unmatched
    })
    assert len(out) == 1
    assert out[0]["slots"] == 3
    assert out[0]["cv_rmse"] == pytest.approx(math.sqrt(17 / 3) / 20.5)
    assert out[0]["a"] == {"src_zone": "a", "dst_zone": "a"}


def test_asymmetry_is_forward_over_reverse_and_unknown_without_a_reverse():
    assert analysis.asymmetry(150.0, 100.0) == 1.5
    assert analysis.asymmetry(50.0, 200.0) == 0.25
    assert analysis.asymmetry(150.0, None) is None
    assert analysis.asymmetry(150.0, 0.0) is None


def test_mean_and_std_over_experiments_use_the_sample_deviation():
    mean, std = analysis.mean_and_std([2.0, 4.0, 6.0])
    assert mean == 4.0 and std == 2.0


@pytest.mark.parametrize("switch_s", [100.0, 100.3, 57.75, 250.5])
def test_a_high_to_low_switch_is_found_with_its_time_levels_and_volume(switch_s):
    rng = np.random.default_rng(int(switch_s * 100))
    v = switching(300, switch_s) * (1 + rng.normal(0, 0.03, 300))
    found = analysis.transitions(seconds(300), v)
    assert len(found) == 1
    t = found[0]
    assert t["offset_s"] == pytest.approx(switch_s, abs=0.5)
    assert t["at"] == pytest.approx(T0 + timedelta(seconds=switch_s), abs=timedelta(seconds=0.5))
    assert t["level_before_bytes_per_s"] == pytest.approx(HIGH, rel=0.02)
    assert t["level_after_bytes_per_s"] == pytest.approx(LOW, rel=0.02)
    assert t["bytes_before"] == pytest.approx(HIGH * switch_s, rel=0.02)


def test_a_switch_in_a_short_direction_keeps_the_volume_within_a_percent():
    v = switching(20, 8.6) * (1 + np.random.default_rng(3).normal(0, 0.01, 20))
    (t,) = analysis.transitions(seconds(20), v)
    assert t["bytes_before"] == pytest.approx(HIGH * 8.6, rel=0.01)
    assert t["offset_s"] == pytest.approx(8.6, abs=0.1)


@pytest.mark.parametrize("shape", ["noise", "ramp", "single_dip", "four_second_dip",
                                   "swing", "small_step", "rise"])
def test_shapes_that_are_not_a_high_to_low_switch_report_none(shape):
    rng = np.random.default_rng(7)
    n = 300
    i = np.arange(n)
    if shape == "noise":  # 10% per-second noise
        v = HIGH * (1 + rng.normal(0, 0.1, n))
    elif shape == "ramp":  # a slow fall from high to low over the whole experiment
        v = np.linspace(HIGH, LOW, n) * (1 + rng.normal(0, 0.02, n))
    elif shape == "single_dip":
        v = HIGH * (1 + rng.normal(0, 0.02, n))
        v[150] = LOW / 4
    elif shape == "four_second_dip":  # a burst of loss, back to the same level
        v = HIGH * (1 + rng.normal(0, 0.02, n))
        v[150:154] = LOW
    elif shape == "swing":  # a periodic swing of +-10% (60 s period)
        v = HIGH * (1 + 0.1 * np.sin(2 * np.pi * i / 60) + rng.normal(0, 0.02, n))
    elif shape == "small_step":  # a 10% step: below the minimum relative drop
        v = switching(n, 120, HIGH, 0.9 * HIGH) * (1 + rng.normal(0, 0.01, n))
    else:  # low -> high is not a shaping transition
        v = switching(n, 120, LOW, HIGH) * (1 + rng.normal(0, 0.02, n))
    assert analysis.transitions(seconds(n), v) == []


def test_a_switch_on_a_drifting_series_is_found_at_its_time():
    rng = np.random.default_rng(11)
    n = 300
    drift = 1 + 0.1 * np.arange(n) / n  # +10% over the experiment
    v = switching(n, 140.0) * drift * (1 + rng.normal(0, 0.02, n))
    (t,) = analysis.transitions(seconds(n), v)
    assert t["offset_s"] == pytest.approx(140.0, abs=1.0)


def test_long_degradations_are_runs_below_the_fraction_of_the_norm():
    ms = []
    means = [100.0] * 6 + [4.0, 5.0, 3.0, 4.0] + [100.0] * 6 + [30.0] + [100.0] * 3
    for k, m in enumerate(means):  # one 5-minute experiment an hour
        s = T0 + timedelta(hours=k)
        ms.append(analysis.Measured(s, s + timedelta(minutes=5), m))
    norm, found = analysis.degradations(ms, 0.5, timedelta(hours=1))
    assert norm == 100.0
    # Hours 6-9 degrade (3 h 5 min from the first start to the last end); hour 16's single
    # low experiment lasts 5 minutes, shorter than the minimum.
    assert len(found) == 1
    d = found[0]
    assert d["start"] == T0 + timedelta(hours=6)
    assert d["end"] == T0 + timedelta(hours=9, minutes=5)
    assert d["level_bytes_per_s"] == 4.0 and d["experiments"] == 4
