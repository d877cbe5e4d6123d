"""What makes two traces of a pair the same path, and where two paths part.

A path is its ordered hops, one per TTL. Per-flow and per-packet load balancing (ECMP) make
one router position answer from several addresses: the trace's probes at one TTL may come
back from siblings, and the next trace from others. So a hop is the set of addresses seen at
its TTL, and two hops are the same hop when their sets share an address; a hop that did not
answer (every probe lost, often a router that rate-limits or never sends ICMP) is unknown
and matches anything. A hop whose sets share nothing but whose next hops do is the other arm
of a diamond (two parallel routers between the same two, the common ECMP shape): a sibling,
not a change. Two paths differ at the first TTL where both answered, no address is shared
and the next hops share none either, or where one reached the destination and the other,
reaching it too, did so at another TTL. A trace that did not reach the destination says
nothing past its last hop.

A pair's current path accumulates its traces: siblings seen later join their hop, and a
hop unknown in one trace is filled by another. A trace that differs from it opens a new
path: a path change, dated by that trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Hop:
    ttl: int
    addrs: frozenset[str] = field(default_factory=frozenset)
    sent: int = 0
    lost: int = 0
    rtt_min_us: int | None = None
    rtt_med_us: int | None = None
    rtt_max_us: int | None = None
    reached: bool = False

    @property
    def answered(self) -> bool:
        return bool(self.addrs)


@dataclass(frozen=True)
class Path:
    hops: tuple[Hop, ...]
    reached: bool

    def at(self, ttl: int) -> Hop | None:
        return self.hops[ttl - 1] if 1 <= ttl <= len(self.hops) else None


@dataclass(frozen=True)
class Difference:
    ttl: int                  # the first TTL where the paths part
    old: Hop | None           # the old path's hop there (None: it had ended)
    new: Hop | None
    added_rtt_us: int | None  # new median RTT at that TTL less the old's, where both answered


def _same_hop(a: Hop, b: Hop) -> bool | None:
    """True when the hops share an address, False when both answered and share none, None
    when either is unknown."""
    if not a.answered or not b.answered:
        return None
    return not a.addrs.isdisjoint(b.addrs)


def _diamond(old: Path, new: Path, ttl: int) -> bool:
    """The hops at ttl differ but the paths meet again at the next TTL."""
    a, b = old.at(ttl + 1), new.at(ttl + 1)
    return a is not None and b is not None and _same_hop(a, b) is True


def first_difference(old: Path, new: Path) -> Difference | None:
    """Where new leaves old, or None when nothing in the two traces tells them apart."""
    longest = max(len(old.hops), len(new.hops))
    for ttl in range(1, longest + 1):
        a, b = old.at(ttl), new.at(ttl)
        if a is None or b is None:
            # One trace has ended here. Only two traces that both reached the destination, at
            # different TTLs, are known to differ: a trace that stopped short says nothing.
            if old.reached and new.reached:
                return Difference(ttl, a, b, None)
            return None
        if _same_hop(a, b) is False and not _diamond(old, new, ttl):
            added = (b.rtt_med_us - a.rtt_med_us
                     if a.rtt_med_us is not None and b.rtt_med_us is not None else None)
            return Difference(ttl, a, b, added)
    return None


def merge(current: Path, trace: Path) -> Path:
    """current with trace's evidence added: siblings joined per TTL, unknown hops filled, the
    hop statistics those of the latest trace that answered there. Only for a trace that does
    not differ from current."""
    hops: list[Hop] = []
    for ttl in range(1, max(len(current.hops), len(trace.hops)) + 1):
        a, b = current.at(ttl), trace.at(ttl)
        if a is None or b is None:
            hops.append(a or b)  # type: ignore[arg-type]
            continue
        latest = b if b.answered else a
        hops.append(Hop(ttl=ttl, addrs=a.addrs | b.addrs, sent=latest.sent, lost=latest.lost,
                        rtt_min_us=latest.rtt_min_us, rtt_med_us=latest.rtt_med_us,
                        rtt_max_us=latest.rtt_max_us, reached=a.reached or b.reached))
    reached = current.reached or trace.reached
    if reached:
        # A destination reached at one TTL ends the path there.
        end = next((h.ttl for h in hops if h.reached), len(hops))
        hops = hops[:end]
    return Path(tuple(hops), reached)


def differing_hops(a: Path, b: Path) -> list[int]:
    """Every TTL where the two paths' hops are known to differ (for showing two traces side
    by side): both answered and share no address, or one has a hop where the other ended
    after reaching the destination."""
    out = []
    for ttl in range(1, max(len(a.hops), len(b.hops)) + 1):
        x, y = a.at(ttl), b.at(ttl)
        if x is None or y is None:
            if (x is None and a.reached) or (y is None and b.reached):
                out.append(ttl)
            continue
        if _same_hop(x, y) is False:
            out.append(ttl)
    return out


def hop_from_wire(h: dict) -> Hop:
    return Hop(ttl=int(h["ttl"]), addrs=frozenset(h.get("addrs") or ()), sent=int(h["sent"]),
               lost=int(h["lost"]), rtt_min_us=h.get("rtt_min_us"),
               rtt_med_us=h.get("rtt_med_us"), rtt_max_us=h.get("rtt_max_us"),
               reached=bool(h.get("reached")))


def hop_to_wire(h: Hop) -> dict:
    return {"ttl": h.ttl, "addrs": sorted(h.addrs), "sent": h.sent, "lost": h.lost,
            "rtt_min_us": h.rtt_min_us, "rtt_med_us": h.rtt_med_us,
            "rtt_max_us": h.rtt_max_us, "reached": h.reached}


def path_from_wire(hops: Sequence[dict], reached: bool) -> Path:
    return Path(tuple(hop_from_wire(h) for h in hops), reached)

