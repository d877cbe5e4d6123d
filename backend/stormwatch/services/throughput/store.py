"""Throughput experiments in the database: settings, budget accounting, scheduling runs,
manual experiments, the agents' config entries and the analyses' reads.

Flows: a "receive" sample row was shipped by the receiver, so the data flowed from
dst_agent_id (the peer) to src_agent_id (the shipper); a "send" row flowed src -> dst.
Where both kinds exist for one flow of an experiment, the receiver's rows win.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models import Agent, ThroughputBudgetLedger, ThroughputExperiment
from stormwatch.models import ThroughputSettings as SettingsRow
from stormwatch.services.advisors import catalog
from stormwatch.services.advisors.measured import effective_catalog
from stormwatch.services.throughput import analysis, scheduler

# The scheduler is off until an admin turns it on; the budget lets an admin run one default
# TCP experiment by hand (2 x 300 s at the 1 Gbit/s planning rate is 75 GB).
DEFAULTS: dict[str, Any] = {
    "enabled": False, "monthly_budget_bytes": 100 * 10**9, "monthly_budget_usd": None,
    "price_per_gb_usd": None, "default_duration_s": 300, "default_proto": "tcp",
    "streams": 4, "udp_rate_bits_per_s": 500_000_000, "udp_datagram_bytes": 1400,
    "experiments_per_pair_per_day": 4, "pairs": None,
}
SETTING_FIELDS = tuple(DEFAULTS)
# Agents list an experiment from this long before its start (contract) ...
LIST_BEFORE = timedelta(minutes=10)
# ... until this long after both directions; also how long an experiment counts as running.
LIST_AFTER = timedelta(minutes=2)
# A manual experiment "now" starts after both agents' next config poll (every 30 s).
MANUAL_LEAD = timedelta(seconds=60)
# How far ahead an admin may schedule (the budget is counted per month).
MANUAL_HORIZON = timedelta(days=90)
# The scheduler plans no nominal time closer than this, so both agents see it in time.
SCHEDULE_LEAD = timedelta(minutes=5)
# TCP has no offered rate: until a pair has history, plan with 1 Gbit/s per direction,
# above seed 004's largest inter-region figures (~850 Mbit/s before shaping).
TCP_ASSUMED_BYTES_PER_S = 125_000_000
# History that sets a pair's TCP estimate (the highest direction mean, plus a margin).
TCP_HISTORY = timedelta(days=30)
TCP_MARGIN = 1.25
GB = 1e9
# Analyse an experiment this long after its end, when the receivers' batches are in.
ANALYSE_AFTER = timedelta(minutes=5)


class ThroughputInputError(Exception):
    """Bad input naming its field; the API answers 422 with `loc`."""

    def __init__(self, loc: list[str | int], msg: str) -> None:
        super().__init__(msg)
        self.loc, self.msg = loc, msg


# --- settings -----------------------------------------------------------------------------


async def get_settings(session: AsyncSession, org_id: uuid.UUID) -> dict[str, Any]:
    row = await session.get(SettingsRow, org_id)
    if row is None:
        return {**DEFAULTS, "updated_at": None}
    return {**{f: getattr(row, f) for f in SETTING_FIELDS}, "updated_at": row.updated_at}


async def put_settings(session: AsyncSession, org_id: uuid.UUID, values: dict[str, Any]
                       ) -> dict[str, Any]:
    pairs = values.get("pairs")
    if pairs is not None:
        ids = {uuid.UUID(str(p[k])) for p in pairs for k in ("src_agent_id", "dst_agent_id")}
        known = set((await session.execute(select(Agent.id).where(
            Agent.org_id == org_id, Agent.id.in_(ids)))).scalars())
        for i, p in enumerate(pairs):
            for k in ("src_agent_id", "dst_agent_id"):
                if uuid.UUID(str(p[k])) not in known:
                    raise ThroughputInputError(["body", "pairs", i, k], "no such agent")
        values = {**values, "pairs": [{k: str(p[k]) for k in ("src_agent_id", "dst_agent_id")}
                                      for p in pairs]}
    row = {"org_id": org_id, **{f: values[f] for f in SETTING_FIELDS},
           "updated_at": datetime.now(UTC)}
    stmt = insert(SettingsRow).values(**row)
    await session.execute(stmt.on_conflict_do_update(
        index_elements=["org_id"], set_={k: stmt.excluded[k] for k in row if k != "org_id"}))
    return {**{f: row[f] for f in SETTING_FIELDS}, "updated_at": row["updated_at"]}


# --- prices and estimates -----------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    fixed: float | None
    by_region: dict[tuple[str, str], float]
    fallback: float

    def per_gb(self, agent: Agent) -> float:
        """What the sender's egress costs: the org's figure, else the catalog's inter-region
        egress for its provider/region, else the catalog's highest (errs high)."""
        if self.fixed is not None:
            return self.fixed
        return self.by_region.get((agent.provider, agent.region), self.fallback)


