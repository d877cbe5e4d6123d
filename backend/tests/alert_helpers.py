"""Building blocks for alert tests: a fleet written straight to the database, samples with
chosen values per window, rules, and an evaluation clock."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Engine, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool

from stormwatch.services.alerts.evaluate import evaluate_cycle

WINDOW_S = 30
RATE_HZ = 10


def sessionmaker_for(database_url: str) -> async_sessionmaker[AsyncSession]:
    engine = create_async_engine(database_url, poolclass=NullPool)
    return async_sessionmaker(engine, expire_on_commit=False)


def aligned_now(window_s: int = WINDOW_S) -> datetime:
    """A window boundary a little in the past, so every window before it is complete."""
    t = int(datetime.now(UTC).timestamp()) // window_s * window_s - 4 * window_s
    return datetime.fromtimestamp(t, UTC)


def make_agents(db: Engine, org_id: str, specs: Sequence[dict[str, str]]) -> list[uuid.UUID]:
    """Agents with metadata, and the topology class of every ordered pair."""
    ids = [uuid.uuid4() for _ in specs]
    with db.begin() as c:
        for a, s in zip(ids, specs, strict=True):
            c.execute(text(
                "INSERT INTO agents (id, org_id, name, provider, region, zone, token_prefix, "
                "token_hash, last_seen) VALUES (:id, :o, :n, :p, :r, :z, 'x', :h, :ls)"),
                {"id": a, "o": org_id, "n": s["name"], "p": s.get("provider", "aws"),
                 "r": s.get("region", "us-east-1"), "z": s.get("zone", "us-east-1a"),
                 "h": uuid.uuid4().hex + uuid.uuid4().hex, "ls": s.get("last_seen")})
        for i, a in enumerate(ids):
            for j, b in enumerate(ids):
                if i == j:
                    continue
                tc = ("cross_region" if specs[i].get("region") != specs[j].get("region")
                      else "cross_az" if specs[i].get("zone") != specs[j].get("zone")
                      else "same_subnet")
                c.execute(text("INSERT INTO agent_pairs (org_id, src_agent_id, dst_agent_id, "
                               "topology_class) VALUES (:o, :s, :d, :t)"),
                          {"o": org_id, "s": a, "d": b, "t": tc})
    return ids


def insert_mesh(db: Engine, org_id: str, src: uuid.UUID, dst: uuid.UUID, start: datetime,
                per_window: Sequence[float], window_s: int = WINDOW_S, rate_hz: int = RATE_HZ,
                spike_share: Sequence[float] | None = None, spike_us: float = 50_000.0,
                loss_share: Sequence[float] | None = None, seed: int = 0) -> None:
    """Mesh samples at rate_hz: each window's RTTs around its level (per_window, us) with a
    share of them at spike_us (a tail spike) and a share lost."""
    rng = np.random.default_rng(seed)
    n = window_s * rate_hz
    rows: list[dict[str, Any]] = []
    t0 = start.timestamp()
    for w, level in enumerate(per_window):
        v = level + rng.normal(0, level * 0.03, n)
        if spike_share is not None and spike_share[w] > 0:
            k = int(round(n * spike_share[w]))
            v[rng.choice(n, k, replace=False)] = spike_us
        lost = np.zeros(n, dtype=bool)
        if loss_share is not None and loss_share[w] > 0:
            lost[rng.choice(n, int(round(n * loss_share[w])), replace=False)] = True
        for i in range(n):
            rows.append({"t": datetime.fromtimestamp(t0 + w * window_s + i / rate_hz, UTC),
                         "o": org_id, "s": src, "d": dst, "r": w * n + i,
                         "v": None if lost[i] else int(max(v[i], 1)),
                         "st": 1 if lost[i] else 0})
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO mesh_samples (time, org_id, src_agent_id, dst_agent_id, round, "
            "payload_bytes, rtt_us, status) VALUES (:t, :o, :s, :d, :r, 1024, :v, :st)"), rows)


def insert_rule(db: Engine, org_id: str, **kw: Any) -> uuid.UUID:
    rid = uuid.uuid4()
    row = {"metric": "mesh_rtt", "statistic": "p99", "scope": {}, "window_s": WINDOW_S,
           "condition": {"type": "above", "value": 10_000}, "x": 1, "y": 1, "n": 1,
           "m": None, "severity": "warning", "name": "rule", "labels": {}, **kw}
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO alert_rules (id, org_id, name, severity, labels, metric, statistic, "
            "scope, window_s, condition, x, y, n, m) VALUES (:id, :o, :name, :severity, "
            "CAST(:labels AS jsonb), :metric, :statistic, CAST(:scope AS jsonb), :window_s, "
            "CAST(:condition AS jsonb), :x, :y, :n, :m)"),
            {**row, "id": rid, "o": org_id, "labels": json.dumps(row["labels"]),
             "scope": json.dumps(row["scope"]), "condition": json.dumps(row["condition"])})
    return rid


def alerts_of(db: Engine, rule_id: uuid.UUID) -> list[Any]:
    with db.connect() as c:
        return list(c.execute(text(
            "SELECT id, group_key, state, started_at, resolved_at, evidence, version "
            "FROM alerts WHERE rule_id = :r ORDER BY started_at, group_key"),
            {"r": rule_id}).all())


def events_of(db: Engine, rule_id: uuid.UUID) -> list[Any]:
    with db.connect() as c:
        return list(c.execute(text(
            "SELECT alert_id, kind, at, evidence FROM alert_events WHERE rule_id = :r "
            "ORDER BY at, kind"), {"r": rule_id}).all())


def at(start: datetime, windows: int, window_s: int = WINDOW_S) -> datetime:
    """The evaluation time at which `windows` windows after `start` are complete."""
    return start + timedelta(seconds=windows * window_s + 6)


async def evaluate_windows(sm: async_sessionmaker[AsyncSession], rule_id: uuid.UUID,
                           start: datetime, first: int, last: int,
                           window_s: int = WINDOW_S) -> None:
    """Evaluate the rule at the end of windows first..last after start, as the beat would."""
    for i in range(first, last + 1):
        await evaluate_cycle(sm, now=at(start, i, window_s), rule_ids=[rule_id])


def insert_quorum(db: Engine, org_id: str, agent: uuid.UUID, group: str, start: datetime,
                  per_window_fail: Sequence[float], window_s: int = WINDOW_S,
                  rate_hz: int = 5, latency_us: float = 2_000.0) -> None:
    """Quorum samples (Q2/3) with the given share of failed rounds per window."""
    n = window_s * rate_hz
    rows = []
    for w, share in enumerate(per_window_fail):
        k_fail = int(round(n * share))
        for i in range(n):
            failed = i < k_fail
            rows.append({"t": start + timedelta(seconds=w * window_s + i / rate_hz),
                         "o": org_id, "a": agent, "g": group, "r": w * n + i,
                         "v": None if failed else int(latency_us + (i % 7) * 10),
                         "st": 1 if failed else 0})
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO quorum_samples (time, org_id, agent_id, group_name, round, k, n, "
            "latency_us, status) VALUES (:t, :o, :a, :g, :r, 2, 3, :v, :st)"), rows)


def insert_storage(db: Engine, org_id: str, agent: uuid.UUID, target: uuid.UUID, op: str,
                   start: datetime, per_window_fail: Sequence[int], window_s: int = 60,
                   every_s: int = 10) -> None:
    """Storage operations every `every_s`; the first per_window_fail[w] of each window fail."""
    per = window_s // every_s
    rows = []
    for w, k_fail in enumerate(per_window_fail):
        for i in range(per):
            failed = i < k_fail
            rows.append({"t": start + timedelta(seconds=w * window_s + i * every_s),
                         "o": org_id, "a": agent, "tg": target, "op": op,
                         "v": None if failed else 80_000 + i * 100, "st": 3 if failed else 0,
                         "err": "server_error" if failed else None})
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO storage_samples (time, org_id, agent_id, target_id, op, variant, "
            "content, size_bytes, stored_bytes, copies, concurrency, attempt, latency_us, "
            "rtt_us, status, error_class) VALUES (:t, :o, :a, :tg, :op, 'plain', 'binary', "
            "1024, 1024, 1, 1, 1, :v, 20000, :st, :err)"), rows)


def set_last_seen(db: Engine, agent: uuid.UUID, when: datetime) -> None:
    with db.begin() as c:
        c.execute(text("UPDATE agents SET last_seen = :t WHERE id = :a"), {"t": when, "a": agent})
