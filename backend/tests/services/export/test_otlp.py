"""The OTLP encoding (services/export/otlp.py): OTLP's exponential buckets hold each sketch
bin in the bucket of its value, under OTLP's own index convention, and every count adds up."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from stormwatch.services.analytics.sketches import Sketch, key_values
from stormwatch.services.export.otlp import build_request, data_points, metrics_url
from stormwatch.services.export.prometheus import EXPORT_KINDS, SeriesTotals, export_origin

MESH = EXPORT_KINDS["mesh"]
NOW = datetime(2026, 11, 25, 12, 0, 30, 250_000, tzinfo=UTC)


def totals_of(series: list[np.ndarray], failures: list[int]) -> SeriesTotals:
    """Series totals as prometheus.series_totals makes them, from raw values (µs)."""
    sketches = [Sketch.from_values(v) for v in series]
    lo = min((s.offset for s in sketches if s.counts.size), default=0)
    hi = max((s.offset + s.counts.size for s in sketches if s.counts.size), default=lo)
    matrix = np.zeros((len(series), hi - lo))
    for row, s in enumerate(sketches):
        matrix[row, s.offset - lo: s.offset - lo + s.counts.size] = s.counts
    zero = np.array([float(s.zero_count) for s in sketches])
    labels = [("aws", f"r{i}", "gcp", "x") for i in range(len(series))]
    return SeriesTotals(MESH, ("src_provider", "src_region", "dst_provider", "dst_region"),
                        labels, MESH.ladder.cumulative(lo, matrix, zero),
                        np.array([float(v.sum()) * 1e-6 for v in series]),
                        np.array([float(f) for f in failures]), lo, matrix, zero)


values_us = st.lists(st.one_of(st.just(0.0), st.floats(1.0, 5e7)), min_size=1, max_size=300)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(values_us, min_size=1, max_size=4), st.data())
def test_every_sample_is_in_the_bucket_of_its_sketch_value_and_the_counts_add_up(
        series: list[list[float]], data: st.DataObject) -> None:
    arrays = [np.array(v) for v in series]
    failures = [data.draw(st.integers(0, 1000)) for _ in series]
    t = totals_of(arrays, failures)
    req = ExportMetricsServiceRequest.FromString(
        build_request([t], {"service.name": "stormwatch"}, export_origin(NOW), NOW)
        .SerializeToString())
    (rm,) = req.resource_metrics
    hist, lost = rm.scope_metrics[0].metrics
    assert data_points(req) == 2 * len(series)
    for row, (values, point) in enumerate(zip(arrays, hist.exponential_histogram.data_points,
                                              strict=True)):
        assert point.count == values.size
        assert sum(point.positive.bucket_counts) + point.zero_count == values.size
        assert point.zero_count == int(np.sum(values == 0))
        assert point.time_unix_nano == int(NOW.timestamp() * 1000) * 1_000_000
        assert point.start_time_unix_nano == int(export_origin(NOW).timestamp()) * 10**9
        # OTLP's bucket i is (base**i, base**(i+1)]: it must hold the value the sketch reports
        # for each of its bins (the bins' counts, rebuilt from the buckets, match).
        base = 2 ** (2.0 ** -point.scale)
        got: dict[int, int] = {point.positive.offset + j: c
                               for j, c in enumerate(point.positive.bucket_counts) if c}
        want: dict[int, int] = {}
        counts = t.matrix[row]
        for k in np.flatnonzero(counts):
            v = float(key_values(t.offset + k)) * 1e-6
            i = int(np.floor(np.log(v) / np.log(base) - 1e-12)) if v > 0 else 0
            # The bucket holding v, checked against the definition rather than the formula.
            while not base ** i < v:
                i -= 1
            while not v <= base ** (i + 1):
                i += 1
            want[i] = want.get(i, 0) + int(round(counts[k]))
        assert got == want
        assert lost.sum.data_points[row].as_double == failures[row]


def test_an_empty_series_is_left_out_and_a_base_url_gets_the_metrics_path() -> None:
    empty = SeriesTotals(MESH, (), [], np.zeros((0, 1)), np.zeros(0), np.zeros(0))
    req = build_request([empty], {}, export_origin(NOW), NOW)
    assert list(req.resource_metrics[0].scope_metrics[0].metrics) == []
    assert metrics_url("https://otel.example.com:4318") == ("https://otel.example.com:4318"
                                                            "/v1/metrics")
    assert metrics_url("https://otel.example.com/") == "https://otel.example.com/v1/metrics"
    assert metrics_url("https://otel.example.com/otlp/v1/metrics") == (
        "https://otel.example.com/otlp/v1/metrics")