async def prices(session: AsyncSession, org_id: uuid.UUID, fixed: float | None) -> Prices:
    rows = [r for r in await effective_catalog(session, org_id)
            if r["item"] == "egress_inter_region_per_gb"]
    shipped = [f.price_usd for f in catalog.SHIPPED if f.item == "egress_inter_region_per_gb"]
    return Prices(fixed, {(r["provider"], r["region"]): float(r["price_usd"]) for r in rows},
                  max(shipped))


async def tcp_rates(session: AsyncSession, org_id: uuid.UUID, now: datetime
                    ) -> dict[frozenset[uuid.UUID], float]:
    """Per unordered agent pair: the highest mean TCP rate of either flow lately."""
    rows = await session.execute(text("""
        SELECT src_agent_id, dst_agent_id, avg(bytes_per_s)
        FROM throughput_samples
        WHERE org_id = :org AND proto = 'tcp' AND time >= :since
        GROUP BY src_agent_id, dst_agent_id"""), {"org": org_id, "since": now - TCP_HISTORY})
    out: dict[frozenset[uuid.UUID], float] = {}
    for s, d, mean in rows:
        key = frozenset((s, d))
        out[key] = max(out.get(key, 0.0), float(mean or 0.0))
    return out


def estimate(proto: str, duration_s: int, udp_rate_bits_per_s: int, tcp_rate: float | None,
             initiator: Agent, responder: Agent, p: Prices) -> tuple[int, float]:
    """Bytes both directions send (UDP: the offered rate; TCP: the pair's history with a
    margin, else the assumed rate) and their egress cost, each direction at its sender's
    price."""
    if proto == "udp":
        rate = udp_rate_bits_per_s / 8
    else:
        rate = tcp_rate * TCP_MARGIN if tcp_rate else TCP_ASSUMED_BYTES_PER_S
    one_way = rate * duration_s
    cost = one_way / GB * p.per_gb(initiator) + one_way / GB * p.per_gb(responder)
    return int(round(2 * one_way)), cost


# --- budget -------------------------------------------------------------------------------


def month_start(t: datetime) -> datetime:
    return datetime(t.year, t.month, 1, tzinfo=UTC)


def next_month(t: datetime) -> datetime:
    return datetime(t.year + (t.month == 12), t.month % 12 + 1, 1, tzinfo=UTC)


_SENT_BYTES = ("CASE WHEN proto = 'udp' AND loss_ratio > 0 AND loss_ratio < 1 "
               "THEN bytes_per_s / (1 - loss_ratio) ELSE bytes_per_s END")
_FLOW_SRC = "CASE WHEN direction = 'receive' THEN dst_agent_id ELSE src_agent_id END"


