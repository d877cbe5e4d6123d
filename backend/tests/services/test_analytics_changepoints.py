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
    t = np.arange(3 * 2880)  # three days of 30 s windows
    x = 440 + 15 * np.sin(2 * np.pi * t * WINDOW_S / 86_400) + rng.normal(0, 3, t.size)
    out = cyclical_pattern(x, WINDOW_S, min_period_s=600)
    assert out["periods"][0]["period_s"] == pytest.approx(86_400, rel=0.01)
    assert out["periods"][0]["amplitude"] == pytest.approx(15, rel=0.1)
