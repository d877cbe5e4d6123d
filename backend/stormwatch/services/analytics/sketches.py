"""DDSketch with 1% relative accuracy, stored as the DDSketch protobuf.

The wire format is the `DDSketch` message shared by Datadog's Go `sketches-go` and Python
`ddsketch` (fields: mapping=1, positiveValues=2, negativeValues=3, zeroCount=4). Encoding
and decoding are written here against that schema so that thousands of stored sketches can
be decoded straight into numpy arrays and merged with one `bincount`, which is what keeps
fleet-wide percentile queries fast. Keys follow the logarithmic mapping of both libraries:
key(v) = ceil(log_gamma(v)), value(key) = gamma**key * 2 / (1 + gamma), gamma = (1+a)/(1-a).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

RELATIVE_ACCURACY = 0.01
GAMMA = 1.0 + 2.0 * RELATIVE_ACCURACY / (1.0 - RELATIVE_ACCURACY)
# Same expression as both libraries (log1p of the mantissa) so keys agree bit for bit.
LOG_GAMMA = math.log1p(2.0 * RELATIVE_ACCURACY / (1.0 - RELATIVE_ACCURACY))
# Values at or below this are counted as zeros, as the libraries do.
MIN_INDEXABLE = np.finfo(np.float64).tiny * GAMMA

_F64 = struct.Struct("<d")
_MAX_GAP_BINS = 24
# Outlying bins written as map entries at most; `decode_many` parses them for all sketches
# at once, so the cap only bounds the per-sketch `decode` path.
_MAX_SPARSE_BINS = 64
# A map entry with a 2-byte key varint: 0x0a 0x0c 0x08 k k 0x11 <8-byte count>.
_ENTRY = np.dtype([("head", "u1", 3), ("key", "u1", 2), ("tag", "u1"), ("count", "<f8")])


class SketchDecodeError(ValueError):
    pass


@dataclass
class Sketch:
    """Positive-value DDSketch: dense counts for keys offset..offset+len(counts)-1."""

    offset: int
    counts: NDArray[np.float64]
    zero_count: float = 0.0

    @property
    def count(self) -> float:
        return float(self.counts.sum()) + self.zero_count

    @classmethod
    def empty(cls) -> Sketch:
        return cls(0, np.zeros(0), 0.0)

    @classmethod
    def from_values(cls, values: NDArray[np.floating] | Sequence[float]) -> Sketch:
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if np.any(v < 0):
            raise ValueError("latency sketches take non-negative values only")
        pos = v[v > MIN_INDEXABLE]
        zero = float(v.size - pos.size)
        if pos.size == 0:
            return cls(0, np.zeros(0), zero)
        keys = value_keys(pos)
        lo = int(keys.min())
        counts = np.bincount(keys - lo).astype(np.float64)
        return cls(lo, counts, zero)

    def merge(self, other: Sketch) -> Sketch:
        return merge_sketches([self, other])

    def quantile(self, q: float) -> float | None:
        return quantiles_from_bins(self.offset, self.counts, self.zero_count, [q])[0]

    def to_bytes(self) -> bytes:
        return encode(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> Sketch:
        return decode(data)


def value_keys(values: NDArray[np.float64]) -> NDArray[np.int64]:
    return np.ceil(np.log(values) / LOG_GAMMA).astype(np.int64)


def key_values(keys: NDArray[np.integer] | int) -> NDArray[np.float64]:
    return np.exp(np.asarray(keys, dtype=np.float64) * LOG_GAMMA) * (2.0 / (1.0 + GAMMA))


# --- protobuf wire format -------------------------------------------------------------


def varint(n: int) -> bytes:
    """n as a protobuf varint (a negative n as its 64-bit two's complement, as protobuf does)."""
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _field(tag: int, payload: bytes) -> bytes:
    return varint(tag) + varint(len(payload)) + payload


# IndexMapping{gamma, indexOffset=0, interpolation=NONE}: constant for every sketch we write.
_MAPPING = _field(0x0A, b"\x09" + _F64.pack(GAMMA))


def encode(sketch: Sketch) -> bytes:
    counts = np.asarray(sketch.counts, dtype=np.float64)
    nz = np.flatnonzero(counts)
    store = b""
    if nz.size:
        gaps = np.diff(nz)
        if gaps.size == 0 or int(gaps.max()) <= _MAX_GAP_BINS:
            first, last = int(nz[0]), int(nz[-1])
            outliers: list[int] = []
        else:
            # The densest run of bins goes in the contiguous array; bins separated from it
            # by long gaps (rare spikes far above the body) go in the sparse map, where each
            # costs ~14 bytes instead of 8 bytes for every empty bin in between.
            runs = np.split(nz, np.flatnonzero(gaps > _MAX_GAP_BINS) + 1)
            body = runs[int(np.argmax([float(counts[r].sum()) for r in runs]))]
            first, last = int(body[0]), int(body[-1])
            n_out = nz.size - body.size
            # Whichever is smaller: outlying bins as ~14-byte map entries, or every bin
            # between them as an 8-byte double; long maps cost decoding time, so cap them.
            if n_out > _MAX_SPARSE_BINS or 14 * n_out >= 8 * (
                    (int(nz[-1]) - int(nz[0])) - (last - first)):
                first, last = int(nz[0]), int(nz[-1])
            outliers = [int(i) for i in nz if i < first or i > last]
        parts = []
        for i in outliers:
            entry = (b"\x08" + varint(zigzag(i + sketch.offset))
                     + b"\x11" + _F64.pack(float(counts[i])))
            parts.append(_field(0x0A, entry))
        dense = counts[first : last + 1]
        contiguous = _field(0x12, dense.astype("<f8", copy=False).tobytes())
        offset = sketch.offset + first
        if offset != 0:
            contiguous += b"\x18" + varint(zigzag(offset))
        store = b"".join(parts) + contiguous
    out = _MAPPING + _field(0x12, store)
    if sketch.zero_count:
        out += b"\x21" + _F64.pack(float(sketch.zero_count))
    return out


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise SketchDecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise SketchDecodeError("varint too long")


def _skip(buf: bytes, pos: int, wire: int) -> int:
    if wire == 0:
        return _read_varint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        n, pos = _read_varint(buf, pos)
        return pos + n
    if wire == 5:
        return pos + 4
    raise SketchDecodeError(f"unsupported wire type {wire}")


def _decode_mapping(buf: bytes, pos: int, end: int) -> None:
    gamma, index_offset, interpolation = GAMMA, 0.0, 0
    while pos < end:
        tag, pos = _read_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if field == 1 and wire == 1:
            gamma = _F64.unpack_from(buf, pos)[0]
            pos += 8
        elif field == 2 and wire == 1:
            index_offset = _F64.unpack_from(buf, pos)[0]
            pos += 8
        elif field == 3 and wire == 0:
            interpolation, pos = _read_varint(buf, pos)
        else:
            pos = _skip(buf, pos, wire)
    if abs(gamma - GAMMA) > 1e-12 or index_offset != 0.0 or interpolation != 0:
        raise SketchDecodeError(
            f"sketch mapping (gamma={gamma}, offset={index_offset}, interpolation={interpolation})"
            " is not the 1% logarithmic mapping; it cannot be merged")


def _decode_store(buf: bytes, pos: int, end: int) -> tuple[int, NDArray[np.float64]]:
    contiguous: NDArray[np.float64] | None = None
    c_offset = 0
    sparse_keys: list[int] = []
    sparse_counts: list[float] = []
    while pos < end:
        tag, pos = _read_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if field == 2 and wire == 2:
            n, pos = _read_varint(buf, pos)
            contiguous = np.frombuffer(buf, dtype="<f8", count=n // 8, offset=pos)
            pos += n
        elif field == 2 and wire == 1:  # unpacked repeated double
            arr = [] if contiguous is None else list(contiguous)
            arr.append(_F64.unpack_from(buf, pos)[0])
            contiguous = np.asarray(arr)
            pos += 8
        elif field == 3 and wire == 0:
            raw, pos = _read_varint(buf, pos)
            c_offset = _unzigzag(raw)
        elif field == 1 and wire == 2:
            n, pos = _read_varint(buf, pos)
            entry_end = pos + n
            key, cnt = 0, 0.0
            while pos < entry_end:
                etag, pos = _read_varint(buf, pos)
                if etag == 0x08:
                    raw, pos = _read_varint(buf, pos)
                    key = _unzigzag(raw)
                elif etag == 0x11:
                    cnt = _F64.unpack_from(buf, pos)[0]
                    pos += 8
                else:
                    pos = _skip(buf, pos, etag & 7)
            sparse_keys.append(key)
            sparse_counts.append(cnt)
        else:
            pos = _skip(buf, pos, wire)
    if not sparse_keys:
        if contiguous is None:
            return 0, np.zeros(0)
        return c_offset, contiguous
    keys = np.asarray(sparse_keys, dtype=np.int64)
    vals = np.asarray(sparse_counts, dtype=np.float64)
    if contiguous is not None and contiguous.size:
        keys = np.concatenate([keys, np.arange(contiguous.size) + c_offset])
        vals = np.concatenate([vals, contiguous])
    lo = int(keys.min())
    return lo, np.bincount(keys - lo, weights=vals).astype(np.float64)


_MAPPING_LEN = len(_MAPPING)


def _fast_decode(buf: bytes) -> Sketch | None:
    """Sketches written by `encode` (mapping, one store with only contiguous bins, optional
    zero count) decode here without the general parser: this is the hot path of queries
    that merge thousands of stored sketches."""
    if not buf.startswith(_MAPPING):
        return None
    pos = _MAPPING_LEN
    end = len(buf)
    if pos == end:
        return Sketch(0, np.zeros(0), 0.0)
    if buf[pos] != 0x12:
        return None
    n, pos = _read_varint(buf, pos + 1)
    store_end = pos + n
    # A few sparse entries (outlying bins) may precede the contiguous array.
    extra: list[tuple[int, float]] = []
    ex_keys = ex_counts = None
    if pos + 1 < store_end and buf[pos] == 0x0A and buf[pos + 1] == 12:
        # Runs of fixed-size entries (2-byte keys) parse in one numpy view.
        n_fixed = 0
        while (pos + 14 * (n_fixed + 1) <= store_end and buf[pos + 14 * n_fixed] == 0x0A
               and buf[pos + 14 * n_fixed + 1] == 12):
            n_fixed += 1
        ent = np.frombuffer(buf, dtype=_ENTRY, count=n_fixed, offset=pos)
        if not (np.all(ent["head"][:, 2] == 0x08) and np.all(ent["tag"] == 0x11)
                and np.all(ent["key"][:, 0] & 0x80) and not np.any(ent["key"][:, 1] & 0x80)):
            return None
        zz = (ent["key"][:, 0].astype(np.int64) & 0x7F) | (ent["key"][:, 1].astype(np.int64) << 7)
        ex_keys = (zz >> 1) ^ -(zz & 1)
        ex_counts = ent["count"].astype(np.float64)
        pos += 14 * n_fixed
    while pos < store_end and buf[pos] == 0x0A:
        elen = buf[pos + 1]
        if elen & 0x80 or buf[pos + 2] != 0x08:
            return None
        raw, p2 = _read_varint(buf, pos + 3)
        if buf[p2] != 0x11 or p2 + 9 != pos + 2 + elen:
            return None
        extra.append(((raw >> 1) ^ -(raw & 1), _F64.unpack_from(buf, p2 + 1)[0]))
        pos = pos + 2 + elen
    if pos >= store_end or buf[pos] != 0x12:
        return None
    m, pos = _read_varint(buf, pos + 1)
    counts = np.frombuffer(buf, dtype="<f8", count=m >> 3, offset=pos)
    pos += m
    offset = 0
    if pos < store_end:
        if buf[pos] != 0x18:
            return None
        raw, pos = _read_varint(buf, pos + 1)
        offset = (raw >> 1) ^ -(raw & 1)
    if pos != store_end:
        return None
    zero = 0.0
    if pos < end:
        if buf[pos] != 0x21 or end - pos != 9:
            return None
        zero = _F64.unpack_from(buf, pos + 1)[0]
    if extra:
        more_k = np.fromiter((k for k, _ in extra), dtype=np.int64, count=len(extra))
        more_c = np.fromiter((c for _, c in extra), dtype=np.float64, count=len(extra))
        ex_keys = more_k if ex_keys is None else np.concatenate([ex_keys, more_k])
        ex_counts = more_c if ex_counts is None else np.concatenate([ex_counts, more_c])
    if ex_keys is not None and ex_counts is not None and ex_keys.size:
        lo = int(ex_keys.min())
        hi = int(ex_keys.max())
        if counts.size:
            lo, hi = min(lo, offset), max(hi, offset + counts.size - 1)
        dense = np.zeros(hi - lo + 1)
        dense[offset - lo : offset - lo + counts.size] = counts
        np.add.at(dense, ex_keys - lo, ex_counts)
        return Sketch(lo, dense, zero)
    return Sketch(offset, counts, zero)


def decode(data: bytes) -> Sketch:
    buf = data if isinstance(data, bytes) else bytes(data)
    fast = _fast_decode(buf)
    if fast is not None:
        return fast
    pos, end = 0, len(buf)
    offset, counts, zero = 0, np.zeros(0), 0.0
    try:
        while pos < end:
            tag, pos = _read_varint(buf, pos)
            field, wire = tag >> 3, tag & 7
            if wire == 2:
                n, pos = _read_varint(buf, pos)
                if field == 1:
                    _decode_mapping(buf, pos, pos + n)
                elif field == 2:
                    offset, counts = _decode_store(buf, pos, pos + n)
                elif field == 3:
                    _, neg = _decode_store(buf, pos, pos + n)
                    if neg.sum() > 0:
                        raise SketchDecodeError("latency sketches never hold negative values")
                pos += n
            elif field == 4 and wire == 1:
                zero = _F64.unpack_from(buf, pos)[0]
                pos += 8
            else:
                pos = _skip(buf, pos, wire)
    except struct.error as exc:
        raise SketchDecodeError(f"truncated sketch: {exc}") from exc
    if pos != end:
        raise SketchDecodeError("trailing bytes after sketch")
    return Sketch(offset, counts, zero)


@dataclass
class DecodedBins:
    """Many sketches decoded at once: bin triples (sketch index, key, count) and each
    sketch's zero count and total count."""

    sketch: NDArray[np.int64]
    keys: NDArray[np.int64]
    counts: NDArray[np.float64]
    zero: NDArray[np.float64]

    def totals(self) -> NDArray[np.float64]:
        n = self.zero.size
        return np.bincount(self.sketch, weights=self.counts, minlength=n) + self.zero


class _Cursor:
    """Vectorised reads at one position per sketch of a concatenated buffer."""

    def __init__(self, buf: NDArray[np.uint8]) -> None:
        self.b = buf
        self.last = buf.size - 1
        # Doubles at any byte offset: one zero-copy view per alignment.
        self.views = [np.frombuffer(buf, dtype="<f8", offset=a, count=(buf.size - a) // 8)
                      for a in range(min(8, buf.size))]

    def at(self, pos: NDArray[np.int64]) -> NDArray[np.int64]:
        return self.b[np.minimum(pos, self.last)].astype(np.int64)

    def varint(self, pos: NDArray[np.int64]
               ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
        """(value, length, ok) of varints of up to 4 bytes at `pos`."""
        value = np.zeros(pos.size, dtype=np.int64)
        length = np.zeros(pos.size, dtype=np.int64)
        more = np.ones(pos.size, dtype=bool)
        for i in range(4):
            byte = self.at(pos + i)
            value |= np.where(more, (byte & 0x7F) << (7 * i), 0)
            length += more
            more &= (byte & 0x80) != 0
        return value, length, ~more

    def doubles(self, pos: NDArray[np.int64]) -> NDArray[np.float64]:
        """Little-endian doubles at `pos` (0.0 where fewer than 8 bytes remain)."""
        out = np.zeros(pos.size)
        inside = (pos >= 0) & (pos + 8 <= self.b.size)
        align = pos % 8
        for a, view in enumerate(self.views):
            m = inside & (align == a)
            if m.any():
                out[m] = view[(pos[m] - a) // 8]
        return out


def _unzigzag_arr(n: NDArray[np.int64]) -> NDArray[np.int64]:
    return (n >> 1) ^ -(n & 1)


def decode_many(buf: bytes, lengths: NDArray[np.int64]) -> DecodedBins:
    """Decode the sketches concatenated in `buf` (their byte lengths in order) at once.

    Sketches laid out as `encode` writes them (the 1% mapping, then a store of optional
    sparse entries, a contiguous array and its offset, then an optional zero count) are
    parsed with array operations across all sketches; any other layout goes through
    `decode`, which also rejects foreign mappings. Merging thousands of stored sketches
    is then a few numpy passes instead of a Python loop per sketch.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n = lengths.size
    if n == 0:
        return DecodedBins(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0),
                           np.zeros(0))
    b = np.frombuffer(buf, dtype=np.uint8)
    if b.size != int(lengths.sum()):
        raise SketchDecodeError("sketch lengths do not add up to the buffer")
    cur = _Cursor(b if b.size else np.zeros(1, np.uint8))
    start = np.cumsum(lengths) - lengths
    end = start + lengths
    mapping = np.frombuffer(_MAPPING, dtype=np.uint8)
    ok = lengths >= mapping.size
    ok &= (cur.at(start[:, None] + np.arange(mapping.size)) == mapping).all(axis=1)
    pos = start + mapping.size
    # positiveValues store (field 2)
    has_store = ok & (pos < end) & (cur.at(pos) == 0x12)
    store_len, vlen, vok = cur.varint(pos + 1)
    ok &= ~has_store | vok
    store_start = np.where(has_store, pos + 1 + vlen, pos)
    store_end = np.where(has_store, store_start + store_len, pos)
    ok &= store_end <= end
    p = store_start.copy()
    sp_sketch: list[NDArray[np.int64]] = []
    sp_keys: list[NDArray[np.int64]] = []
    sp_counts: list[NDArray[np.float64]] = []
    # Sparse entries: 0x0a len 0x08 <zigzag key varint> 0x11 <count double>. Runs of the
    # 14-byte form (2-byte keys, what `encode` writes for latencies) are counted per sketch,
    # then parsed in one pass; any other entry goes through the general loop below.
    nfix = np.zeros(n, dtype=np.int64)
    act = np.flatnonzero(ok & (p < store_end))
    q = p[act]
    end_act = store_end[act]
    while act.size:
        # the entry tag and length only; the rest of each entry is checked in bulk below
        fixed = (q + 14 <= end_act) & (cur.at(q) == 0x0A) & (cur.at(q + 1) == 0x0C)
        act, q, end_act = act[fixed], q[fixed] + 14, end_act[fixed]
        nfix[act] += 1
    if nfix.any():
        has = np.flatnonzero(nfix)
        within = np.arange(int(nfix.sum())) - np.repeat(np.cumsum(nfix[has]) - nfix[has],
                                                       nfix[has])
        owner = np.repeat(has, nfix[has])
        at = np.repeat(p[has], nfix[has]) + 14 * within
        k0, k1 = cur.at(at + 3), cur.at(at + 4)
        bad = ((cur.at(at + 2) != 0x08) | ((k0 & 0x80) == 0) | ((k1 & 0x80) != 0)
               | (cur.at(at + 5) != 0x11))
        ok[owner[bad]] = False  # another layout: these sketches go through `decode`
        sp_sketch.append(owner)
        sp_keys.append(_unzigzag_arr((k0 & 0x7F) | (k1 << 7)))
        sp_counts.append(cur.doubles(at + 6))
        p = p + 14 * nfix
    while True:
        active = ok & (p < store_end) & (cur.at(p) == 0x0A)
        if not active.any():
            break
        idx = np.flatnonzero(active)
        q = p[idx]
        elen = cur.at(q + 1)
        key, klen, kok = cur.varint(q + 3)
        good = (elen < 0x80) & (cur.at(q + 2) == 0x08) & kok & (elen == klen + 10)
        good &= cur.at(q + 3 + klen) == 0x11
        ok[idx[~good]] = False
        idx, q, key, klen = idx[good], q[good], key[good], klen[good]
        sp_sketch.append(idx)
        sp_keys.append(_unzigzag_arr(key))
        sp_counts.append(cur.doubles(q + 4 + klen))
        p[idx] = q + 4 + klen + 8
    # Contiguous counts (field 2 of the store) and their offset (field 3).
    dense = ok & (p < store_end) & (cur.at(p) == 0x12)
    dlen, vlen, vok = cur.varint(p + 1)
    ok &= ~dense | (vok & (dlen % 8 == 0))
    dlen = np.where(dense & ok, dlen, 0)
    dstart = np.where(dense, p + 1 + vlen, p)
    p = dstart + dlen
    has_off = ok & (p < store_end) & (cur.at(p) == 0x18)
    off, vlen, vok = cur.varint(p + 1)
    ok &= ~has_off | vok
    offset = np.where(has_off, _unzigzag_arr(off), 0)
    p = np.where(has_off, p + 1 + vlen, p)
    ok &= p == store_end
    # zeroCount (field 4)
    p = store_end
    has_zero = ok & (p < end) & (cur.at(p) == 0x21) & (end - p == 9)
    zero = np.where(has_zero, cur.doubles(p + 1), 0.0)
    ok &= has_zero | (p == end)

    good = np.flatnonzero(ok & (dlen > 0))
    parts_sketch: list[NDArray[np.int64]] = []
    parts_keys: list[NDArray[np.int64]] = []
    parts_counts: list[NDArray[np.float64]] = []
    # Each contiguous array is read through the view of its byte alignment.
    for a, view in enumerate(cur.views):
        runs = good[dstart[good] % 8 == a]
        if not runs.size:
            continue
        nbins = dlen[runs] // 8
        within = np.arange(int(nbins.sum())) - np.repeat(np.cumsum(nbins) - nbins, nbins)
        parts_sketch.append(np.repeat(runs, nbins))
        parts_keys.append(np.repeat(offset[runs], nbins) + within)
        parts_counts.append(view[np.repeat((dstart[runs] - a) // 8, nbins) + within])
    for idx, keys, counts in zip(sp_sketch, sp_keys, sp_counts, strict=True):
        keep = ok[idx]
        parts_sketch.append(idx[keep])
        parts_keys.append(keys[keep])
        parts_counts.append(counts[keep])
    zero = np.where(ok, zero, 0.0)
    for i in np.flatnonzero(~ok).tolist():
        sk = decode(buf[int(start[i]) : int(end[i])])
        parts_sketch.append(np.full(sk.counts.size, i, dtype=np.int64))
        parts_keys.append(np.arange(sk.counts.size, dtype=np.int64) + sk.offset)
        parts_counts.append(np.asarray(sk.counts, dtype=np.float64))
        zero[i] = sk.zero_count
    if not parts_counts:
        return DecodedBins(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), zero)
    counts = np.concatenate(parts_counts)
    nz = counts != 0
    return DecodedBins(np.concatenate(parts_sketch)[nz], np.concatenate(parts_keys)[nz],
                       counts[nz], zero)


# --- merging and quantiles ------------------------------------------------------------


def merge_sketches(sketches: Iterable[Sketch]) -> Sketch:
    items = [s for s in sketches if s.counts.size or s.zero_count]
    zero = float(sum(s.zero_count for s in items))
    items = [s for s in items if s.counts.size]
    if not items:
        return Sketch(0, np.zeros(0), zero)
    lo = min(s.offset for s in items)
    hi = max(s.offset + s.counts.size for s in items)
    out = np.zeros(hi - lo)
    for s in items:
        out[s.offset - lo : s.offset - lo + s.counts.size] += s.counts
    return Sketch(lo, out, zero)


def quantiles_from_bins(offset: int, counts: NDArray[np.float64], zero_count: float,
                        qs: Sequence[float]) -> list[float | None]:
    """DDSketch quantiles: the bin holding the element of rank floor(q * (n - 1))."""
    total = float(counts.sum()) + zero_count
    if total <= 0:
        return [None for _ in qs]
    cum = np.cumsum(counts)
    out: list[float | None] = []
    for q in qs:
        rank = q * (total - 1)
        if rank < zero_count:
            out.append(0.0)
            continue
        i = int(np.searchsorted(cum, rank - zero_count, side="right"))
        i = min(i, counts.size - 1)
        out.append(float(key_values(offset + i)))
    return out


class GroupedBins:
    """Many sketches merged per group at once: a dense (groups x keys) count matrix.
    A sketch added with sign -1 is subtracted (day-to-date differences)."""

    def __init__(self, n_groups: int) -> None:
        self.n_groups = n_groups
        self._parts: list[tuple[int, int, NDArray[np.float64]]] = []
        self._groups: list[NDArray[np.int64]] = []
        self._keys: list[NDArray[np.int64]] = []
        self._counts: list[NDArray[np.float64]] = []
        self.zero = np.zeros(n_groups)

    def add(self, group: int, sketch: Sketch, sign: float = 1.0) -> None:
        if sketch.counts.size:
            self._parts.append((group, sketch.offset,
                                sketch.counts if sign == 1.0 else sketch.counts * sign))
        if sketch.zero_count:
            self.zero[group] += sign * sketch.zero_count

    def add_bins(self, groups: NDArray[np.int64], keys: NDArray[np.int64],
                 counts: NDArray[np.float64]) -> None:
        """Bins given as (group, key, count) triples, e.g. from `decode_many`."""
        if keys.size:
            self._groups.append(np.asarray(groups, dtype=np.int64))
            self._keys.append(np.asarray(keys, dtype=np.int64))
            self._counts.append(np.asarray(counts, dtype=np.float64))

    def matrix(self) -> tuple[int, NDArray[np.float64]]:
        """(offset, counts[group, key - offset])."""
        if not self._parts and not self._keys:
            return 0, np.zeros((self.n_groups, 0))
        if self._parts:
            sizes = np.fromiter((p[2].size for p in self._parts), dtype=np.int64,
                                count=len(self._parts))
            groups = np.fromiter((p[0] for p in self._parts), dtype=np.int64,
                                 count=len(self._parts))
            offsets = np.fromiter((p[1] for p in self._parts), dtype=np.int64,
                                  count=len(self._parts))
            starts = np.cumsum(sizes) - sizes
            within = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
            self._groups.append(np.repeat(groups, sizes))
            self._keys.append(np.repeat(offsets, sizes) + within)
            self._counts.append(np.concatenate([p[2] for p in self._parts]))
            self._parts = []
        keys = np.concatenate(self._keys)
        groups = np.concatenate(self._groups)
        counts = np.concatenate(self._counts)
        self._keys, self._groups, self._counts = [keys], [groups], [counts]
        lo, hi = int(keys.min()), int(keys.max())
        width = hi - lo + 1
        flat = np.bincount(groups * width + (keys - lo), weights=counts,
                           minlength=self.n_groups * width)
        return lo, flat.reshape(self.n_groups, width).astype(np.float64, copy=False)

    def sketch(self, group: int) -> Sketch:
        lo, m = self.matrix()
        return Sketch(lo, m[group].copy(), float(self.zero[group]))

    def sketches(self) -> list[Sketch]:
        lo, m = self.matrix()
        return [Sketch(lo, m[g], float(self.zero[g])) for g in range(self.n_groups)]


def grouped_quantiles(offset: int, matrix: NDArray[np.float64], zero: NDArray[np.float64],
                      qs: Sequence[float]) -> NDArray[np.float64]:
    """Quantiles for every row at once; NaN for empty rows. Shape (groups, len(qs))."""
    n_groups = matrix.shape[0]
    out = np.full((n_groups, len(qs)), np.nan)
    if n_groups == 0:
        return out
    cum = np.cumsum(matrix, axis=1) if matrix.shape[1] else np.zeros((n_groups, 1))
    total = (cum[:, -1] if matrix.shape[1] else np.zeros(n_groups)) + zero
    for j, q in enumerate(qs):
        rank = q * (total - 1) - zero
        idx = (cum <= rank[:, None]).sum(axis=1)
        idx = np.minimum(idx, max(matrix.shape[1] - 1, 0))
        vals = key_values(offset + idx)
        vals = np.where(rank < 0, 0.0, vals)
        out[:, j] = np.where(total > 0, vals, np.nan)
    return out
