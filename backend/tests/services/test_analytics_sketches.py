"""DDSketch codec and merging: protobuf-compatible bytes, 1% relative accuracy to p99.99
on heavy-tailed data, merges equal to the sketch of the union."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from ddsketch import DDSketch

from stormwatch.services.analytics.sketches import (
    GAMMA,
    GroupedBins,
    Sketch,
    SketchDecodeError,
    decode,
    grouped_quantiles,
    merge_sketches,
)

QS = [0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999]


def heavy_tailed(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.lognormal(np.log(450.0), 0.5, n)
    v[rng.random(n) < 0.0005] *= 1000.0
    return v


def test_keys_and_quantiles_match_the_reference_ddsketch_library() -> None:
    v = heavy_tailed(1, 20_000)
    ref = DDSketch(0.01)
    for x in v:
        ref.add(float(x))
    s = Sketch.from_values(v)
    ref_bins = np.asarray(ref._store.bins)
    ref_keys = np.flatnonzero(ref_bins) + ref._store.offset
    assert np.array_equal(np.flatnonzero(s.counts) + s.offset, ref_keys)
    for q in QS:
        assert s.quantile(q) == pytest.approx(ref.get_quantile_value(q), rel=1e-12)


@pytest.mark.parametrize("n", [1, 60, 3_600, 200_000])
def test_quantiles_are_within_one_percent_of_numpy_up_to_p99_99(n: int) -> None:
    v = heavy_tailed(n, n)
    s = decode(Sketch.from_values(v).to_bytes())
    for q in QS:
        exact = np.quantile(v, q, method="lower")
        assert abs(s.quantile(q) - exact) / exact <= 0.01


def test_a_merge_of_parts_equals_the_sketch_of_the_whole() -> None:
    v = heavy_tailed(3, 50_000)
    parts = [Sketch.from_values(p) for p in np.array_split(v, 37)]
    merged = merge_sketches(decode(p.to_bytes()) for p in parts)
    whole = Sketch.from_values(v)
    assert merged.count == whole.count
    nz = np.flatnonzero(whole.counts)
    assert merged.offset + np.flatnonzero(merged.counts)[0] == whole.offset + nz[0]
    for q in QS:
        assert merged.quantile(q) == whole.quantile(q)


def test_grouped_quantiles_equal_per_group_quantiles() -> None:
    groups = [heavy_tailed(i, 5_000) * (i + 1) for i in range(5)]
    gb = GroupedBins(len(groups))
    for i, g in enumerate(groups):
        for part in np.array_split(g, 4):
            gb.add(i, Sketch.from_values(part))
    lo, mat = gb.matrix()
    got = grouped_quantiles(lo, mat, gb.zero, QS)
    for i, g in enumerate(groups):
        want = Sketch.from_values(g)
        for j, q in enumerate(QS):
            assert got[i, j] == pytest.approx(want.quantile(q), rel=1e-12)


def _fields(buf: bytes) -> list[tuple[int, int]]:
    """(field, wire type) of the top-level protobuf fields."""
    out, pos = [], 0
    while pos < len(buf):
        tag = buf[pos]
        pos += 1
        field, wire = tag >> 3, tag & 7
        out.append((field, wire))
        if wire == 2:
            n, shift = 0, 0
            while True:
                b = buf[pos]
                pos += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            pos += n
        elif wire == 1:
            pos += 8
    return out


def test_the_bytes_follow_the_ddsketch_protobuf_schema() -> None:
    s = Sketch.from_values([0.0, 0.0, 100.0, 101.0, 250.0, 250_000.0])
    buf = s.to_bytes()
    # mapping (1, message), positiveValues (2, message), zeroCount (4, double)
    assert _fields(buf) == [(1, 2), (2, 2), (4, 1)]
    assert buf[2] == 0x09 and struct.unpack("<d", buf[3:11])[0] == GAMMA  # IndexMapping.gamma
    assert struct.unpack("<d", buf[-8:])[0] == 2.0
    back = decode(buf)
    assert back.count == 6 and back.zero_count == 2.0
    assert back.quantile(1.0) == pytest.approx(250_000.0, rel=0.01)


def test_sparse_bin_maps_written_by_other_encoders_decode() -> None:
    # Store{binCounts: {k: c}} as sketches-go writes for sparse stores.
    def zigzag(n: int) -> int:
        return (n << 1) ^ (n >> 63)

    def entry(k: int, c: float) -> bytes:
        body = b"\x08" + bytes([zigzag(k)]) + b"\x11" + struct.pack("<d", c)
        return b"\x0a" + bytes([len(body)]) + body

    store = entry(10, 3.0) + entry(40, 1.0)
    mapping = b"\x09" + struct.pack("<d", GAMMA)
    buf = b"\x0a" + bytes([len(mapping)]) + mapping + b"\x12" + bytes([len(store)]) + store
    s = decode(buf)
    assert s.count == 4
    assert s.offset == 10 and s.counts[0] == 3.0 and s.counts[30] == 1.0


def test_a_sketch_with_another_mapping_is_refused() -> None:
    mapping = b"\x09" + struct.pack("<d", 1.05)
    with pytest.raises(SketchDecodeError):
        decode(b"\x0a" + bytes([len(mapping)]) + mapping)