async def accounting(session: AsyncSession, org_id: uuid.UUID, month: datetime,
                     now: datetime, p: Prices) -> dict[str, float]:
    """The month's measured bytes and cost (per sending agent at its price) and what the
    experiments that have not ended still plan to move (their estimate less what they
    already measured)."""
    end = next_month(month)
    agents = {a.id: a for a in (await session.execute(
        select(Agent).where(Agent.org_id == org_id))).scalars()}
    used = await session.execute(text(f"""
        SELECT {_FLOW_SRC} AS sender, sum({_SENT_BYTES})
        FROM throughput_samples
        WHERE org_id = :org AND time >= :s AND time < :e AND direction = 'receive'
        GROUP BY 1"""), {"org": org_id, "s": month, "e": end})
    used_bytes, used_cost = 0.0, 0.0
    for sender, b in used:
        used_bytes += float(b or 0)
        a = agents.get(sender)
        used_cost += float(b or 0) / GB * (p.per_gb(a) if a else p.fallback)
    pending = await session.execute(text(f"""
        SELECT e.est_bytes, e.est_cost_usd, coalesce((
            SELECT sum({_SENT_BYTES}) FROM throughput_samples s
            WHERE s.org_id = e.org_id AND s.experiment_id = e.id AND s.direction = 'receive'
              AND s.time >= e.start_at - interval '1 minute'
              AND s.time < e.start_at + make_interval(secs => 2 * e.duration_s + 600)), 0)
        FROM throughput_experiments e
        WHERE e.org_id = :org AND e.start_at >= :s AND e.start_at < :e
          AND e.start_at + make_interval(secs => 2 * e.duration_s) + :after > :now"""),
        {"org": org_id, "s": month, "e": end, "now": now, "after": LIST_AFTER})
    sched_bytes, sched_cost = 0.0, 0.0
    for est, est_cost, measured in pending:
        left = max(float(est) - float(measured), 0.0)
        sched_bytes += left
        sched_cost += est_cost * (left / est) if est else 0.0
    return {"used_bytes": used_bytes, "used_cost_usd": used_cost,
            "scheduled_bytes": sched_bytes, "scheduled_cost_usd": sched_cost}


async def budget(session: AsyncSession, org_id: uuid.UUID, now: datetime) -> dict[str, Any]:
    s = await get_settings(session, org_id)
    month = month_start(now)
    p = await prices(session, org_id, s["price_per_gb_usd"])
    acc = await accounting(session, org_id, month, now, p)
    ledger = await session.get(ThroughputBudgetLedger, (org_id, month.date()))
    return {"month": month.strftime("%Y-%m"), "budget_bytes": s["monthly_budget_bytes"],
            **acc, "remaining_bytes": s["monthly_budget_bytes"] - acc["used_bytes"]
            - acc["scheduled_bytes"],
            "estimated_cost_usd": acc["used_cost_usd"] + acc["scheduled_cost_usd"],
            "budget_cost_usd": s["monthly_budget_usd"],
            "refused": ledger.refused if ledger else [],
            "refused_at": ledger.updated_at if ledger else None}


# --- experiments --------------------------------------------------------------------------


def new_token() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def status_of(e: ThroughputExperiment, now: datetime, has_samples: bool) -> str:
    end = e.start_at + timedelta(seconds=2 * e.duration_s)
    if now < e.start_at:
        return "scheduled"
    if now < end + LIST_AFTER:
        return "running"
    return "done" if has_samples else "missed"


async def busy_intervals(session: AsyncSession, org_id: uuid.UUID, start: datetime,
                         end: datetime) -> dict[uuid.UUID, list[scheduler.Interval]]:
    """Every experiment of the org touching [start, end), per agent (a day's margin covers
    the longest experiment)."""
    rows = (await session.execute(select(ThroughputExperiment).where(
        ThroughputExperiment.org_id == org_id,
        ThroughputExperiment.start_at >= start - timedelta(days=1),
        ThroughputExperiment.start_at < end))).scalars()
    busy: dict[uuid.UUID, list[scheduler.Interval]] = defaultdict(list)
    for e in rows:
        iv = scheduler.Interval(e.start_at, e.start_at + timedelta(seconds=2 * e.duration_s))
        busy[e.initiator_agent_id].append(iv)
        busy[e.responder_agent_id].append(iv)
    return busy


