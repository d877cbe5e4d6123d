"""Rollup reads: a level's rows of the selected series in a range, packed per series in SQL
(big-endian numbers, concatenated sketches with their lengths) and merged per group (and
window) in numpy into sketched distributions that share one (group x bin) matrix; the
minute and 5-minute rows of mesh and quorum series come through their covering indexes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stormwatch.services.analytics.filters import KindSpec
from stormwatch.services.analytics.grouping import GroupFn, dense_ids, group_key
from stormwatch.services.analytics.sketches import GroupedBins, Sketch, decode_many
from stormwatch.services.analytics.stats import Distribution, Moments

# Tables whose minute and 5-minute rollups have covering per-series indexes (migrations 0005
# and 0006), those levels, and the longest sketch the indexes hold.
MINUTE_SERIES_INDEXED = ("mesh_rollups", "quorum_rollups")
SERIES_INDEXED_LEVELS = (60, 300)
MINUTE_INDEX_SKETCH_MAX = 1500


@dataclass
class SharedBins:
    """Merged sketches as one (group x bin) count matrix: bins from `offset`, each group's
    zero count, and the matrix row of each group key."""

    offset: int
    matrix: np.ndarray
    zero: np.ndarray
    row_of: dict[Any, int]


def packed_column(expr: str, send: str) -> str:
    """SQL aggregating a column's binary send form over a series' rows into one bytea."""
    return f"string_agg({send}({expr}), ''::bytea)"


def packed_rollups_sql(spec: KindSpec, prefix: str, where: list[str], bucket_s: int) -> str:
    """One row per series, each column the series' rows packed as binary (big-endian
    numbers, concatenated sketches with their lengths): thousands of rollup rows reach
    numpy as a few byte strings instead of Python row objects. The aggregates of one
    query see the rows in the same order, so the columns stay aligned.

    Minute and 5-minute rows of mesh and quorum series are read through the covering
    per-series indexes of migrations 0005 and 0006 (an index-only scan of adjacent pages)
    and, for the rare rows whose sketch is too long for that index, through its key-only
    companion."""
    keys_sql = ", ".join(spec.keys)
    match = (f"org_id = :org AND bucket_s = {int(bucket_s)} AND bucket_start >= :s "
             f"AND bucket_start < :e" + "".join(f" AND {c}" for c in where))
    source = f"{spec.table} WHERE {match}"
    if (bucket_s in SERIES_INDEXED_LEVELS and spec.table in MINUTE_SERIES_INDEXED
            and prefix == spec.value_prefix):
        fields = ", ".join([*spec.keys, "bucket_start", "sample_count", "failure_count",
                            *(f"{prefix}_{c}" for c in ("count", "min", "max", "sum", "sum_sq",
                                                         "sketch"))])
        length = f"length({prefix}_sketch)"
        source = (f"(SELECT {fields} FROM {spec.table} WHERE {match} AND {length} <= "
                  f"{MINUTE_INDEX_SKETCH_MAX} UNION ALL SELECT {fields} FROM {spec.table} "
                  f"WHERE {match} AND {length} > {MINUTE_INDEX_SKETCH_MAX}) AS r")
    cols = [packed_column("extract(epoch FROM bucket_start)::float8", "float8send"),
            packed_column("sample_count", "int8send"),
            packed_column("failure_count", "int8send"),
            packed_column(f"{prefix}_count", "int8send"),
            packed_column(f"coalesce({prefix}_min, 'Infinity')", "float8send"),
            packed_column(f"coalesce({prefix}_max, '-Infinity')", "float8send"),
            packed_column(f"{prefix}_sum", "float8send"),
            packed_column(f"{prefix}_sum_sq", "float8send"),
            f"string_agg({prefix}_sketch, ''::bytea)",
            packed_column(f"length({prefix}_sketch)", "int4send")]
    return f"SELECT {keys_sql}, {', '.join(cols)} FROM {source} GROUP BY {keys_sql}"


def group_packed_rollups(rows: Sequence[Any], nk: int, group: GroupFn, window_s: int | None
                         ) -> tuple[dict[Any, Distribution], SharedBins | None]:
    """Distributions per group (and window) from `packed_rollups_sql` rows."""
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    gids: list[np.ndarray] = []
    cols: list[list[np.ndarray]] = [[] for _ in range(7)]
    blobs: list[bytes] = []
    lengths: list[np.ndarray] = []
    for r in rows:
        g = group_key(group, tuple(r[:nk]), 0.0, None, cache)
        if g is None:
            continue
        gids.append(dense_ids(index, g, np.frombuffer(r[nk], dtype=">f8"), window_s))
        for c, dtype in enumerate((">i8", ">i8", ">i8", ">f8", ">f8", ">f8", ">f8")):
            cols[c].append(np.frombuffer(r[nk + 1 + c], dtype=dtype))
        blobs.append(r[nk + 8])
        lengths.append(np.frombuffer(r[nk + 9], dtype=">i4"))
    n = len(index)
    if n == 0:
        return {}, None
    gid = np.concatenate(gids)
    samples, failures, counts, mins, maxs, sums, sums_sq = (
        np.concatenate(c).astype(np.float64) for c in cols)
    sample_n = np.bincount(gid, weights=samples, minlength=n)
    failure_n = np.bincount(gid, weights=failures, minlength=n)
    value_n = np.bincount(gid, weights=counts, minlength=n)
    total = np.bincount(gid, weights=sums, minlength=n)
    total_sq = np.bincount(gid, weights=sums_sq, minlength=n)
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    np.minimum.at(lo, gid, mins)
    np.maximum.at(hi, gid, maxs)
    dec = decode_many(b"".join(bytes(b) for b in blobs),
                      np.concatenate(lengths).astype(np.int64))
    if not np.array_equal(dec.totals(), counts):
        raise RuntimeError("rollup sketches and counts are out of step")
    bins = GroupedBins(n)
    bins.add_bins(gid[dec.sketch], dec.keys, dec.counts)
    bins.zero += np.bincount(gid, weights=dec.zero, minlength=n)
    offset, matrix = bins.matrix()
    out: dict[Any, Distribution] = {}
    for g, j in index.items():
        m = Moments(samples=int(sample_n[j]), failures=int(failure_n[j]),
                    count=int(value_n[j]), total=float(total[j]), total_sq=float(total_sq[j]),
                    minimum=float(lo[j]), maximum=float(hi[j]))
        row = matrix[j] if matrix.shape[1] else np.zeros(0)
        out[g] = Distribution.sketched(Sketch(offset, row, float(bins.zero[j])), m)
    return out, SharedBins(offset, matrix, bins.zero, index)
