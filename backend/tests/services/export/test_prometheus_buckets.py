"""The Prometheus export's bucket ladder: boundaries that are DDSketch bin boundaries, and
cumulative counts that are exact for the sketch (services/export/prometheus.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from stormwatch.services.analytics.sketches import GAMMA, Sketch, key_values, value_keys
from stormwatch.services.export.prometheus import (
    BUCKET_RELATIVE_WIDTH,
    LADDER_STEP,
    LATENCY_LADDER,
    THROUGHPUT_LADDER,
    export_origin,
)
from stormwatch.services.export.protobuf import (
    NATIVE_RELATIVE_WIDTH,
    native_buckets,
    native_index,
    wants_protobuf,
)


def test_latency_boundaries_are_every_fifth_sketch_bin_boundary_from_10_us_to_60_s() -> None:
    le = LATENCY_LADDER.bounds()
    assert le[0] >= 10e-6 and le[0] / (1 + BUCKET_RELATIVE_WIDTH) < 10e-6
    assert le[-1] <= 60.0 and le[-1] * (1 + BUCKET_RELATIVE_WIDTH) > 60.0
    assert np.all(LATENCY_LADDER.keys % LADDER_STEP == 0)
    # Each boundary is gamma**key µs in seconds, so consecutive ones differ by gamma**5.
    np.testing.assert_allclose(le, GAMMA ** LATENCY_LADDER.keys.astype(float) * 1e-6,
                               rtol=1e-12)
    np.testing.assert_allclose(le[1:] / le[:-1], GAMMA**LADDER_STEP, rtol=1e-12)
    assert 0.10 < BUCKET_RELATIVE_WIDTH < 0.11
    assert THROUGHPUT_LADDER.bounds()[0] >= 1e3 and THROUGHPUT_LADDER.bounds()[-1] <= 1e11


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cumulative_counts_are_the_sketch_s_exact_counts_below_each_boundary(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.concatenate([
        rng.lognormal(np.log(800.0), 1.0, 5000),   # µs: a body around 0.8 ms
        rng.uniform(1.0, 9.0, 20),                   # below the first boundary
        rng.uniform(7e7, 9e7, 7),                    # above the last one: only in +Inf
        np.zeros(3)])                                # zeros count in every bucket
    sketch = Sketch.from_values(values)
    cum = LATENCY_LADDER.cumulative(sketch.offset, sketch.counts[None, :],
                                    np.array([sketch.zero_count]))[0]
    keys = value_keys(values[values > 0])
    want = [int(np.sum(keys <= k)) + 3 for k in LATENCY_LADDER.keys]
    assert cum[:-1].tolist() == want
    assert cum[-1] == values.size
    assert np.all(np.diff(cum) >= 0)
    # And against the values themselves: the sketch's boundaries are the ladder's.
    le_us = LATENCY_LADDER.bounds() * 1e6
    exact = np.array([np.sum(values <= b) for b in le_us])
    near = np.array([np.sum(np.abs(values / b - 1) < 1e-9) for b in le_us])
    assert np.all(np.abs(cum[:-1] - exact) <= near)
    assert cum[0] == 23 and cum[-2] == values.size - 7


def test_an_empty_series_has_zeros_in_every_bucket() -> None:
    cum = LATENCY_LADDER.cumulative(0, np.zeros((2, 0)), np.zeros(2))
    assert cum.shape == (2, LATENCY_LADDER.keys.size + 1)
    assert not cum.any()


def test_the_export_origin_is_the_last_monday_midnight_utc() -> None:
    for now in (datetime(2026, 11, 28, 19, 58, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC),
                datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC)):
        origin = export_origin(now)
        assert origin.weekday() == 0 and origin.time().isoformat() == "00:00:00"
        assert now - timedelta(days=7) < origin <= now
    assert export_origin(datetime(2026, 11, 30, tzinfo=UTC)) == datetime(2026, 11, 30,
                                                                          tzinfo=UTC)


# --- native histograms (services/export/protobuf.py) --------------------------------------


def spans_to_indices(spans: list[tuple[int, int]]) -> list[int]:
    out: list[int] = []
    at = None
    for offset, length in spans:
        start = offset if at is None else at + offset
        out += list(range(start, start + length))
        at = start + length
    return out


@pytest.mark.parametrize("seed", [4, 5])
def test_native_buckets_hold_every_sketch_bin_in_the_bucket_of_its_value(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # A body and a far tail: two spans at least, with empty buckets between.
    values = np.concatenate([rng.lognormal(np.log(800.0), 0.3, 3000),
                             rng.lognormal(np.log(2e6), 0.05, 30)])
    sketch = Sketch.from_values(values)
    spans, counts = native_buckets(sketch.offset, sketch.counts, 1e-6)
    assert len(spans) >= 2 and all(length > 0 for _, length in spans)
    assert sum(counts) == values.size
    nz = np.flatnonzero(sketch.counts)
    idx = native_index(key_values(sketch.offset + nz) * 1e-6)
    want: dict[int, float] = {}
    for i, c in zip(idx.tolist(), sketch.counts[nz].tolist(), strict=True):
        want[i] = want.get(i, 0) + c
    assert dict(zip(spans_to_indices(spans), counts, strict=True)) == want
    # Bucket i is (2^((i-1)/32), 2^(i/32)]: each holds the sketch's value of its bins.
    for i, v in zip(idx.tolist(), (key_values(sketch.offset + nz) * 1e-6).tolist(),
                    strict=True):
        assert 2 ** ((i - 1) / 32) < v <= 2 ** (i / 32)
    assert pytest.approx(2 ** (1 / 32) - 1) == NATIVE_RELATIVE_WIDTH


def test_protobuf_only_when_the_scraper_asks_for_it_first() -> None:
    prometheus_native = ("application/vnd.google.protobuf;proto=io.prometheus.client."
                         "MetricFamily;encoding=delimited,application/openmetrics-text;"
                         "version=1.0.0;q=0.8,text/plain;version=0.0.4;q=0.2,*/*;q=0.1")
    assert wants_protobuf(prometheus_native)
    assert not wants_protobuf("application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
    assert not wants_protobuf("")
    assert not wants_protobuf("application/vnd.google.protobuf;proto=other.Message")
