"""The fleet and the filters of an analysis query: the kinds of series and their columns,
the caller's filters (range, agents, places, topology classes, kind-specific columns), the
org's agents with their places and pair topology, and the SQL conditions (with an estimate
of the series they select) that _restrict a read to the filters. Every other analytics
module reads through `where_clauses`, and so do alerts' scopes and backtests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models.agent import TOPOLOGY_CLASSES
from stormwatch.services.analytics.zones import first_zone_problem, zone_key

Kind = Literal["mesh", "quorum", "storage", "throughput"]
Resolution = Literal["auto", "raw", "1m", "5m", "1h", "1d"]


class QueryError(ValueError):
    """Bad query parameters (reported as 422 naming the parameter)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class KindSpec:
    raw_table: str
    table: str
    keys: tuple[str, ...]
    value_prefix: str
    raw_value: str
    raw_failure: str
    pair: bool  # series are (src, dst) pairs of agents
    key_types: tuple[str, ...]  # SQL types of `keys`, for array parameters


KIND_SPECS: dict[str, KindSpec] = {
    "mesh": KindSpec("mesh_samples", "mesh_rollups", ("src_agent_id", "dst_agent_id",
                     "payload_bytes"), "rtt_us", "CASE WHEN status = 0 THEN rtt_us END",
                     "status <> 0", True, ("uuid", "uuid", "integer")),
    "quorum": KindSpec("quorum_samples", "quorum_rollups", ("agent_id", "group_name", "k", "n"),
                       "latency_us", "CASE WHEN status = 0 THEN latency_us END", "status <> 0",
                       False, ("uuid", "varchar", "smallint", "smallint")),
    "storage": KindSpec("storage_samples", "storage_rollups",
                        ("agent_id", "target_id", "op", "variant", "content", "size_bytes",
                         "copies", "concurrency"), "latency_us",
                        "CASE WHEN status = 0 THEN latency_us END", "status <> 0", False,
                        ("uuid", "uuid", "varchar", "varchar", "varchar", "bigint", "smallint",
                         "smallint")),
    "throughput": KindSpec("throughput_samples", "throughput_rollups",
                           ("src_agent_id", "dst_agent_id", "proto", "direction"), "bytes_per_s",
                           "bytes_per_s", "false", True, ("uuid", "uuid", "varchar", "varchar")),
}
# Query parameter names of the kind-specific columns, for error messages.
PARAM_OF_COLUMN = {"target_id": "target"}