async def create_experiment(session: AsyncSession, org_id: uuid.UUID, body: dict[str, Any],
                            now: datetime) -> ThroughputExperiment:
    """An admin's experiment: 422 naming why when an agent is unknown or its probe is off,
    when it would overlap another experiment on either agent, or when it would take the
    month past the budget."""
    s = await get_settings(session, org_id)
    agents = {}
    for k in ("initiator_agent_id", "responder_agent_id"):
        a = await session.get(Agent, body[k])
        if a is None or a.org_id != org_id:
            raise ThroughputInputError(["body", k], "no such agent")
        agents[k] = a
    ini, resp = agents["initiator_agent_id"], agents["responder_agent_id"]
    if ini.id == resp.id:
        raise ThroughputInputError(["body", "responder_agent_id"],
                                   "the responder must differ from the initiator")
    for k, a, role in (("initiator_agent_id", ini, "initiator"),
                       ("responder_agent_id", resp, "responder")):
        if not a.throughput_address:
            raise ThroughputInputError(["body", k], (
                f"the {role} {a.name} has not reported a throughput_address (its throughput "
                "probe is off or it never connected), so it cannot run an experiment"))
    proto = body.get("proto") or ("udp" if s["default_proto"] == "udp" else "tcp")
    duration_s = body.get("duration_s") or s["default_duration_s"]
    start_at = body.get("start_at") or now + MANUAL_LEAD
    if start_at.tzinfo is None:
        raise ThroughputInputError(["body", "start_at"], "must carry a UTC offset")
    start_at = start_at.astimezone(UTC)
    if start_at < now:
        raise ThroughputInputError(["body", "start_at"], "is in the past")
    if start_at > now + MANUAL_HORIZON:
        raise ThroughputInputError(["body", "start_at"], (
            f"is more than {MANUAL_HORIZON.days} days ahead"))
    iv = scheduler.Interval(start_at, start_at + timedelta(seconds=2 * duration_s))
    busy = await busy_intervals(session, org_id, iv.start, iv.end + timedelta(days=1))
    hit = scheduler.conflicts(busy, (ini.id, resp.id), iv)
    if hit:
        first = min(hit, key=lambda x: x.start)
        raise ThroughputInputError(["body", "start_at"], (
            f"overlaps an experiment on one of the agents ({first.start.isoformat()} to "
            f"{first.end.isoformat()}, plus {scheduler.GAP_S} s either side)"))
    p = await prices(session, org_id, s["price_per_gb_usd"])
    rates = await tcp_rates(session, org_id, now)
    udp_rate = body.get("udp_rate_bits_per_s") or s["udp_rate_bits_per_s"]
    est_bytes, est_cost = estimate(proto, duration_s, udp_rate,
                                   rates.get(frozenset((ini.id, resp.id))), ini, resp, p)
    month = month_start(start_at)
    acc = await accounting(session, org_id, month, now, p)
    committed = acc["used_bytes"] + acc["scheduled_bytes"]
    if committed + est_bytes > s["monthly_budget_bytes"]:
        raise ThroughputInputError(["body"], (
            f"over the monthly egress budget: {committed:.0f} of "
            f"{s['monthly_budget_bytes']} bytes used or planned in {month:%Y-%m}, this "
            f"experiment needs about {est_bytes}"))
    cap = s["monthly_budget_usd"]
    committed_usd = acc["used_cost_usd"] + acc["scheduled_cost_usd"]
    if cap is not None and committed_usd + est_cost > cap:
        raise ThroughputInputError(["body"], (
            f"over the monthly egress cost cap: {committed_usd:.2f} of {cap:.2f} USD used "
            f"or planned in {month:%Y-%m}, this experiment costs about {est_cost:.2f}"))
    e = ThroughputExperiment(
        id=uuid.uuid4(), org_id=org_id, initiator_agent_id=ini.id, responder_agent_id=resp.id,
        proto=proto, start_at=start_at, duration_s=duration_s,
        streams=body.get("streams") or s["streams"], udp_rate_bits_per_s=udp_rate,
        udp_datagram_bytes=body.get("udp_datagram_bytes") or s["udp_datagram_bytes"],
        token=new_token(), est_bytes=est_bytes, est_cost_usd=est_cost, origin="manual",
        created_at=now)
    session.add(e)
    await session.flush()
    return e


