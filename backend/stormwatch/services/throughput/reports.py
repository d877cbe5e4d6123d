"""Analyses over many experiments: the region-pair matrix with asymmetry, CV_RMSE between
AZ pairs, long degradations. They read one result per experiment (stored once analysed,
else computed from its raw samples), so a range of months costs one row per experiment."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models import Agent, ThroughputExperiment
from stormwatch.services.throughput import analysis, store


async def flow_means(session: AsyncSession, org_id: uuid.UUID, start: datetime,
                     end: datetime, proto: str | None
                     ) -> list[dict[str, Any]]:
    """One row per direction of every ended experiment in [start, end) with samples:
    sender, receiver, proto, start, end, mean."""
    q = select(ThroughputExperiment).where(
        ThroughputExperiment.org_id == org_id, ThroughputExperiment.start_at >= start,
        ThroughputExperiment.start_at < end)
    if proto is not None:
        q = q.where(ThroughputExperiment.proto == proto)
    out = []
    now = datetime.now(UTC)
    for e in (await session.execute(q.order_by(ThroughputExperiment.start_at))).scalars():
        # A running experiment's partial means would bias its pair.
        if e.start_at + timedelta(seconds=2 * e.duration_s) + store.LIST_AFTER > now:
            continue
        res = await store.results(session, e)
        for i, d in enumerate(res["directions"]):
            if d["mean_bytes_per_s"] is None:
                continue
            d_start = e.start_at + timedelta(seconds=i * e.duration_s)
            out.append({"experiment_id": e.id, "src": uuid.UUID(d["src_agent_id"]),
                        "dst": uuid.UUID(d["dst_agent_id"]), "proto": e.proto,
                        "start": d_start, "end": d_start + timedelta(seconds=e.duration_s),
                        "slot": e.start_at.replace(minute=0, second=0, microsecond=0),
                        "mean": float(d["mean_bytes_per_s"])})
    return out


async def _agents(session: AsyncSession, org_id: uuid.UUID) -> dict[uuid.UUID, Agent]:
    return {a.id: a for a in (await session.execute(
        select(Agent).where(Agent.org_id == org_id))).scalars()}


def _flow_stats(means: dict[Any, list[float]], key: Any, reverse_key: Any) -> dict[str, Any]:
    mean, std = analysis.mean_and_std(means[key])
    rev_mean, _ = analysis.mean_and_std(means.get(reverse_key, []))
    return {"mean_bytes_per_s": mean, "std_bytes_per_s": std,
            "cov": std / mean if mean and std is not None else None,
            "experiments": len(means[key]), "reverse_mean_bytes_per_s": rev_mean,
            "asymmetry": analysis.asymmetry(mean, rev_mean)}


async def pairs(session: AsyncSession, org_id: uuid.UUID, start: datetime, end: datetime,
                proto: str | None) -> dict[str, Any]:
    """Per flow (region -> region, and agent -> agent) and protocol: mean and sigma over
    the experiments' means (seed 004 Fig. 2, 5), and asymmetry against the opposite flow."""
    flows = await flow_means(session, org_id, start, end, proto)
    agents = await _agents(session, org_id)
    by_agent: dict[tuple[uuid.UUID, uuid.UUID, str], list[float]] = defaultdict(list)
    by_region: dict[tuple[str, str, str, str, str], list[float]] = defaultdict(list)
    for f in flows:
        by_agent[(f["src"], f["dst"], f["proto"])].append(f["mean"])
        a, b = agents.get(f["src"]), agents.get(f["dst"])
        if a is None or b is None:
            continue
        by_region[(a.provider, a.region, b.provider, b.region, f["proto"])].append(f["mean"])
    agent_rows = [{"src_agent_id": s, "dst_agent_id": d, "proto": p,
                   **_flow_stats(by_agent, (s, d, p), (d, s, p))}
                  for (s, d, p) in sorted(by_agent, key=str)]
    region_rows = [{"src_provider": sp, "src_region": sr, "dst_provider": dp,
                    "dst_region": dr, "proto": p,
                    **_flow_stats(by_region, (sp, sr, dp, dr, p), (dp, dr, sp, sr, p))}
                   for (sp, sr, dp, dr, p) in sorted(by_region)]
    return {"start": start, "end": end, "region_pairs": region_rows, "agent_pairs": agent_rows}


async def az_pairs(session: AsyncSession, org_id: uuid.UUID, start: datetime, end: datetime,
                   src_region: str | None, dst_region: str | None, proto: str | None
                   ) -> dict[str, Any]:
    """Per region pair (flow) and protocol: each AZ pair's mean, and CV_RMSE between every
    two AZ pairs over the hours both measured (seed 004 §IV-C)."""
    flows = await flow_means(session, org_id, start, end, proto)
    agents = await _agents(session, org_id)
    groups: dict[tuple[str, str, str, str, str],
                 dict[tuple[str, str], dict[datetime, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for f in flows:
        a, b = agents.get(f["src"]), agents.get(f["dst"])
        if a is None or b is None:
            continue
        if (src_region is not None and a.region != src_region) or (
                dst_region is not None and b.region != dst_region):
            continue
        key = (a.provider, a.region, b.provider, b.region, f["proto"])
        groups[key][(a.zone, b.zone)][f["slot"]].append(f["mean"])
    out = []
    for key in sorted(groups):
        zones = groups[key]
        slot_means = {z: {t: sum(v) / len(v) for t, v in slots.items()}
                      for z, slots in zones.items()}
        az = []
        for z in sorted(zones):
            vals = [m for v in zones[z].values() for m in v]
            az.append({"src_zone": z[0], "dst_zone": z[1],
                       "mean_bytes_per_s": sum(vals) / len(vals) if vals else None,
                       "experiments": len(vals)})
        out.append({"src_provider": key[0], "src_region": key[1], "dst_provider": key[2],
                    "dst_region": key[3], "proto": key[4], "az_pairs": az,
                    "comparisons": analysis.az_pair_cv_rmse(slot_means)})
    return {"start": start, "end": end, "region_pairs": out}


async def degradations(session: AsyncSession, org_id: uuid.UUID, start: datetime,
                       end: datetime, fraction: float, min_hours: float, proto: str | None
                       ) -> dict[str, Any]:
    """Per agent flow and protocol: runs of experiments below `fraction` of the flow's norm
    lasting at least `min_hours` (seed 004 §IV-C, Fig. 8a)."""
    flows = await flow_means(session, org_id, start, end, proto)
    agents = await _agents(session, org_id)
    runs: dict[tuple[uuid.UUID, uuid.UUID, str], list[analysis.Measured]] = defaultdict(list)
    for f in flows:
        runs[(f["src"], f["dst"], f["proto"])].append(
            analysis.Measured(f["start"], f["end"], f["mean"]))
    out = []
    for (s, d, p), ms in sorted(runs.items(), key=lambda kv: str(kv[0])):
        _, found = analysis.degradations(ms, fraction, timedelta(hours=min_hours))
        a, b = agents.get(s), agents.get(d)
        for g in found:
            out.append({"src_agent_id": s, "dst_agent_id": d,
                        "src_region": a.region if a else "", "dst_region": b.region if b else "",
                        "proto": p, "duration_s": (g["end"] - g["start"]).total_seconds(),
                        **g})
    out.sort(key=lambda g: g["start"])
    return {"start": start, "end": end, "fraction": fraction, "min_hours": min_hours,
            "degradations": out}
