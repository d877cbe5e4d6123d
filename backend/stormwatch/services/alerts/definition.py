"""A rule as the worker reads it: the one `Rule` type evaluation and delivery share, and its
one query. Evaluation runs on an async session and delivery on a sync connection, so the
query and the row mapping are one and each side executes them."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.alerts.metrics import METRICS, MetricKind, statistic_unit


@dataclass
class Rule:
    id: uuid.UUID
    org_id: uuid.UUID
    name: str
    severity: str
    description: str
    labels: dict[str, str]
    enabled: bool
    metric: str
    statistic: str
    scope: dict[str, Any]
    window_s: int
    condition: dict[str, Any]
    x: int
    y: int
    n: int
    m: int | None
    channel_ids: list[uuid.UUID]
    reminder_interval_s: int | None
    evaluated_until: datetime | None
    eval_version: int

    @property
    def kind(self) -> MetricKind:
        return METRICS[self.metric]

    @property
    def unit(self) -> str:
        return statistic_unit(self.metric, self.statistic)


COLUMNS = tuple(f.name for f in fields(Rule))


def rules_query(ids: Iterable[uuid.UUID] | None = None,
                org_ids: Iterable[uuid.UUID] | None = None,
                enabled_only: bool = False) -> tuple[TextClause, dict[str, Any]]:
    """The rules with these ids and/or of these orgs (all when neither), in id order."""
    where = ["enabled"] if enabled_only else []
    params: dict[str, Any] = {}
    if ids is not None:
        where.append("id = ANY(:ids)")
        params["ids"] = list(set(ids))
    if org_ids is not None:
        where.append("org_id = ANY(:orgs)")
        params["orgs"] = list(set(org_ids))
    sql = f"SELECT {', '.join(COLUMNS)} FROM alert_rules"
    return text(sql + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"), params


def from_row(r: Mapping[Any, Any]) -> Rule:
    return Rule(**{**r, "labels": dict(r["labels"]), "channel_ids": list(r["channel_ids"])})


async def load_rules(session: AsyncSession, ids: Iterable[uuid.UUID] | None = None,
                     org_ids: Iterable[uuid.UUID] | None = None,
                     enabled_only: bool = False) -> list[Rule]:
    sql, params = rules_query(ids, org_ids, enabled_only)
    return [from_row(r) for r in (await session.execute(sql, params)).mappings()]


def load_rules_by_id(conn: Connection, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Rule]:
    sql, params = rules_query(ids)
    return {r.id: r for r in map(from_row, conn.execute(sql, params).mappings())}