async def with_samples(session: AsyncSession, org_id: uuid.UUID,
                       exps: list[ThroughputExperiment]) -> set[uuid.UUID]:
    """Which of the experiments have stored samples."""
    if not exps:
        return set()
    lo = min(e.start_at for e in exps) - timedelta(minutes=1)
    hi = max(e.start_at + timedelta(seconds=2 * e.duration_s) for e in exps) + \
        timedelta(minutes=10)
    rows = await session.execute(text("""
        SELECT DISTINCT experiment_id FROM throughput_samples
        WHERE org_id = :org AND time >= :lo AND time < :hi
          AND experiment_id = ANY(:ids)"""),
        {"org": org_id, "lo": lo, "hi": hi, "ids": [e.id for e in exps]})
    return {r[0] for r in rows}


async def missed_reasons(session: AsyncSession, exps: list[tuple[ThroughputExperiment, str]]
                         ) -> dict[uuid.UUID, str]:
    """Why each missed experiment stored nothing, as far as the server can tell: an agent
    deleted, its probe off, or not heard from while the experiment ran."""
    missed = [e for e, st in exps if st == "missed"]
    if not missed:
        return {}
    ids = {i for e in missed for i in (e.initiator_agent_id, e.responder_agent_id)}
    agents = {a.id: a for a in (await session.execute(
        select(Agent).where(Agent.id.in_(ids)))).scalars()}
    out: dict[uuid.UUID, str] = {}
    for e in missed:
        end = e.start_at + timedelta(seconds=2 * e.duration_s)
        why: list[str] = []
        for role, aid in (("initiator", e.initiator_agent_id),
                          ("responder", e.responder_agent_id)):
            a = agents.get(aid)
            if a is None:
                why.append(f"the {role} agent was deleted")
            elif not a.throughput_address:
                why.append(f"the {role} {a.name} has its throughput probe off")
            elif a.last_seen is None or a.last_seen < e.start_at:
                seen = ("never" if a.last_seen is None
                        else f"last at {a.last_seen:%Y-%m-%d %H:%M:%S} UTC")
                why.append(f"the {role} {a.name} was not heard from during the experiment "
                           f"(seen {seen})")
        if not why:
            ini = agents[e.initiator_agent_id]
            why.append(f"both agents were connected but the initiator {ini.name} shipped no "
                       f"samples for it before {end + LIST_AFTER:%H:%M:%S} UTC; its log names "
                       "the probe's error")
        out[e.id] = "; ".join(why)
    return out


async def list_experiments(session: AsyncSession, org_id: uuid.UUID, start: datetime,
                           end: datetime, src: uuid.UUID | None, dst: uuid.UUID | None,
                           proto: str | None, status: str | None, now: datetime,
                           limit: int = 1000) -> list[tuple[ThroughputExperiment, str]]:
    q = select(ThroughputExperiment).where(
        ThroughputExperiment.org_id == org_id, ThroughputExperiment.start_at >= start,
        ThroughputExperiment.start_at < end)
    if src is not None:
        q = q.where(ThroughputExperiment.initiator_agent_id == src)
    if dst is not None:
        q = q.where(ThroughputExperiment.responder_agent_id == dst)
    if proto is not None:
        q = q.where(ThroughputExperiment.proto == proto)
    exps = list((await session.execute(q.order_by(ThroughputExperiment.start_at)
                                       .limit(limit))).scalars())
    has = await with_samples(session, org_id, exps)
    out = [(e, status_of(e, now, e.id in has)) for e in exps]
    return [x for x in out if status is None or x[1] == status]


