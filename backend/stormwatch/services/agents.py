"""Agent enrollment, topology classes and the configuration each agent pulls."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
from sqlalchemy import delete, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core.security import hash_token, new_token
from stormwatch.models import Agent, AgentPair, DeletedAgent, EnrollmentToken, Org
from stormwatch.models.org import DEFAULT_MESH_SETTINGS

METADATA_FIELDS = ("provider", "region", "zone", "subnet", "instance_type", "private_ip",
                   "public_ip")


class Placement(Protocol):
    id: uuid.UUID
    provider: str
    region: str
    zone: str
    subnet: str


def topology_class(src: Placement, dst: Placement) -> str:
    """Seed 003 §4.3 classes, from the widest difference between the two agents. A field
    empty on either side is unknown, never equal: the pair gets the class of the first level
    it is not shown to share (docs/methodology.md, Topology classes)."""
    if src.id == dst.id:
        return "self"
    for field, crossing in (("provider", "cross_provider"), ("region", "cross_region"),
                            ("zone", "cross_az"), ("subnet", "cross_subnet")):
        a, b = getattr(src, field), getattr(dst, field)
        if not a or not b or a != b:
            return crossing
    return "same_subnet"


FLEET_LOCK = "agent-fleet"
_enrollment_slots: weakref.WeakValueDictionary[str, asyncio.Lock] = (
    weakref.WeakValueDictionary())


@asynccontextmanager
async def enrollment_slot(enrollment_token: str) -> AsyncIterator[None]:
    """One enrollment per enrollment token at a time in this process. Enter it before the
    session's first query: a rollout's other enrollments then wait here, not on the org's
    database lock holding pooled connections the rest of the API needs."""
    key = hash_token(enrollment_token)
    slot = _enrollment_slots.get(key)
    if slot is None:
        slot = _enrollment_slots[key] = asyncio.Lock()
    async with slot:
        yield


async def lock_org_fleet(session: AsyncSession, org_id: uuid.UUID) -> None:
    """Serialises changes to an org's agents until the transaction ends, so each one sees
    the agents the others committed and the pair table ends complete. Take it before
    writing any agent row: a row lock held while waiting here could deadlock."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:lock), hashtext(:org))"),
                          {"lock": FLEET_LOCK, "org": str(org_id)})


async def refresh_agent_pairs(session: AsyncSession, agent_id: uuid.UUID,
                              org_id: uuid.UUID) -> None:
    """Writes the pairs of one agent with every agent of its org, both ways, and only
    those whose class is new or changed; call it under `lock_org_fleet`."""
    # Plain rows, not ORM objects: the identity map could hold stale placements.
    rows = (await session.execute(select(
        Agent.id, Agent.provider, Agent.region, Agent.zone, Agent.subnet).where(
        Agent.org_id == org_id))).all()
    me = next((r for r in rows if r.id == agent_id), None)
    if me is None:
        return
    pairs = [(me, o) for o in rows] + [(o, me) for o in rows if o.id != agent_id]
    values = [{"org_id": org_id, "src_agent_id": src.id, "dst_agent_id": dst.id,
               "topology_class": topology_class(src, dst)} for src, dst in pairs]
    stmt = insert(AgentPair)
    await session.execute(stmt.on_conflict_do_update(
        index_elements=[AgentPair.src_agent_id, AgentPair.dst_agent_id],
        set_={"topology_class": stmt.excluded.topology_class},
        where=AgentPair.topology_class != stmt.excluded.topology_class), values)


async def delete_agent(session: AsyncSession, agent: Agent) -> bool:
    """Deletes an agent, its pairs with it (foreign keys cascade); False when a concurrent
    call deleted it first."""
    await lock_org_fleet(session, agent.org_id)
    gone = (await session.execute(
        delete(Agent).where(Agent.id == agent.id).returning(
            Agent.id, Agent.org_id, Agent.name, Agent.provider, Agent.region, Agent.zone,
            Agent.token_hash))).first()
    if gone is None:
        return False
    # Remembered in the same transaction, so no moment exists where the id is simply unknown.
    await session.execute(insert(DeletedAgent).values(
        id=gone.id, org_id=gone.org_id, name=gone.name, provider=gone.provider,
        region=gone.region, zone=gone.zone, token_hash=gone.token_hash,
        deleted_at=datetime.now(UTC)).on_conflict_do_nothing())
    return True


class AgentGone(Exception):
    """The agent was deleted, or re-enrolled under a new token, while its call waited."""


class EnrollmentRefused(Exception):
    pass


