"""Storing traces and keeping each pair's paths (identity.py says what a path is).

A trace is stored once (its id is the agent's). The newest trace of a pair is held against
the pair's current path: a match adds its evidence to it, a difference opens a new path
whose first trace dates the change. A trace older than the pair's newest evidence (a batch
spooled through an outage) joins the path in force at its time when it matches it, and is
otherwise stored without a path: a late trace does not rewrite a pair's history.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core.db import lock_row_key
from stormwatch.models.agent import Agent, DeletedAgent
from stormwatch.models.paths import PairPath, PathTrace
from stormwatch.schemas.paths import TraceIn
from stormwatch.services.paths import requests
from stormwatch.services.paths.identity import (
    Path,
    first_difference,
    hop_to_wire,
    merge,
    path_from_wire,
)


class UnknownPeer(ValueError):
    """A trace names a destination that is no agent of the org."""

    def __init__(self, index: int, agent_id: uuid.UUID) -> None:
        super().__init__(f"dst_agent_id {agent_id} is not an agent of this org")
        self.index = index


@dataclass
class Stored:
    stored: int = 0
    duplicates: int = 0
    path_changes: int = 0


def as_path(row: PairPath) -> Path:
    return path_from_wire(row.hops, row.reached)


async def record_traces(session: AsyncSession, agent: Agent, traces: Sequence[TraceIn]) -> Stored:
    """Stores an agent's traces; the caller commits (all of them or, on error, none)."""
    dsts = {t.dst_agent_id for t in traces}
    known = set((await session.execute(select(Agent.id).where(
        Agent.org_id == agent.org_id, Agent.id.in_(dsts)))).scalars())
    known |= set((await session.execute(select(DeletedAgent.id).where(
        DeletedAgent.org_id == agent.org_id, DeletedAgent.id.in_(dsts)))).scalars())
    for i, t in enumerate(traces):
        if t.dst_agent_id not in known:
            raise UnknownPeer(i, t.dst_agent_id)
    out = Stored()
    # Oldest first: within a batch, each trace is judged against the ones before it.
    for t in sorted(traces, key=lambda t: t.started_at):
        await lock_row_key(session, "pair_paths", agent.org_id, agent.id, t.dst_agent_id)
        hops = [h.model_dump() for h in t.hops]
        inserted = (await session.execute(insert(PathTrace).values(
            id=t.id, org_id=agent.org_id, src_agent_id=agent.id, dst_agent_id=t.dst_agent_id,
            started_at=t.started_at, proto=t.proto, trigger=t.trigger,
            dst_address=t.dst_address, reached=t.reached, elapsed_ms=t.elapsed_ms, hops=hops,
        ).on_conflict_do_nothing(index_elements=["id"]).returning(PathTrace.id))).scalar()
        if inserted is None:
            out.duplicates += 1
            continue
        out.stored += 1
        if t.request_id is not None:
            await requests.serve(session, agent.org_id, agent.id, t.request_id, t.id)
        path_id, changed = await _place(session, agent, t, path_from_wire(hops, t.reached))
        out.path_changes += changed
        row = await session.get(PathTrace, t.id)
        assert row is not None
        row.path_id = path_id
    await session.flush()
    return out


async def _place(session: AsyncSession, agent: Agent, t: TraceIn,
                 trace: Path) -> tuple[uuid.UUID | None, bool]:
    """The pair path the trace counts in (opening one where it differs), and whether it
    opened a path change."""
    pair = (PairPath.org_id == agent.org_id, PairPath.src_agent_id == agent.id,
            PairPath.dst_agent_id == t.dst_agent_id)
    latest = (await session.execute(select(PairPath).where(*pair).order_by(
        PairPath.first_seen.desc()).limit(1))).scalar()
    if latest is not None and t.started_at < latest.last_seen:
        then = (await session.execute(select(PairPath).where(
            *pair, PairPath.first_seen <= t.started_at).order_by(
            PairPath.first_seen.desc()).limit(1))).scalar()
        if then is not None and first_difference(as_path(then), trace) is None:
            then.traces += 1
            return then.id, False
        return None, False
    diff = first_difference(as_path(latest), trace) if latest is not None else None
    if latest is not None and diff is None:
        merged = merge(as_path(latest), trace)
        latest.hops = [hop_to_wire(h) for h in merged.hops]
        latest.reached = merged.reached
        latest.last_seen = t.started_at
        latest.traces += 1
        return latest.id, False
    new = PairPath(id=uuid.uuid4(), org_id=agent.org_id, src_agent_id=agent.id,
                   dst_agent_id=t.dst_agent_id, first_seen=t.started_at,
                   last_seen=t.started_at, traces=1, reached=trace.reached,
                   hops=[hop_to_wire(h) for h in trace.hops])
    if latest is not None and diff is not None:
        new.prev_path_id = latest.id
        new.diff_ttl = diff.ttl
        new.added_rtt_us = diff.added_rtt_us
    session.add(new)
    await session.flush()
    return new.id, latest is not None


@dataclass
class Change:
    """A path change: the new path, the one before it, and where they part."""

    path: PairPath
    before: PairPath

    @property
    def parting_after(self) -> list[str]:
        shared = as_path(self.before).at((self.path.diff_ttl or 1) - 1)
        return sorted(shared.addrs) if shared else []

    def brief(self) -> dict[str, object]:
        return {"at": self.path.first_seen, "path_id": self.path.id,
                "diff_ttl": self.path.diff_ttl, "parting_after": self.parting_after,
                "added_rtt_us": self.path.added_rtt_us}


async def changes(session: AsyncSession, org_id: uuid.UUID, start: datetime, end: datetime,
                  src: Sequence[uuid.UUID] | None = None,
                  dst: Sequence[uuid.UUID] | None = None) -> list[Change]:
    """The org's path changes dated in [start, end), oldest first; src and dst narrow them."""
    q = select(PairPath).where(PairPath.org_id == org_id, PairPath.prev_path_id.is_not(None),
                               PairPath.diff_ttl.is_not(None),
                               PairPath.first_seen >= start, PairPath.first_seen < end)
    if src:
        q = q.where(PairPath.src_agent_id.in_(src))
    if dst:
        q = q.where(PairPath.dst_agent_id.in_(dst))
    rows = list((await session.execute(q.order_by(PairPath.first_seen))).scalars())
    prev_ids = {r.prev_path_id for r in rows}
    prevs = {p.id: p for p in (await session.execute(select(PairPath).where(
        PairPath.id.in_(prev_ids)))).scalars()} if prev_ids else {}
    return [Change(r, prevs[r.prev_path_id]) for r in rows
            if r.prev_path_id is not None and r.prev_path_id in prevs]


def nearest(changes: Sequence[Change], at: datetime, before: timedelta,
            after: timedelta) -> Change | None:
    """The change nearest to `at` dated from `at - before` to `at + after`: a path change is
    dated by the first trace on the new path, which comes up to a trace interval after the
    route changed, and a level shift by its first window at the new level."""
    near = [c for c in changes if at - before <= c.path.first_seen <= at + after]
    return min(near, key=lambda c: abs(c.path.first_seen - at), default=None)