# --- one experiment's samples and statistics ----------------------------------------------


@dataclass
class DirectionSeries:
    direction: str  # forward | reverse
    src: uuid.UUID  # sender
    dst: uuid.UUID  # receiver
    times: list[datetime]
    bytes_per_s: np.ndarray
    loss_ratio: np.ndarray
    jitter_us: list[int | None]


async def experiment_series(session: AsyncSession, e: ThroughputExperiment
                            ) -> list[DirectionSeries]:
    rows = (await session.execute(text(f"""
        SELECT {_FLOW_SRC} AS flow_src, direction, time, bytes_per_s, loss_ratio, jitter_us
        FROM throughput_samples
        WHERE org_id = :org AND experiment_id = :id
          AND time >= :lo AND time < :hi
        ORDER BY time"""), {
        "org": e.org_id, "id": e.id, "lo": e.start_at - timedelta(minutes=1),
        "hi": e.start_at + timedelta(seconds=2 * e.duration_s) + timedelta(minutes=10)})).all()
    out = []
    for direction, sender, receiver in (("forward", e.initiator_agent_id, e.responder_agent_id),
                                        ("reverse", e.responder_agent_id, e.initiator_agent_id)):
        mine = [r for r in rows if r.flow_src == sender]
        if any(r.direction == "receive" for r in mine):
            mine = [r for r in mine if r.direction == "receive"]
        out.append(DirectionSeries(
            direction, sender, receiver, [r.time for r in mine],
            np.asarray([r.bytes_per_s for r in mine], dtype=np.float64),
            np.asarray([np.nan if r.loss_ratio is None else r.loss_ratio for r in mine],
                       dtype=np.float64),
            [r.jitter_us for r in mine]))
    return out


def results_of(series: list[DirectionSeries]) -> dict[str, Any]:
    """The stored form of an experiment's analysis (JSON: times as ISO strings)."""
    dirs = []
    for d in series:
        jit = np.asarray([np.nan if j is None else j for j in d.jitter_us], dtype=np.float64)
        st = analysis.direction_stats(d.bytes_per_s, d.loss_ratio, jit)
        trs = analysis.transitions(d.times, d.bytes_per_s)
        dirs.append({"direction": d.direction, "src_agent_id": str(d.src),
                     "dst_agent_id": str(d.dst), **st,
                     "transitions": [{**t, "at": t["at"].isoformat()} for t in trs]})
    fwd, rev = dirs[0]["mean_bytes_per_s"], dirs[1]["mean_bytes_per_s"]
    return {"directions": dirs, "asymmetry": analysis.asymmetry(fwd, rev)}


async def results(session: AsyncSession, e: ThroughputExperiment) -> dict[str, Any]:
    if e.results is not None:
        return e.results
    return results_of(await experiment_series(session, e))


async def analyse_finished(session: AsyncSession, now: datetime, limit: int = 200) -> int:
    """Stores the results of experiments that ended at least ANALYSE_AFTER ago and have
    none yet (or got samples after they were analysed: re-running is harmless)."""
    rows = list((await session.execute(select(ThroughputExperiment).where(
        ThroughputExperiment.analyzed_at.is_(None),
        ThroughputExperiment.start_at < now - ANALYSE_AFTER).order_by(
        ThroughputExperiment.start_at).limit(limit))).scalars())
    done = 0
    for e in rows:
        if e.start_at + timedelta(seconds=2 * e.duration_s) + ANALYSE_AFTER > now:
            continue
        e.results = results_of(await experiment_series(session, e))
        e.analyzed_at = now
        done += 1
    await session.flush()
    return done


