"""Level shifts on jagged series (seed 003 Lesson 11) and cycles (Lesson 4)."""

from __future__ import annotations

import numpy as np
import pytest

from stormwatch.services.analytics.changepoints import cyclical_pattern, level_shifts

WINDOW_S = 30
RATE_HZ = 10


def windowed_medians(rtt_us: np.ndarray) -> np.ndarray:
    per = WINDOW_S * RATE_HZ
    return np.median(rtt_us[: rtt_us.size // per * per].reshape(-1, per), axis=1)


def jagged(seed: int, windows: int, steps: list[int]) -> np.ndarray:
    """Raw RTTs at 10 Hz: 15 ms base, +/-1.5 ms steps at the given windows, noise, spikes."""
    rng = np.random.default_rng(seed)
    n = windows * WINDOW_S * RATE_HZ
    level = np.full(n, 15_000.0)
    up = True
    for w in steps:
        level[w * WINDOW_S * RATE_HZ :] += 1_500.0 if up else -1_500.0
        up = not up
    rtt = level + rng.normal(0, 600.0, n) + rng.exponential(300.0, n)
    spikes = rng.random(n) < 0.002
    rtt[spikes] *= rng.uniform(3, 50, spikes.sum())
    return rtt


@pytest.mark.parametrize("seed", range(8))
def test_every_step_is_found_within_two_windows(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    steps = sorted(rng.choice(np.arange(20, 460), size=5, replace=False).tolist())
    # keep steps apart so each level lasts a few windows
    steps = [s for i, s in enumerate(steps) if i == 0 or s - steps[i - 1] >= 8]
    med = windowed_medians(jagged(seed, 480, steps))
    found = level_shifts(med)
    assert len(found["breakpoints"]) == len(steps), (steps, found["breakpoints"])
    for want, got in zip(steps, found["breakpoints"], strict=True):
        assert abs(want - got) <= 2
    for seg in found["segments"][1:]:
        assert abs(abs(seg["step"]) - 1_500.0) < 300.0


@pytest.mark.parametrize("seed", range(8))
def test_a_flat_series_has_no_change_points(seed: int) -> None:
    med = windowed_medians(jagged(seed, 480, []))
    found = level_shifts(med)
    assert found["breakpoints"] == []
    assert len(found["segments"]) == 1


def test_a_week_of_windows_is_processed() -> None:
    rng = np.random.default_rng(5)
    n = 7 * 2880
    x = 15_000 + rng.normal(0, 150, n)
    x[5000:] += 1_500
    found = level_shifts(x)
    assert found["breakpoints"] == [5000]


def test_a_daily_cycle_is_reported_with_its_period() -> None:
    rng = np.random.default_rng(9)
    t = np.arange(4 * 2880)  # four days of 30 s windows
    x = 440 + 15 * np.sin(2 * np.pi * t * WINDOW_S / 86_400) + rng.normal(0, 3, t.size)
    out = cyclical_pattern(x, WINDOW_S, min_period_s=600)
    assert out["periods"][0]["period_s"] == pytest.approx(86_400, rel=0.01)
    assert out["periods"][0]["amplitude"] == pytest.approx(15, rel=0.1)


# --- shapes that could fool a step detector (seed 003 §4.3: trends are not steps) ----------

BASE_US = 75_000.0  # a 75 ms cross-region path; seed 003 §4.4's AWS steps are ~0.75 ms


def raw_window_medians(rng: np.random.Generator, windows: int, level, per: int = 300,
                       spikes: bool = True) -> np.ndarray:
    """Medians of `per` raw samples per window around level(t in windows), with jitter, a
    queueing tail and rare 10-50x spikes."""
    n = windows * per
    t = np.arange(n) / per
    x = level(t) + rng.normal(0, 300.0, n) + rng.exponential(150.0, n)
    if spikes:
        hit = rng.random(n) < 0.001
        x[hit] *= rng.uniform(10, 50, int(hit.sum()))
    return np.median(x.reshape(windows, per), axis=1)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fraction", [0.01, 0.05, -0.01, -0.05])
def test_a_step_of_one_or_five_percent_is_found_with_its_sign_size_and_confidence(
        seed: int, fraction: float) -> None:
    rng = np.random.default_rng(seed)
    at = int(rng.integers(150, 570))
    med = raw_window_medians(rng, 720, lambda t: BASE_US * (1 + fraction * (t >= at)))
    found = level_shifts(med)
    assert len(found["shifts"]) == 1, found["shifts"]
    shift = found["shifts"][0]
    assert abs(shift["index"] - at) <= 2
    assert np.sign(shift["step"]) == np.sign(fraction)
    assert shift["step"] == pytest.approx(BASE_US * fraction, rel=0.10)
    assert shift["confidence"] > 0.999


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rise", [0.05, 0.10, -0.08])
def test_a_slow_drift_over_hours_is_not_a_shift(seed: int, rise: float) -> None:
    rng = np.random.default_rng(50 + seed)
    linear = raw_window_medians(rng, 720, lambda t: BASE_US * (1 + rise * t / 720))
    assert level_shifts(linear)["shifts"] == []
    # An S-shaped drift: most of it within three of the six hours.
    s_curve = raw_window_medians(
        rng, 720, lambda t: BASE_US * (1 + rise / (1 + np.exp(-(t - 360) / 60))))
    assert level_shifts(s_curve)["shifts"] == []


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("period_windows", [40, 120, 240])
def test_a_two_percent_sinusoid_is_not_a_shift(seed: int, period_windows: int) -> None:
    rng = np.random.default_rng(80 + seed)
    phase = rng.uniform(0, 2 * np.pi)
    med = raw_window_medians(
        rng, 720, lambda t: BASE_US * (1 + 0.02 * np.sin(2 * np.pi * t / period_windows + phase)))
    assert level_shifts(med)["shifts"] == []


@pytest.mark.parametrize("seed", range(4))
def test_isolated_ten_to_fifty_fold_spikes_are_not_shifts(seed: int) -> None:
    rng = np.random.default_rng(120 + seed)
    med = raw_window_medians(rng, 720, lambda t: np.full(t.size, BASE_US))
    hit = rng.choice(720, size=12, replace=False)
    med[hit] *= rng.uniform(10, 50, hit.size)  # whole windows dominated by a spike
    med[0] *= 30  # at the very edge too
    assert level_shifts(med)["shifts"] == []


def test_a_step_on_top_of_a_drift_and_a_swing_is_found_with_its_size() -> None:
    rng = np.random.default_rng(7)
    med = raw_window_medians(rng, 720, lambda t: BASE_US * (
        1 + 0.06 * t / 720 + 0.02 * np.sin(2 * np.pi * t / 120) + 0.05 * (t >= 400)))
    found = level_shifts(med)
    assert [abs(s["index"] - 400) <= 2 for s in found["shifts"]] == [True]
    assert found["shifts"][0]["step"] == pytest.approx(0.05 * BASE_US, rel=0.10)


def test_a_one_percent_step_in_a_week_of_thirty_second_windows_is_found() -> None:
    rng = np.random.default_rng(11)
    n = 7 * 2880
    x = BASE_US + rng.normal(0, 40.0, n)
    x[13_000:] += 750.0
    found = level_shifts(x)
    assert [s["index"] for s in found["shifts"]] == [13_000]
    assert found["shifts"][0]["step"] == pytest.approx(750.0, rel=0.10)


# --- cycles with significance (seed 003 Lesson 4) ------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_a_one_hour_two_percent_cycle_is_found_with_its_period_and_significance(
        seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    t = np.arange(720)  # 12 hours of 60 s windows
    x = BASE_US * (1 + 0.02 * np.sin(2 * np.pi * t / 60)) + rng.normal(0, 30.0, t.size)
    out = cyclical_pattern(x, 60, min_period_s=300)
    assert out["significant"] is True
    top = out["periods"][0]
    assert top["period_s"] == pytest.approx(3600, rel=0.02)
    assert top["amplitude"] == pytest.approx(0.02 * BASE_US, rel=0.1)
    assert top["false_alarm_probability"] < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_a_drift_and_white_noise_report_no_significant_cycle(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    t = np.arange(720)
    noise = rng.normal(0, 30.0, t.size)
    for x in (BASE_US * (1 + 0.08 * t / 720) + noise,
              BASE_US * (1 + 0.08 / (1 + np.exp(-(t - 360) / 60))) + noise,
              BASE_US * (1 + 0.06 * t / 720 + 0.01 * (t >= 300)) + noise,
              BASE_US + noise):
        out = cyclical_pattern(x, 60, min_period_s=300)
        assert out["significant"] is False, out["periods"]
        assert out["periods"] == []
