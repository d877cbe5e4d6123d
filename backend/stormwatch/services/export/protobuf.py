"""The export in Prometheus's protobuf format (`io.prometheus.client.MetricFamily`, length-
delimited), which carries native histograms: what Prometheus asks for when it runs with
`--enable-feature=native-histograms`.

Each histogram holds the classic ladder (as in the text formats) and a native histogram of
schema NATIVE_SCHEMA: buckets (2^(i-1)/2^s, 2^(i/2^s)] s, 2.2% wide. Native boundaries are
powers of 2^(1/32) and the sketch's are powers of gamma = 1.02/0.98, so they cannot coincide:
each sketch bin goes whole into the native bucket that holds the value the sketch reports
for it, which keeps every native bucket within one native bucket width (2.2%) of the
sketch's answer. Encoded by hand, as sketches.py does for DDSketch, to add no dependency.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import NDArray

from stormwatch.services.analytics.sketches import key_values, varint, zigzag
from stormwatch.services.export.prometheus import SeriesTotals

CONTENT_TYPE = ("application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
                "encoding=delimited")
NATIVE_SCHEMA = 5
NATIVE_RELATIVE_WIDTH = 2 ** (2.0**-NATIVE_SCHEMA) - 1.0
# Prometheus's default zero bucket: the sketch's zeros (values it cannot index) go there.
ZERO_THRESHOLD = 2.938735877055719e-39
_COUNTER, _HISTOGRAM = 0, 4
_F64 = struct.Struct("<d")


def wants_protobuf(accept: str) -> bool:
    """Whether the Accept header asks for the delimited MetricFamily protobuf first."""
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media == "application/vnd.google.protobuf":
            return "proto=io.prometheus.client.MetricFamily" in params
        if media:
            return False
    return False


def _len(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def _double(field: int, value: float) -> bytes:
    return varint(field << 3 | 1) + _F64.pack(value)


def _uint(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def _sint(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(zigzag(value))


def _labels(names: Sequence[str], values: Sequence[str]) -> bytes:
    return b"".join(_len(1, _len(1, n.encode()) + _len(2, v.encode()))
                    for n, v in zip(names, values, strict=True))


def native_index(values_s: NDArray[np.float64]) -> NDArray[np.int64]:
    """The native bucket (schema NATIVE_SCHEMA) that holds each value: ceil(log2(v) * 2^s)."""
    return np.ceil(np.log2(values_s) * 2**NATIVE_SCHEMA).astype(np.int64)


def native_dense(offset: int, counts: NDArray[np.float64], scale: float
                 ) -> tuple[int, NDArray[np.float64]]:
    """(index of the first, counts) of the consecutive native buckets holding one series'
    sketch bins (keys from `offset`, values in stored units times `scale`); each bin goes
    whole into the bucket of the value the sketch reports for it. (0, []) when empty."""
    nz = np.flatnonzero(counts)
    if not nz.size:
        return 0, np.zeros(0)
    idx = native_index(key_values(offset + nz) * scale)
    lo = int(idx.min())
    return lo, np.bincount(idx - lo, weights=counts[nz]).astype(np.float64)


def native_buckets(offset: int, counts: NDArray[np.float64], scale: float
                   ) -> tuple[list[tuple[int, int]], list[int]]:
    """Spans (the first's offset is its bucket index, a later one's the empty buckets before
    it; length) and bucket counts of one series' sketch bins (see native_dense)."""
    lo, dense = native_dense(offset, counts, scale)
    if not dense.size:
        return [], []
    filled = (np.flatnonzero(dense) + lo).tolist()
    spans: list[tuple[int, int]] = []
    run_start, run_len, prev_end = filled[0], 1, None
    for a, b in zip(filled, filled[1:], strict=False):
        if b == a + 1:
            run_len += 1
            continue
        spans.append((run_start if prev_end is None else run_start - prev_end, run_len))
        prev_end = run_start + run_len
        run_start, run_len = b, 1
    spans.append((run_start if prev_end is None else run_start - prev_end, run_len))
    return spans, [int(round(float(dense[i - lo]))) for i in filled]


def _histogram(t: SeriesTotals, row: int, offset: int, matrix: NDArray[np.float64],
               zero: NDArray[np.float64], bounds: NDArray[np.float64]) -> bytes:
    cum = t.buckets[row]
    total = int(round(float(cum[-1])))
    body = _uint(1, total) + _double(2, float(t.sums[row]))
    for le, c in zip(bounds.tolist(), cum[:-1].tolist(), strict=True):
        body += _len(3, _uint(1, int(round(c))) + _double(2, le))
    body += _sint(5, NATIVE_SCHEMA) + _double(6, ZERO_THRESHOLD)
    body += _uint(7, int(round(float(zero[row]))))
    spans, counts = native_buckets(offset, matrix[row], t.kind.ladder.scale)
    for span_offset, length in spans:
        body += _len(12, _sint(1, span_offset) + _uint(2, length))
    if counts:
        deltas = np.diff(np.asarray(counts, dtype=np.int64), prepend=0).tolist()
        body += _len(13, b"".join(varint(zigzag(int(d))) for d in deltas))
    return body


def encode(totals: Sequence[SeriesTotals]) -> bytes:
    return b"".join(_families(totals))


def _families(totals: Sequence[SeriesTotals]) -> Iterator[bytes]:
    for t in totals:
        if not t.labels:
            continue  # a family without metrics says nothing; the text formats keep its HELP
        bounds = t.kind.ladder.bounds()
        metrics = []
        for row, labels in enumerate(t.labels):
            hist = _histogram(t, row, t.offset, t.matrix, t.zero, bounds)
            metrics.append(_len(4, _labels(t.label_names, labels) + _len(7, hist)))
        yield _delimited(_len(1, t.kind.metric.encode()) + _len(2, t.kind.help.encode())
                         + _uint(3, _HISTOGRAM) + b"".join(metrics))
        if t.kind.failures is not None:
            counters = [_len(4, _labels(t.label_names, labels) + _len(3, _double(1, value)))
                        for labels, value in zip(t.labels, t.failures.tolist(), strict=True)]
            yield _delimited(_len(1, (t.kind.failures + "_total").encode())
                             + _len(2, t.kind.failures_help.encode()) + _uint(3, _COUNTER)
                             + b"".join(counters))


def _delimited(message: bytes) -> bytes:
    return varint(len(message)) + message