# --- the agents' share of the config ------------------------------------------------------


async def config_entries(session: AsyncSession, agent: Agent, now: datetime
                         ) -> list[dict[str, Any]]:
    """Experiments the agent takes part in, from LIST_BEFORE its start until LIST_AFTER its
    end (contract), with the token only the two agents of each experiment ever see."""
    rows = (await session.execute(select(ThroughputExperiment).where(
        ThroughputExperiment.org_id == agent.org_id,
        (ThroughputExperiment.initiator_agent_id == agent.id)
        | (ThroughputExperiment.responder_agent_id == agent.id),
        ThroughputExperiment.start_at <= now + LIST_BEFORE,
        ThroughputExperiment.start_at >= now - timedelta(days=1),
    ).order_by(ThroughputExperiment.start_at))).scalars().all()
    out = []
    for e in rows:
        if e.start_at + timedelta(seconds=2 * e.duration_s) + LIST_AFTER < now:
            continue
        initiator = e.initiator_agent_id == agent.id
        peer_id = e.responder_agent_id if initiator else e.initiator_agent_id
        entry: dict[str, Any] = {
            "id": str(e.id), "role": "initiator" if initiator else "responder",
            "peer_agent_id": str(peer_id), "proto": e.proto,
            "start_at": e.start_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": e.duration_s, "streams": e.streams,
            "udp_rate_bits_per_s": e.udp_rate_bits_per_s,
            "udp_datagram_bytes": e.udp_datagram_bytes, "token": e.token}
        if initiator:
            peer = await session.get(Agent, peer_id)
            entry["peer_address"] = peer.throughput_address if peer else ""
        out.append(entry)
    return out


# --- the scheduler's runs -----------------------------------------------------------------


def default_pairs(agents: list[Agent]) -> list[tuple[Agent, Agent]]:
    """Every cross-region (or cross-provider) pair once: an experiment runs both ways."""
    ordered = sorted(agents, key=lambda a: (a.name, str(a.id)))
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1:]
            if (a.provider, a.region) != (b.provider, b.region)]