async def enroll(session: AsyncSession, enrollment_token: str, name: str,
                 agent_version: str, mesh_address: str, metadata: dict[str, str]
                 ) -> tuple[Agent, str]:
    et = (await session.execute(select(EnrollmentToken).where(
        EnrollmentToken.token_hash == hash_token(enrollment_token)))).scalar()
    now = datetime.now(UTC)
    if et is None or et.revoked_at is not None or (et.expires_at and et.expires_at <= now):
        raise EnrollmentRefused("unknown, revoked or expired enrollment token")
    tok = new_token("agent")
    await lock_org_fleet(session, et.org_id)
    agent = (await session.execute(select(Agent).where(
        Agent.org_id == et.org_id, Agent.name == name).with_for_update())).scalar()
    if agent is None:
        agent = Agent(id=uuid.uuid4(), org_id=et.org_id, name=name, first_seen=now)
        session.add(agent)
    # Re-enrolling an existing name rotates its token: a reinstalled VM keeps its history.
    agent.token_prefix = tok.prefix
    agent.token_hash = tok.token_hash
    agent.enrolled_with = et.id
    agent.agent_version = agent_version
    agent.mesh_address = mesh_address
    agent.last_seen = now
    for f in METADATA_FIELDS:
        setattr(agent, f, metadata.get(f, "") or "")
    await session.flush()
    await refresh_agent_pairs(session, agent.id, et.org_id)
    return agent, tok.token


async def update_self(session: AsyncSession, agent: Agent, agent_version: str | None,
                      mesh_address: str | None, metadata: dict[str, str] | None,
                      throughput_address: str | None = None) -> None:
    changed = {f: metadata[f] or "" for f in METADATA_FIELDS
               if metadata and f in metadata and getattr(agent, f) != (metadata[f] or "")}
    changed_topology = any(f in changed for f in ("provider", "region", "zone", "subnet"))
    if changed_topology:
        await lock_org_fleet(session, agent.org_id)
        current = await session.scalar(select(Agent.token_hash).where(Agent.id == agent.id))
        if current != agent.token_hash:
            raise AgentGone("unknown or rotated agent token")
    if agent_version is not None:
        agent.agent_version = agent_version
    if mesh_address is not None:
        agent.mesh_address = mesh_address
    if throughput_address is not None:
        agent.throughput_address = throughput_address
    for f, value in changed.items():
        setattr(agent, f, value)
    agent.last_seen = datetime.now(UTC)
    await session.flush()
    if changed_topology:
        await refresh_agent_pairs(session, agent.id, agent.org_id)


def default_groups(me: Agent, agents: list[Agent]) -> list[dict[str, Any]]:
    """Seed 003 §3 quorums: majority of my zone's agents, and majority across my region's
    zones (one agent per zone, me standing for mine)."""
    groups: list[dict[str, Any]] = []
    zone_members = sorted((a for a in agents if a.provider == me.provider
                           and a.region == me.region and a.zone == me.zone),
                          key=lambda a: a.name)
    if len(zone_members) >= 2:
        groups.append({"name": "zone-majority", "k": len(zone_members) // 2 + 1,
                       "members": [str(a.id) for a in zone_members]})
    by_zone: dict[str, Agent] = {}
    for a in sorted(agents, key=lambda a: a.name):
        if a.provider == me.provider and a.region == me.region and a.zone != me.zone:
            by_zone.setdefault(a.zone, a)
    if by_zone:
        members = [me, *by_zone.values()]
        groups.append({"name": "region-majority", "k": len(members) // 2 + 1,
                       "members": [str(a.id) for a in members]})
    return groups


async def _meshing_agents(session: AsyncSession, org_id: uuid.UUID) -> list[Agent]:
    rows = (await session.execute(select(Agent).where(Agent.org_id == org_id)
                                  .order_by(Agent.name))).scalars()
    return [a for a in rows if a.mesh_address]


async def quorum_groups(session: AsyncSession, agent: Agent) -> list[dict[str, Any]]:
    """The quorum groups the server hands `agent` in its config, members included."""
    return default_groups(agent, await _meshing_agents(session, agent.org_id))


async def build_config(session: AsyncSession, agent: Agent) -> dict[str, Any]:
    from stormwatch.services.paths.requests import pending_for
    from stormwatch.services.storage_targets import storage_targets_for_agent
    from stormwatch.services.throughput import store as throughput_store

    org = await session.get(Org, agent.org_id)
    assert org is not None
    mesh = {**DEFAULT_MESH_SETTINGS, **(org.mesh_settings or {})}
    meshing = await _meshing_agents(session, agent.org_id)
    peers = [{"agent_id": str(a.id), "name": a.name, "address": a.mesh_address,
              "provider": a.provider, "region": a.region, "zone": a.zone, "subnet": a.subnet}
             for a in meshing]
    content: dict[str, Any] = {
        "agent_id": str(agent.id),
        "config_poll_s": 30,
        "mesh": {**mesh, "peers": peers if mesh.get("enabled", True) else [],
                 "groups": default_groups(agent, meshing)},
        "storage": {"targets": await storage_targets_for_agent(session, agent)},
        "shipper": {"max_batch_samples": 20000, "max_batch_age_ms": 2000},
        "throughput": {"experiments": await throughput_store.config_entries(
            session, agent, datetime.now(UTC))},
        # Traces the server asks for (docs/paths.md): each goes once, then leaves the config.
        "paths": {"requests": await pending_for(session, agent.id)},
    }
    version = hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    return {"version": version, **content}

