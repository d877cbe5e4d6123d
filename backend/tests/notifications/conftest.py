"""Fixtures for delivery tests: the worker's settings and engine on the test database, an
org with an admin API key, rules and alert events written as evaluation writes them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import Engine, text

from stormwatch.core.config import Settings, get_settings
from stormwatch.core.db import get_sync_engine
from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import LOOPBACK_ALLOWED, Services


@pytest.fixture
def settings(services: Services, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The process's settings on the test database, with retries fast enough to watch."""
    get_settings.cache_clear()
    get_sync_engine.cache_clear()
    s = get_settings()
    assert s.database_url == services.database_url
    monkeypatch.setattr(s, "notify_retry_base_s", 0.2)
    monkeypatch.setattr(s, "public_base_url", "https://sw.example")
    monkeypatch.setattr(s, "egress_allow", LOOPBACK_ALLOWED)  # the receivers are local
    yield s
    get_sync_engine().dispose()
    get_sync_engine.cache_clear()


@pytest.fixture
def loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's egress policy opened for loopback, for channels aimed at local servers."""
    get_settings.cache_clear()
    monkeypatch.setattr(get_settings(), "egress_allow", LOOPBACK_ALLOWED)
    yield
    get_settings.cache_clear()


@dataclass
class Org:
    creds: OrgCredentials
    api: httpx.Client

    @property
    def id(self) -> uuid.UUID:
        return uuid.UUID(self.creds.org_id)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.creds.api_key}"}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.api.post(f"/api/v1{path}", json=body, headers=self.headers)
        assert r.status_code in (200, 201), r.text
        out: dict[str, Any] = r.json()
        return out

    def webhook(self, url: str, name: str = "hook") -> tuple[uuid.UUID, str]:
        ch = self.post("/channels", {"name": name, "kind": "webhook", "config": {"url": url}})
        return uuid.UUID(ch["id"]), ch["signing_secret"]


@pytest.fixture
def org(make_org: Callable[..., OrgCredentials], api: httpx.Client) -> Org:
    return Org(make_org(), api)


def add_rule(db: Engine, org_id: uuid.UUID, channel_ids: list[uuid.UUID], name: str = "p99 high",
             labels: dict[str, str] | None = None, reminder_interval_s: int | None = None,
             severity: str = "critical") -> uuid.UUID:
    rid = uuid.uuid4()
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO alert_rules (id, org_id, name, severity, labels, metric, statistic, "
            "window_s, condition, channel_ids, reminder_interval_s) VALUES (:id, :org, :name, "
            ":sev, CAST(:labels AS jsonb), 'mesh_rtt', 'p99', 30, "
            "CAST(:cond AS jsonb), :ch, :rem)"),
            {"id": rid, "org": org_id, "name": name, "sev": severity,
             "labels": orjson.dumps(labels or {}).decode(),
             "cond": orjson.dumps({"type": "above", "value": 50}).decode(), "ch": channel_ids,
             "rem": reminder_interval_s})
    return rid


def evidence(series: str, value: float) -> dict[str, Any]:
    return {"series_name": series, "value": value, "threshold": 50.0, "unit": "ms",
            "dashboard_path": f"/pair?src={series}"}


def fire(db: Engine, org_id: uuid.UUID, rule_id: uuid.UUID, series: str,
         value: float = 900.0, at: datetime | None = None,
         ev_doc: dict[str, Any] | None = None) -> uuid.UUID:
    """An alert opened and its firing event, in one transaction as evaluation writes them
    (with `ev_doc` as its evidence, or a flat one of `series` and `value`)."""
    aid = uuid.uuid4()
    at = at or datetime.now(UTC)
    ev = orjson.dumps(ev_doc or evidence(series, value)).decode()
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO alerts (id, org_id, rule_id, group_key, state, started_at, evidence) "
            "VALUES (:id, :org, :rule, :key, 'firing', :at, CAST(:ev AS jsonb))"),
            {"id": aid, "org": org_id, "rule": rule_id, "key": series, "at": at, "ev": ev})
        c.execute(text(
            "INSERT INTO alert_events (id, org_id, rule_id, alert_id, kind, at, evidence) "
            "VALUES (gen_random_uuid(), :org, :rule, :id, 'firing', :at, CAST(:ev AS jsonb))"),
            {"id": aid, "org": org_id, "rule": rule_id, "at": at, "ev": ev})
    return aid


def resolve(db: Engine, alert_id: uuid.UUID) -> None:
    with db.begin() as c:
        c.execute(text(
            "UPDATE alerts SET state = 'resolved', resolved_at = now(), version = version + 1 "
            "WHERE id = :id"), {"id": alert_id})
        c.execute(text(
            "INSERT INTO alert_events (id, org_id, rule_id, alert_id, kind, at, evidence) "
            "SELECT gen_random_uuid(), org_id, rule_id, id, 'resolved', now(), evidence "
            "FROM alerts WHERE id = :id"), {"id": alert_id})


def deliveries(db: Engine, rule_id: uuid.UUID) -> list[dict[str, Any]]:
    with db.connect() as c:
        return [dict(r) for r in c.execute(text(
            "SELECT d.*, n.kind AS nkind, n.alert_ids FROM notification_deliveries d "
            "JOIN notifications n ON n.id = d.notification_id WHERE n.rule_id = :r "
            "ORDER BY d.created_at"), {"r": rule_id}).mappings()]


def outcomes(db: Engine, rule_id: uuid.UUID) -> list[str]:
    with db.connect() as c:
        return list(c.execute(text(
            "SELECT d.outcome FROM alert_event_dispatches d JOIN alert_events e "
            "ON e.id = d.event_id WHERE e.rule_id = :r ORDER BY e.created_at"),
            {"r": rule_id}).scalars())
