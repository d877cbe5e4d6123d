"""Detours (seed 004 §IV-B): a path whose round trip matches the route through a middle
region, while another path between the same two regions shows a shorter route exists.

Two tests, both required, on median RTTs:
- physics: the direct path is at least as slow as the route through the middle region B,
  less a small tolerance: RTT(A,C) >= (1 - tolerance) x (RTT(A,B) + RTT(B,C)), each leg
  shorter than the direct path. A direct path cannot be much faster than a route it takes;
  a far but direct path (South America to Asia) passes this test too, so alone it is not
  evidence.
- comparison: the best RTT measured between the same two regions over any other path
  (another provider, other agents, the other direction) is at least `min_excess` times
  faster. That is the evidence that the geography allows a shorter route, which a
  comparison with the source's other destinations cannot give.

Legs use the best RTT measured between their two regions. Paths with no other path between
their regions are not judged (no evidence either way)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PathRtt:
    src: str  # region (or zone) of the source
    dst: str
    src_provider: str
    dst_provider: str
    rtt_us: float  # median RTT of the path


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def find_detours(paths: list[PathRtt], tolerance: float = 0.05,
                 min_excess: float = 1.25) -> list[dict[str, Any]]:
    """Every path that passes both tests, with the middle region that explains it (the one
    whose route is closest to the direct RTT) and the evidence."""
    best: dict[tuple[str, str], float] = {}
    between: dict[tuple[str, str], list[PathRtt]] = {}
    for p in paths:
        if p.src == p.dst:
            continue
        k = _key(p.src, p.dst)
        best[k] = min(best.get(k, float("inf")), p.rtt_us)
        between.setdefault(k, []).append(p)
    places = sorted({x for k in best for x in k})
    found: list[tuple[float, dict[str, Any]]] = []
    for p in paths:
        if p.src == p.dst:
            continue
        others = [o for o in between[_key(p.src, p.dst)] if o is not p]
        if not others:
            continue
        alt = min(others, key=lambda o: o.rtt_us)
        if p.rtt_us < min_excess * alt.rtt_us:
            continue
        choice: tuple[float, str, float, float] | None = None
        for b in places:
            if b in (p.src, p.dst):
                continue
            leg1, leg2 = best.get(_key(p.src, b)), best.get(_key(b, p.dst))
            if leg1 is None or leg2 is None or leg1 >= p.rtt_us or leg2 >= p.rtt_us:
                continue
            via = leg1 + leg2
            if p.rtt_us < (1 - tolerance) * via:
                continue  # faster than the route through b: it does not go through b
            gap = abs(p.rtt_us - via) / via
            if choice is None or gap < choice[0]:
                choice = (gap, b, leg1, leg2)
        if choice is None:
            continue
        _, b, leg1, leg2 = choice
        found.append((p.rtt_us / alt.rtt_us, {
            "src": p.src, "dst": p.dst, "via": b, "src_provider": p.src_provider,
            "dst_provider": p.dst_provider, "direct_us": p.rtt_us, "via_us": leg1 + leg2,
            "legs_us": [leg1, leg2], "via_ratio": (leg1 + leg2) / p.rtt_us,
            "best_alternative_us": alt.rtt_us,
            "alternative": {"src": alt.src, "dst": alt.dst, "src_provider": alt.src_provider,
                            "dst_provider": alt.dst_provider},
            "excess": p.rtt_us / alt.rtt_us}))
    found.sort(key=lambda x: -x[0])
    return [d for _, d in found]


def path_key(src_place: Hashable, dst_place: Hashable, src_provider: Hashable,
             dst_provider: Hashable) -> tuple[str, str, str, str]:
    return (str(src_place), str(dst_place), str(src_provider), str(dst_provider))
