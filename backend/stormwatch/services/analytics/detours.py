"""Detours (seed 004 §IV-B): a path whose round trip matches the route through a middle
place, while the evidence says a shorter route exists.

Places are metros where the geography catalog places both ends (services/geography: AWS
eu-west-1 and Azure northeurope are both Dublin), otherwise the regions (or zones) as named.
A path is a detour when the physics test holds and at least one of the two evidence tests:
- physics: the direct path is at least as slow as the route through the middle place B,
  less a small tolerance: RTT(A,C) >= (1 - tolerance) x (RTT(A,B) + RTT(B,C)), each leg
  shorter than the direct path. A direct path cannot be much faster than a route it takes;
  a far but direct path (South America to Asia) passes this test too, so alone it is not
  evidence.
- comparison: the best RTT measured between the same two places over any other path
  (another provider, other agents, the other direction) is at least `min_excess` times
  faster. That shows a shorter route exists, which a comparison with the source's other
  destinations cannot.
- geography: the direct RTT is at least `max_stretch` times the physical floor between
  the two places (light in fibre over the great circle, there and back). Well-routed paths
  between metros measure 1.4-2.0 times their floor (the demo's table of seed 001 and 004
  figures: Virginia-Singapore 1.40, Dublin-Virginia 1.47, Dublin-São Paulo 1.96), so a path
  at twice its floor that matches a route through a third metro is evidence with one
  provider alone.

Legs use the best RTT measured between their two places. A path with neither evidence test
available (no other path between its places, no geography) is not judged."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PathRtt:
    src: str  # region (or zone) of the source
    dst: str
    src_provider: str
    dst_provider: str
    rtt_us: float  # median RTT of the path
    src_place: str = ""  # metro (or, unplaced, the region); empty: the region itself
    dst_place: str = ""

    @property
    def a(self) -> str:
        return self.src_place or self.src

    @property
    def b(self) -> str:
        return self.dst_place or self.dst


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def find_detours(paths: list[PathRtt], tolerance: float = 0.05, min_excess: float = 1.25,
                 floors_us: Mapping[tuple[str, str], float] | None = None,
                 max_stretch: float = 2.0) -> list[dict[str, Any]]:
    """Every path that passes the physics test and an evidence test, with the middle place
    that explains it (the one whose route is closest to the direct RTT) and the evidence.
    floors_us holds the physical floor between two places (either order), where known."""
    floors_us = floors_us or {}
    best: dict[tuple[str, str], float] = {}
    between: dict[tuple[str, str], list[PathRtt]] = {}
    regions_in: dict[str, set[str]] = {}
    for p in paths:
        regions_in.setdefault(p.a, set()).add(f"{p.src_provider}/{p.src}")
        regions_in.setdefault(p.b, set()).add(f"{p.dst_provider}/{p.dst}")
        if p.a == p.b:
            continue
        k = _key(p.a, p.b)
        best[k] = min(best.get(k, float("inf")), p.rtt_us)
        between.setdefault(k, []).append(p)
    places = sorted({x for k in best for x in k})
    found: list[tuple[float, dict[str, Any]]] = []
    for p in paths:
        if p.a == p.b:
            continue
        evidence = []
        others = [o for o in between[_key(p.a, p.b)] if o is not p]
        alt = min(others, key=lambda o: o.rtt_us) if others else None
        if alt is not None and p.rtt_us >= min_excess * alt.rtt_us:
            evidence.append("comparison")
        floor = floors_us.get(_key(p.a, p.b))
        stretch = p.rtt_us / floor if floor else None
        if stretch is not None and stretch >= max_stretch:
            evidence.append("geography")
        if not evidence:
            continue
        choice: tuple[float, str, float, float] | None = None
        for b in places:
            if b in (p.a, p.b):
                continue
            leg1, leg2 = best.get(_key(p.a, b)), best.get(_key(b, p.b))
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
        excess = p.rtt_us / alt.rtt_us if alt is not None else None
        found.append((max(excess or 0.0, (stretch or 0.0) / max_stretch), {
            "src": p.src, "dst": p.dst, "src_place": p.a, "dst_place": p.b, "via": b,
            "via_regions": sorted(regions_in.get(b, ())),
            "src_provider": p.src_provider, "dst_provider": p.dst_provider,
            "direct_us": p.rtt_us, "via_us": leg1 + leg2, "legs_us": [leg1, leg2],
            "via_ratio": (leg1 + leg2) / p.rtt_us, "evidence": evidence,
            "best_alternative_us": alt.rtt_us if alt is not None else None,
            "alternative": None if alt is None else {
                "src": alt.src, "dst": alt.dst, "src_provider": alt.src_provider,
                "dst_provider": alt.dst_provider},
            "excess": excess, "floor_us": floor, "stretch": stretch}))
    found.sort(key=lambda x: -x[0])
    return [d for _, d in found]


def path_key(src_place: Hashable, dst_place: Hashable, src_provider: Hashable,
             dst_provider: Hashable) -> tuple[str, str, str, str]:
    return (str(src_place), str(dst_place), str(src_provider), str(dst_provider))
