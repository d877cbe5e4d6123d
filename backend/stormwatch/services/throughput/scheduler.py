"""The experiment scheduler: pure and deterministic (no database, no clock of its own).

Seed 004 §III-B repeated 5-minute experiments per region pair "equally spaced in 24-hour
intervals", limited by the providers' volume-based fees. For a day, each (pair, protocol)
gets `per_day` experiments at nominal times `i * 24h / per_day`, and the pairs are
interleaved inside each interval (pair j of N is offset by j / N of it), so the day's
experiments are evenly spread and a budget that runs short cuts every pair's later
experiments, not whole pairs. An experiment occupies its two agents for both directions
(2 * duration_s) plus GAP_S either side; one that would overlap another on either agent
moves to the first free time after its nominal one, or is refused when the day has none.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# Guard between two experiments on one agent: config polling (30 s), clock skew and the
# agents' teardown all fit in it, so the next experiment never meets the last one's traffic.
GAP_S = 60
DAY = timedelta(days=1)


@dataclass(frozen=True)
class PairProto:
    initiator: uuid.UUID
    responder: uuid.UUID
    proto: str
    est_bytes: int
    est_cost_usd: float


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime  # start + 2 * duration_s (both directions)


@dataclass(frozen=True)
class Planned:
    pair: PairProto
    start_at: datetime


@dataclass
class Plan:
    accepted: list[Planned] = field(default_factory=list)
    refused: list[dict[str, object]] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(p.pair.est_bytes for p in self.accepted)

    @property
    def cost_usd(self) -> float:
        return sum(p.pair.est_cost_usd for p in self.accepted)


def overlaps(a: Interval, b: Interval, gap_s: int = GAP_S) -> bool:
    """True when the two experiments come within `gap_s` of each other."""
    gap = timedelta(seconds=gap_s)
    return a.start < b.end + gap and b.start < a.end + gap


def conflicts(busy: dict[uuid.UUID, list[Interval]], agents: Iterable[uuid.UUID],
              candidate: Interval, gap_s: int = GAP_S) -> list[Interval]:
    return [iv for a in agents for iv in busy.get(a, []) if overlaps(iv, candidate, gap_s)]


def nominal_times(day_start: datetime, per_day: int, n_items: int, j: int) -> list[datetime]:
    spacing = DAY / per_day
    return [day_start + spacing * i + spacing * j / n_items for i in range(per_day)]


def plan_day(day_start: datetime, pairs: list[PairProto], per_day: int, duration_s: int,
             busy: dict[uuid.UUID, list[Interval]], allowance_bytes: int,
             allowance_usd: float | None, not_before: datetime,
             gap_s: int = GAP_S) -> Plan:
    """The day's experiments for `pairs`, around what `busy` already holds (it is extended
    with what is accepted). Nominal times before `not_before` are skipped (they passed);
    an experiment that would take the day past `allowance_bytes` (or `allowance_usd`) is
    refused, and so is one with no free time left in the day on one of its agents."""
    plan = Plan()
    if not pairs or per_day <= 0:
        return plan
    length = timedelta(seconds=2 * duration_s)
    day_end = day_start + DAY
    order = sorted(((t, j) for j in range(len(pairs))
                    for t in nominal_times(day_start, per_day, len(pairs), j)),
                   key=lambda x: (x[0], x[1]))
    refused: dict[tuple[uuid.UUID, uuid.UUID, str, str], int] = {}
    used_bytes, used_usd = 0, 0.0
    for nominal, j in order:
        if nominal < not_before:
            continue
        p = pairs[j]
        key = (p.initiator, p.responder, p.proto)
        if used_bytes + p.est_bytes > allowance_bytes:
            refused[(*key, "budget_bytes")] = refused.get((*key, "budget_bytes"), 0) + 1
            continue
        if allowance_usd is not None and used_usd + p.est_cost_usd > allowance_usd:
            refused[(*key, "budget_usd")] = refused.get((*key, "budget_usd"), 0) + 1
            continue
        start = nominal
        agents = (p.initiator, p.responder)
        while start + length <= day_end:
            hit = conflicts(busy, agents, Interval(start, start + length), gap_s)
            if not hit:
                break
            start = max(iv.end for iv in hit) + timedelta(seconds=gap_s)
        if start + length > day_end:
            refused[(*key, "no_free_time")] = refused.get((*key, "no_free_time"), 0) + 1
            continue
        iv = Interval(start, start + length)
        for a in agents:
            busy.setdefault(a, []).append(iv)
        plan.accepted.append(Planned(p, start))
        used_bytes += p.est_bytes
        used_usd += p.est_cost_usd
    reasons = {
        "budget_bytes": "would exceed the day's share of the monthly egress budget (bytes)",
        "budget_usd": "would exceed the day's share of the monthly egress budget (USD)",
        "no_free_time": "no free time left in the day on one of its agents",
    }
    plan.refused = [{"pair": {"src_agent_id": str(i), "dst_agent_id": str(r)}, "proto": proto,
                     "reason": reasons[why], "code": why, "experiments": n}
                    for (i, r, proto, why), n in sorted(refused.items(), key=lambda kv: (
                        str(kv[0][0]), str(kv[0][1]), kv[0][2], kv[0][3]))]
    return plan


def daily_allowance(budget: float, committed: float, days_left: int) -> float:
    """The share of what is left of a monthly budget one day may plan: the rest spread over
    the days left in the month (this one included), so the month's later days keep theirs."""
    return max(budget - committed, 0.0) / max(days_left, 1)
