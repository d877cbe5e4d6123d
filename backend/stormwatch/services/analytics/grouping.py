"""How series become groups: the group functions behind `group_by` (pairs, places, topology
classes, quorum groups, storage columns), each series key's group looked up once, and the
dense ids (per group, or per group and window) that the numpy passes bin samples and
rollup rows by."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from stormwatch.services.analytics.filters import KIND_SPECS, Fleet, QueryError

GroupFn = Callable[[tuple[Any, ...]], Any]


def group_key(group: GroupFn, keys: tuple[Any, ...], t: float, window_s: int | None,
              cache: dict[tuple[Any, ...], Any]) -> Any:
    """The series key's group (computed once per key in `cache`), paired with the window
    start of t when windowed; None when the group function leaves the series out."""
    g = cache.get(keys, ...)
    if g is ...:
        g = cache[keys] = group(keys)
    if g is None or window_s is None:
        return g
    return (g, int(t // window_s) * window_s)


def dense_ids(index: dict[Any, int], g: Any, t: np.ndarray, window_s: int | None
              ) -> np.ndarray:
    """A dense id per timestamp in t: its group's, or its (group, window start)'s when
    windowed; new keys are numbered in `index` in the order they first appear."""
    if window_s is None:
        j = index.get(g)
        if j is None:
            j = index[g] = len(index)
        return np.full(t.size, j, dtype=np.int64)
    starts, inv = np.unique((t // window_s).astype(np.int64) * window_s, return_inverse=True)
    ids = np.empty(starts.size, dtype=np.int64)
    for u, w in enumerate(starts.tolist()):
        j = index.get((g, w))
        if j is None:
            j = index[(g, w)] = len(index)
        ids[u] = j
    return ids[inv.ravel()]


PAIR_GROUPINGS = ("all", "pair", "src", "dst", "topology_class", "payload_bytes", "zone_pair",
                  "region_pair", "provider_pair")
OTHER_GROUPINGS = {
    "quorum": ("all", "agent", "group", "quorum"),
    "storage": ("all", "agent", "target", "op", "size_bytes", "variant", "content", "copies",
                "target_op_size", "provider_op_size"),
}


def group_fn(kind: str, group_by: str, fleet: Fleet,
             target_provider: dict[uuid.UUID, str] | None = None) -> GroupFn:
    spec = KIND_SPECS[kind]
    if group_by == "all":
        return lambda k: "all"
    if spec.pair:
        if group_by not in PAIR_GROUPINGS and not (kind == "throughput" and group_by == "proto"):
            raise QueryError("group_by", f"group_by must be one of {', '.join(PAIR_GROUPINGS)}")
        if group_by == "pair":
            return lambda k: (str(k[0]), str(k[1]))
        if group_by == "src":
            return lambda k: str(k[0])
        if group_by == "dst":
            return lambda k: str(k[1])
        if group_by == "topology_class":
            return lambda k: fleet.topology_of(k[0], k[1])
        if group_by == "payload_bytes":
            return lambda k: k[2] if kind == "mesh" else None
        if group_by == "proto":
            return lambda k: k[2]
        level = group_by.split("_")[0]
        return lambda k: (fleet.level_of(k[0], level), fleet.level_of(k[1], level))
    allowed = OTHER_GROUPINGS[kind]
    if group_by not in allowed:
        raise QueryError("group_by", f"group_by must be one of {', '.join(allowed)}")
    if group_by == "agent":
        return lambda k: str(k[0])
    if kind == "quorum":
        if group_by == "group":
            return lambda k: k[1]
        return lambda k: f"Q{k[2]}/{k[3]}"
    col = {"target": 1, "op": 2, "variant": 3, "content": 4, "size_bytes": 5, "copies": 6}
    if group_by in col:
        i = col[group_by]
        return lambda k: str(k[i]) if i == 1 else k[i]
    if group_by == "target_op_size":
        return lambda k: (str(k[1]), k[2], k[5])
    tp = target_provider or {}
    return lambda k: (tp.get(k[1], str(k[1])), k[2], k[5])