@dataclass
class Filters:
    start: datetime
    end: datetime
    agents: list[uuid.UUID] | None = None  # every agent of the series must be one of these
    src: list[uuid.UUID] | None = None
    dst: list[uuid.UUID] | None = None
    regions: list[str] | None = None
    zones: list[str] | None = None
    providers: list[str] | None = None
    topology_class: list[str] | None = None
    payload_bytes: list[int] | None = None
    # kind-specific equality filters, e.g. {"op": ["put"], "size_bytes": [1024]}
    extra: dict[str, list[Any]] = field(default_factory=dict)
    resolution: Resolution = "auto"
    adjusted: bool = False  # storage: RTT-adjusted latency

    def validate(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise QueryError("start", "start and end must carry a UTC offset")
        if self.end <= self.start:
            raise QueryError("end", "end must be after start")


@dataclass
class AgentInfo:
    id: uuid.UUID
    name: str
    provider: str
    region: str
    zone: str


@dataclass
class Fleet:
    agents: dict[uuid.UUID, AgentInfo]
    topology: dict[tuple[uuid.UUID, uuid.UUID], str]
    raw_retention_days: int | None = None  # the org's; raw samples older are deleted
    # Rollup levels still filling their history (services/rollups.py fill_level_history):
    # "kind:bucket_s" -> the first bucket start from which the level is complete.
    filling: dict[str, datetime] = field(default_factory=dict)
    # Agents the org deleted whose samples were kept: named "<name> (deleted)", never by id.
    deleted: dict[uuid.UUID, AgentInfo] = field(default_factory=dict)

    def complete_from(self, kind: str) -> dict[int, datetime]:
        """bucket_s -> start of the complete part, for the kind's levels still filling."""
        out = {}
        for key, t in self.filling.items():
            k, _, bucket_s = key.partition(":")
            if k == kind and bucket_s.isdigit():
                out[int(bucket_s)] = t
        return out

    def level_of(self, agent: uuid.UUID, level: str) -> str:
        a = self.agents.get(agent)
        if a is None:
            a = self.deleted.get(agent)
            if a is None:
                return str(agent)
            if level == "node":
                return f"{a.name} (deleted)"
        if level == "node":
            return a.name
        if level == "zone":
            return zone_key(a.provider, a.region, a.zone)
        if level == "region":
            return a.region or "?"
        if level == "provider":
            return a.provider or "?"
        raise QueryError("level", f"unknown level {level!r}")

    def topology_of(self, src: uuid.UUID, dst: uuid.UUID) -> str:
        if src == dst:
            return "self"
        return self.topology.get((src, dst), "unknown")


async def load_fleet(session: AsyncSession, org_id: uuid.UUID) -> Fleet:
    rows = (await session.execute(
        text("SELECT id, name, provider, region, zone FROM agents WHERE org_id = :o"),
        {"o": org_id})).all()
    agents = {r.id: AgentInfo(r.id, r.name, r.provider, r.region, r.zone) for r in rows}
    topo = {(r.src_agent_id, r.dst_agent_id): r.topology_class for r in (await session.execute(
        text("SELECT src_agent_id, dst_agent_id, topology_class FROM agent_pairs "
             "WHERE org_id = :o"), {"o": org_id})).all()}
    org = (await session.execute(text(
        "SELECT raw_retention_days, ARRAY(SELECT kind FROM rollup_watermarks WHERE kind LIKE "
        ":fill ORDER BY kind), ARRAY(SELECT rolled_until FROM rollup_watermarks WHERE kind "
        "LIKE :fill ORDER BY kind) FROM orgs WHERE id = :o"),
        {"o": org_id, "fill": "%:fill"})).one_or_none()
    deleted = {r.id: AgentInfo(r.id, r.name, r.provider, r.region, r.zone)
               for r in (await session.execute(text(
                   "SELECT id, name, provider, region, zone FROM deleted_agents "
                   "WHERE org_id = :o"), {"o": org_id})).all()}
    if org is None:
        return Fleet(agents, topo, deleted=deleted)
    filling = {k.removesuffix(":fill"): t for k, t in zip(org[1], org[2], strict=True)}
    return Fleet(agents, topo, org[0], filling, deleted)


def _selected_agents(fleet: Fleet, f: Filters) -> set[uuid.UUID] | None:
    """Agents allowed by the metadata filters (None: no restriction)."""
    if not (f.agents or f.regions or f.zones or f.providers):
        return None
    out = set()
    # Deleted agents whose samples were kept still match the place they measured from.
    known = [*fleet.agents.values(), *fleet.deleted.values()]
    if f.zones:
        problem = first_zone_problem(
            f.zones, {zone_key(a.provider, a.region, a.zone) for a in known})
        if problem is not None:
            raise QueryError("zones", problem)
    for a in known:
        if f.agents and a.id not in f.agents:
            continue
        if f.regions and a.region not in f.regions:
            continue
        if f.zones and zone_key(a.provider, a.region, a.zone) not in f.zones:
            continue
        if f.providers and a.provider not in f.providers:
            continue
        out.add(a.id)
    return out


def _restrict(allowed: set[uuid.UUID] | None, ids: list[uuid.UUID] | None
              ) -> set[uuid.UUID] | None:
    if ids is None:
        return allowed
    return set(ids) if allowed is None else set(ids) & allowed


def where_clauses(spec: KindSpec, fleet: Fleet, f: Filters, params: dict[str, Any]
           ) -> tuple[list[str], int]:
    """SQL conditions for the filters, and an estimate of how many series they select."""
    _check_applicable(spec, f)
    clauses: list[str] = []
    n_agents = max(len(fleet.agents), 1)
    n_series = n_agents
    allowed = _selected_agents(fleet, f)
    if spec.pair:
        srcs = _restrict(allowed, f.src)
        dsts = _restrict(allowed, f.dst)
        n_series = (n_agents if srcs is None else len(srcs)) * (
            n_agents if dsts is None else len(dsts))
        if srcs is not None:
            clauses.append("src_agent_id = ANY(:srcs)")
            params["srcs"] = list(srcs)
        if dsts is not None:
            clauses.append("dst_agent_id = ANY(:dsts)")
            params["dsts"] = list(dsts)
        if f.topology_class:
            pairs = [(s, d) for s in fleet.agents for d in fleet.agents
                     if fleet.topology_of(s, d) in f.topology_class]
            params["tc_src"] = [p[0] for p in pairs]
            params["tc_dst"] = [p[1] for p in pairs]
            clauses.append("(src_agent_id, dst_agent_id) IN (SELECT * FROM unnest("
                           "CAST(:tc_src AS uuid[]), CAST(:tc_dst AS uuid[])))")
            n_series = min(n_series, len(pairs))
    else:
        agents = allowed
        if f.src is not None:
            agents = set(f.src) if agents is None else agents & set(f.src)
        if agents is not None:
            clauses.append("agent_id = ANY(:agents)")
            params["agents"] = list(agents)
            n_series = len(agents)
        # several series per agent (groups, targets x ops x sizes)
        n_series *= 4 if kind_is_quorum(spec) else 24
    if f.payload_bytes and "payload_bytes" in spec.keys:
        clauses.append("payload_bytes = ANY(:payload)")
        params["payload"] = f.payload_bytes
    for i, (col, vals) in enumerate(sorted(f.extra.items())):
        if col not in spec.keys:
            name = PARAM_OF_COLUMN.get(col, col)
            raise QueryError(name, f"{name} does not apply to this kind of series")
        clauses.append(f"{col} = ANY(:x{i})")
        params[f"x{i}"] = vals
    return clauses, n_series


def _check_applicable(spec: KindSpec, f: Filters) -> None:
    """A filter that cannot select anything of this kind is a mistake, not an empty answer."""
    if not spec.pair:
        if f.dst:
            raise QueryError("dst", "dst applies to pair series (mesh, throughput); use src "
                             "for the agent of quorum and storage series")
        if f.topology_class:
            raise QueryError("topology_class",
                             "topology_class applies to pair series (mesh, throughput) only")
    if f.payload_bytes and "payload_bytes" not in spec.keys:
        raise QueryError("payload_bytes", "payload_bytes applies to mesh series only")
    unknown = sorted(set(f.topology_class or ()) - set(TOPOLOGY_CLASSES))
    if unknown:
        raise QueryError("topology_class", f"unknown topology class {unknown[0]!r}; one of "
                         + ", ".join(TOPOLOGY_CLASSES))


def kind_is_quorum(spec: KindSpec) -> bool:
    return spec.raw_table == "quorum_samples"


async def target_providers(session: AsyncSession, org_id: uuid.UUID) -> dict[uuid.UUID, str]:
    """Provider of each storage target, when targets are configured as a resource."""
    exists = (await session.execute(text(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'storage_targets' "
        "AND column_name IN ('provider', 'org_id')"))).scalar()
    if exists != 2:
        return {}
    rows = (await session.execute(text(
        "SELECT id, provider FROM storage_targets WHERE org_id = :o"), {"o": org_id})).all()
    return {r[0]: r[1] for r in rows}