async def schedule_org(session: AsyncSession, org_id: uuid.UUID, now: datetime
                       ) -> dict[str, Any]:
    """Plans today's rest and tomorrow for one org. A (pair, protocol) that already has
    scheduler experiments in a day is left alone, so a second run inserts nothing; the
    slots are unique in the table as a backstop. Each day may use the rest of its month's
    budget spread over the days left. Writes what was refused into the month's ledger."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext('tput-schedule'), "
                               "hashtext(:org))"), {"org": str(org_id)})
    s = await get_settings(session, org_id)
    if not s["enabled"]:
        return {"planned": 0, "refused": 0}
    agents = {a.id: a for a in (await session.execute(select(Agent).where(
        Agent.org_id == org_id))).scalars()}
    listening = [a for a in agents.values() if a.throughput_address]
    if s["pairs"] is None:
        pairs = default_pairs(listening)
    else:
        pairs = [(agents[uuid.UUID(p["src_agent_id"])], agents[uuid.UUID(p["dst_agent_id"])])
                 for p in s["pairs"] if uuid.UUID(p["src_agent_id"]) in agents
                 and uuid.UUID(p["dst_agent_id"]) in agents]
        pairs = [(a, b) for a, b in pairs if b.throughput_address]
    protos = ["tcp", "udp"] if s["default_proto"] == "both" else [s["default_proto"]]
    p = await prices(session, org_id, s["price_per_gb_usd"])
    rates = await tcp_rates(session, org_id, now)
    planned, refused_total = 0, 0
    # Per month, per day planned in this run: what it refused (days it had nothing left to
    # plan for keep what the run that planned them refused).
    refusals: dict[date, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    today = datetime(now.year, now.month, now.day, tzinfo=UTC)
    for day in (today, today + timedelta(days=1)):
        day_end = day + timedelta(days=1)
        existing = {tuple(r) for r in (await session.execute(text("""
            SELECT DISTINCT initiator_agent_id, responder_agent_id, proto
            FROM throughput_experiments
            WHERE org_id = :org AND origin = 'scheduler' AND start_at >= :s AND start_at < :e
            """), {"org": org_id, "s": day, "e": day_end})).all()}
        items = []
        for a, b in pairs:
            for proto in protos:
                if (a.id, b.id, proto) in existing:
                    continue
                est, cost = estimate(proto, s["default_duration_s"], s["udp_rate_bits_per_s"],
                                     rates.get(frozenset((a.id, b.id))), a, b, p)
                items.append(scheduler.PairProto(a.id, b.id, proto, est, cost))
        month = month_start(day)
        acc = await accounting(session, org_id, month, now, p)
        days_left = (next_month(day) - day).days
        allow_bytes = scheduler.daily_allowance(
            s["monthly_budget_bytes"], acc["used_bytes"] + acc["scheduled_bytes"], days_left)
        allow_usd = None if s["monthly_budget_usd"] is None else scheduler.daily_allowance(
            s["monthly_budget_usd"], acc["used_cost_usd"] + acc["scheduled_cost_usd"],
            days_left)
        busy = await busy_intervals(session, org_id, day, day_end)
        plan = scheduler.plan_day(day, items, s["experiments_per_pair_per_day"],
                                  s["default_duration_s"], busy, int(allow_bytes), allow_usd,
                                  now + SCHEDULE_LEAD)
        rows = [{"id": uuid.uuid4(), "org_id": org_id, "initiator_agent_id": x.pair.initiator,
                 "responder_agent_id": x.pair.responder, "proto": x.pair.proto,
                 "start_at": x.start_at, "duration_s": s["default_duration_s"],
                 "streams": s["streams"], "udp_rate_bits_per_s": s["udp_rate_bits_per_s"],
                 "udp_datagram_bytes": s["udp_datagram_bytes"], "token": new_token(),
                 "est_bytes": x.pair.est_bytes, "est_cost_usd": x.pair.est_cost_usd,
                 "origin": "scheduler", "created_at": now} for x in plan.accepted]
        if rows:
            await session.execute(insert(ThroughputExperiment).values(rows)
                                  .on_conflict_do_nothing())
        planned += len(rows)
        refused_total += sum(int(str(r["experiments"])) for r in plan.refused)
        if items:
            refusals[month.date()][day.date().isoformat()] = [
                {**r, "day": day.date().isoformat()} for r in plan.refused]
    for m, by_day in refusals.items():
        old = await session.get(ThroughputBudgetLedger, (org_id, m))
        kept = [r for r in (old.refused if old else []) if r.get("day") not in by_day]
        refused = kept + [r for day_refused in by_day.values() for r in day_refused]
        stmt = insert(ThroughputBudgetLedger).values(org_id=org_id, month=m, refused=refused,
                                                     updated_at=now)
        await session.execute(stmt.on_conflict_do_update(
            index_elements=["org_id", "month"],
            set_={"refused": stmt.excluded.refused, "updated_at": stmt.excluded.updated_at}))
    return {"planned": planned, "refused": refused_total}


async def schedule_all(session: AsyncSession, now: datetime) -> dict[str, int]:
    orgs = (await session.execute(select(SettingsRow.org_id).where(
        SettingsRow.enabled.is_(True)))).scalars().all()
    total = {"orgs": 0, "planned": 0, "refused": 0}
    for org in orgs:
        out = await schedule_org(session, org, now)
        await session.commit()
        total["orgs"] += 1
        total["planned"] += out["planned"]
        total["refused"] += out["refused"]
    return total
