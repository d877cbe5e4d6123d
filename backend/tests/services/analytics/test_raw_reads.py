"""Raw samples read as packed columns become exact distributions per group and window: whole
values (RTTs in us) take the one-int64-key sort, fractional ones the general sort, and both
give the same sorted values, counts and failures."""

from __future__ import annotations

import uuid

import numpy as np

from stormwatch.services.analytics.raw import RawSeries, group_packed_raw


def _series(rng: np.random.Generator, shift: float) -> list[RawSeries]:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    out = []
    for src, dst in ((a, b), (b, a), (a, c)):
        n = int(rng.integers(500, 2000))
        t = 1_790_000_000 + np.sort(rng.uniform(0, 600, n))
        v = np.round(rng.lognormal(np.log(75_000), 0.2, n))
        v[rng.random(n) < 0.05] *= 40  # spikes
        failed = rng.random(n) < 0.01
        v[failed] = np.nan  # a loss has no RTT
        out.append(RawSeries((src, dst, 1024), t, v + shift, failed))
    return out


def test_whole_and_fractional_values_group_into_the_same_sorted_distributions() -> None:
    whole = _series(np.random.default_rng(16), 0.0)
    fractional = [RawSeries(s.keys, s.t, s.v + 0.5, s.failed) for s in whole]
    for group, window_s in ((lambda k: k[0], None), (lambda k: "all", 60),
                            (lambda k: (k[0], k[1]), 300)):
        got = group_packed_raw(whole, group, window_s)
        ref = group_packed_raw(fractional, group, window_s)
        assert got.keys() == ref.keys() and got
        for key, d in got.items():
            assert d.values is not None and ref[key].values is not None
            np.testing.assert_array_equal(d.values, ref[key].values - 0.5)
            assert np.all(np.diff(d.values) >= 0)
            assert (d.moments.samples, d.moments.failures, d.moments.count) == (
                ref[key].moments.samples, ref[key].moments.failures, ref[key].moments.count)
    # Every sample is counted once, each loss as a failure without a value.
    every = group_packed_raw(whole, lambda k: "all", None)["all"]
    assert every.moments.samples == sum(s.t.size for s in whole)
    assert every.moments.failures == sum(int(s.failed.sum()) for s in whole)
    assert every.moments.count == sum(int(np.isfinite(s.v).sum()) for s in whole)
    values = np.sort(np.concatenate([s.v[np.isfinite(s.v)] for s in whole]))
    assert every.values is not None
    np.testing.assert_array_equal(every.values, values)


def test_a_group_of_losses_only_has_samples_and_failures_but_no_values() -> None:
    t = np.arange(10, dtype=np.float64)
    lost = RawSeries((uuid.uuid4(), uuid.uuid4(), 64), t, np.full(10, np.nan),
                     np.ones(10, dtype=bool))
    d = group_packed_raw([lost], lambda k: "all", None)["all"]
    assert (d.moments.samples, d.moments.failures, d.moments.count) == (10, 10, 0)
    assert d.quantiles([0.5]) == [None]
