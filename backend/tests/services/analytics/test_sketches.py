"""DDSketch codec and merging: protobuf-compatible bytes, 1% relative accuracy to p99.99
on heavy-tailed data, merges equal to the sketch of the union."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from ddsketch import DDSketch

from stormwatch.services.analytics.sketches import (
    GAMMA,
    DecodedBins,
    GroupedBins,
    Sketch,
    SketchDecodeError,
    decode,
    decode_many,
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


def _batch(sketches: list[Sketch]) -> tuple[bytes, np.ndarray]:
    blobs = [s.to_bytes() for s in sketches]
    return b"".join(blobs), np.array([len(b) for b in blobs])


def _as_sketches(d: DecodedBins) -> list[Sketch]:
    out = []
    for i in range(d.zero.size):
        mine = d.sketch == i
        if not mine.any():
            out.append(Sketch(0, np.zeros(0), float(d.zero[i])))
            continue
        keys, counts = d.keys[mine], d.counts[mine]
        lo = int(keys.min())
        out.append(Sketch(lo, np.bincount(keys - lo, weights=counts), float(d.zero[i])))
    return out


def _same(a: Sketch, b: Sketch) -> bool:
    ka, kb = np.flatnonzero(a.counts), np.flatnonzero(b.counts)
    return (a.zero_count == b.zero_count and np.array_equal(ka + a.offset, kb + b.offset)
            and np.array_equal(a.counts[ka], b.counts[kb]))


def test_decoding_many_sketches_at_once_equals_decoding_each() -> None:
    rng = np.random.default_rng(9)
    sketches = [Sketch.empty(), Sketch.from_values([0.0, 0.0]), Sketch.from_values([7.0]),
                Sketch.from_values([0.2, 0.5, 3.0]),  # negative keys
                Sketch.from_values([1e12, 3e12]),
                # outlying bins with 1-, 2- and 3-byte keys, written as map entries
                Sketch.from_values([1000.0] * 50 + [1.5, 1e12, 1e100])]
    for i in range(300):
        v = heavy_tailed(100 + i, int(rng.integers(1, 400)))
        if i % 3 == 0:
            v[: int(rng.integers(0, 3))] = 0.0
        if i % 7 == 0:  # a few far outliers: written as sparse entries
            v = np.concatenate([v, v[:5] * 5000])
        sketches.append(Sketch.from_values(v))
    buf, lengths = _batch(sketches)
    got = decode_many(buf, lengths)
    assert any(b"\x0a\x0c\x08" in s.to_bytes()[11:] for s in sketches)  # sparse ones exist
    for want, have in zip([decode(s.to_bytes()) for s in sketches], _as_sketches(got),
                          strict=True):
        assert _same(want, have)
    np.testing.assert_array_equal(got.totals(), [s.count for s in sketches])


def test_decoding_many_falls_back_for_other_layouts_and_refuses_other_mappings() -> None:
    def entry(k: int, c: float) -> bytes:
        zz = (k << 1) ^ (k >> 63)
        body = b"\x08" + bytes([zz]) + b"\x11" + struct.pack("<d", c)
        return b"\x0a" + bytes([len(body)]) + body

    mapping = b"\x09" + struct.pack("<d", GAMMA)
    head = b"\x0a" + bytes([len(mapping)]) + mapping
    store = entry(10, 3.0) + entry(40, 1.0)
    # the zero count before the store: valid protobuf, not the layout `encode` writes
    foreign = head + b"\x21" + struct.pack("<d", 2.0) + b"\x12" + bytes([len(store)]) + store
    ours = Sketch.from_values([5.0, 6.0, 700.0]).to_bytes()
    got = _as_sketches(decode_many(ours + foreign, np.array([len(ours), len(foreign)])))
    assert _same(got[0], decode(ours)) and _same(got[1], decode(foreign))
    assert got[1].count == 6
    other = b"\x0a\x09\x09" + struct.pack("<d", 1.05)
    with pytest.raises(SketchDecodeError):
        decode_many(ours + other, np.array([len(ours), len(other)]))
    with pytest.raises(SketchDecodeError):
        decode_many(ours, np.array([len(ours) + 1]))
