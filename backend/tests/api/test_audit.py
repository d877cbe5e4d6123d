"""The audit log: every change to an org's configuration leaves one entry naming who, when,
what and how (secrets masked); admins read it, nobody else; old entries are pruned."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.core.config import get_settings
from stormwatch.core.db import get_sync_engine
from tests.alert_helpers import make_agents
from tests.conftest import ApiServer, Services

PASSWORD = "correct horse battery staple"
MASK = "••••"
EMAIL_CHANNEL = {"host": "smtp.example.com", "port": 587, "security": "starttls",
                 "username": "sw", "password": "hunter2-smtp",
                 "from_address": "alerts@example.com", "to_addresses": ["oncall@example.com"]}


class Org:
    def __init__(self, creds: Any, server: ApiServer) -> None:
        self.creds = creds
        self.key = {"Authorization": f"Bearer {creds.api_key}"}
        self.api = server.client()
        self.person = server.client()
        r = self.person.post("/api/v1/auth/login",
                             json={"email": creds.email, "password": creds.password})
        assert r.status_code == 200, r.text
        self.csrf = {"X-CSRF-Token": self.person.cookies["sw_csrf"]}
        self.key_label = self.api.get("/api/v1/api-keys", headers=self.key).json()[0]["name"]

    def close(self) -> None:
        self.api.close()
        self.person.close()


@pytest.fixture
def org(make_org: Callable[..., Any], api_server: ApiServer) -> Iterator[Org]:
    made = Org(make_org(), api_server)
    yield made
    made.close()


def entries(org: Org, **params: str) -> list[dict[str, Any]]:
    r = org.api.get("/api/v1/audit", headers=org.key, params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def only_entry(org: Org, action: str, target_id: str, by: str) -> dict[str, Any]:
    """The one entry of `action` on `target_id`, made by `by` ("user" or "api_key")."""
    found = entries(org, action=action, target_id=str(target_id))
    assert len(found) == 1, found
    entry = found[0]
    assert entry["actor_kind"] == by
    label = org.creds.email if by == "user" else org.key_label
    assert label in entry["actor_label"]
    at = datetime.fromisoformat(entry["at"])
    assert abs(datetime.now(UTC) - at) < timedelta(hours=1)
    assert entry["target_type"] == action.split(".")[0]
    return entry


def ok(r: httpx.Response, code: int = 200) -> Any:
    assert r.status_code == code, r.text
    return r.json() if r.content else None


def test_each_change_leaves_one_entry_with_actor_time_and_masked_diff(
        org: Org, db: Engine) -> None:
    a, b = make_agents(db, org.creds.org_id, [
        {"name": "a", "region": "us-east-1", "zone": "us-east-1a"},
        {"name": "b", "region": "eu-west-1", "zone": "eu-west-1a"}])
    api, key, person, csrf = org.api, org.key, org.person, org.csrf

    # Alert rules, by API key and by a person.
    rule = ok(api.post("/api/v1/alert-rules", headers=key, json={
        "name": "p99 a→b", "severity": "critical", "metric": "mesh_rtt", "statistic": "p99",
        "window_s": 30, "condition": {"type": "above", "value": 20000},
        "scope": {"src": [str(a)], "dst": [str(b)]}}), 201)
    created = only_entry(org, "alert_rule.create", rule["id"], "api_key")
    assert created["changes"]["name"] == [None, "p99 a→b"]
    assert created["target_label"] == "p99 a→b"
    ok(person.patch(f"/api/v1/alert-rules/{rule['id']}", headers=csrf,
                    json={"severity": "warning"}))
    changed = only_entry(org, "alert_rule.update", rule["id"], "user")
    assert changed["changes"] == {"severity": ["critical", "warning"]}
    ok(api.delete(f"/api/v1/alert-rules/{rule['id']}", headers=key), 204)
    deleted = only_entry(org, "alert_rule.delete", rule["id"], "api_key")
    assert deleted["changes"]["name"] == ["p99 a→b", None]

    # Channels: the password and URL are masked, before and after.
    channel = ok(api.post("/api/v1/channels", headers=key, json={
        "name": "mail", "kind": "email", "config": EMAIL_CHANNEL}), 201)
    created = only_entry(org, "channel.create", channel["id"], "api_key")
    assert created["changes"]["password"] == [None, MASK]
    ok(api.patch(f"/api/v1/channels/{channel['id']}", headers=key,
                 json={"name": "mail 2", "config": {"password": "new-smtp-secret"}}))
    changed = only_entry(org, "channel.update", channel["id"], "api_key")
    assert changed["changes"]["name"] == ["mail", "mail 2"]
    assert changed["changes"]["password"] == [MASK, MASK]
    ok(api.delete(f"/api/v1/channels/{channel['id']}", headers=key), 204)
    only_entry(org, "channel.delete", channel["id"], "api_key")

    # Silences and maintenance windows.
    silence = ok(api.post("/api/v1/silences", headers=key, json={
        "rule_ids": [], "matchers": [{"label": "team", "value": "net"}],
        "comment": "link under repair",
        "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}), 201)
    created = only_entry(org, "silence.create", silence["id"], "api_key")
    assert created["changes"]["comment"] == [None, "link under repair"]
    ok(person.delete(f"/api/v1/silences/{silence['id']}", headers=csrf))
    expired = only_entry(org, "silence.expire", silence["id"], "user")
    assert "ends_at" in expired["changes"]
    window = ok(api.post("/api/v1/maintenance-windows", headers=key, json={
        "name": "upgrade", "matchers": [{"label": "team", "value": "net"}],
        "starts_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
        "ends_at": (datetime.now(UTC) + timedelta(hours=2)).isoformat()}), 201)
    only_entry(org, "maintenance_window.create", window["id"], "api_key")
    ok(api.patch(f"/api/v1/maintenance-windows/{window['id']}", headers=key,
                 json={"name": "upgrade b"}))
    changed = only_entry(org, "maintenance_window.update", window["id"], "api_key")
    assert changed["changes"] == {"name": ["upgrade", "upgrade b"]}
    ok(api.delete(f"/api/v1/maintenance-windows/{window['id']}", headers=key), 204)
    only_entry(org, "maintenance_window.delete", window["id"], "api_key")

    # API keys and enrollment tokens: their values never appear.
    new_key = ok(person.post("/api/v1/api-keys", headers=csrf, json={"name": "ci"}), 201)
    created = only_entry(org, "api_key.create", new_key["id"], "user")
    assert created["changes"]["key"] == [None, MASK]
    ok(person.delete(f"/api/v1/api-keys/{new_key['id']}", headers=csrf), 204)
    only_entry(org, "api_key.revoke", new_key["id"], "user")
    token = ok(api.post("/api/v1/enrollment-tokens", headers=key, json={"name": "rack 4"}), 201)
    created = only_entry(org, "enrollment_token.create", token["id"], "api_key")
    assert created["changes"]["token"] == [None, MASK]
    ok(api.delete(f"/api/v1/enrollment-tokens/{token['id']}", headers=key), 204)
    only_entry(org, "enrollment_token.revoke", token["id"], "api_key")

    # Users and roles, and lifting a login lock; the password never appears.
    user = ok(person.post("/api/v1/users", headers=csrf, json={
        "email": f"v-{uuid.uuid4().hex[:8]}@example.test", "password": "viewer-pass-123456",
        "role": "viewer"}), 201)
    created = only_entry(org, "user.create", user["id"], "user")
    assert created["changes"]["role"] == [None, "viewer"]
    assert "password" not in created["changes"]
    ok(api.delete(f"/api/v1/users/{user['id']}/login-lock", headers=key), 204)
    only_entry(org, "user.login_lock_lift", user["id"], "api_key")
    ok(person.delete(f"/api/v1/users/{user['id']}", headers=csrf), 204)
    deleted = only_entry(org, "user.delete", user["id"], "user")
    assert deleted["target_label"] == user["email"]

    # Org settings.
    ok(api.patch("/api/v1/org", headers=key, json={"raw_retention_days": 21}))
    changed = only_entry(org, "org.update", org.creds.org_id, "api_key")
    assert changed["changes"] == {"raw_retention_days": [14, 21]}

    # Throughput settings.
    ok(api.put("/api/v1/throughput/settings", headers=key, json={
        "enabled": True, "monthly_budget_bytes": 10**12, "default_duration_s": 20,
        "default_proto": "tcp", "experiments_per_pair_per_day": 4}))
    changed = only_entry(org, "throughput_settings.update", org.creds.org_id, "api_key")
    assert changed["changes"]["monthly_budget_bytes"][1] == 10**12

    # Storage targets and prices.
    target = ok(api.post("/api/v1/storage-targets", headers=key, json={
        "name": "bucket", "provider": "s3", "region": "us-east-1", "bucket": "audit-probe",
        "credentials": {"source": "none"}}), 201)
    only_entry(org, "storage_target.create", target["id"], "api_key")
    ok(api.patch(f"/api/v1/storage-targets/{target['id']}", headers=key,
                 json={"name": "bucket 2"}))
    changed = only_entry(org, "storage_target.update", target["id"], "api_key")
    assert changed["changes"]["name"] == ["bucket", "bucket 2"]
    ok(api.delete(f"/api/v1/storage-targets/{target['id']}", headers=key), 204)
    only_entry(org, "storage_target.delete", target["id"], "api_key")
    price = "aws/us-east-1/put_per_1k"
    ok(api.put(f"/api/v1/pricing/{price}", headers=key, json={"price_usd": 1, "source": "x"}))
    created = only_entry(org, "price.create", price, "api_key")
    assert created["changes"]["price_usd"] == [None, 1.0]
    ok(api.put(f"/api/v1/pricing/{price}", headers=key, json={"price_usd": 2, "source": "x"}))
    changed = only_entry(org, "price.update", price, "api_key")
    assert changed["changes"]["price_usd"] == [1.0, 2.0]
    ok(person.delete(f"/api/v1/pricing/{price}", headers=csrf), 204)
    only_entry(org, "price.delete", price, "user")

    # No secret anywhere in the log; filters and pages work on the same entries.
    everything = api.get("/api/v1/audit", headers=key, params={"limit": 500}).text
    for secret in ("hunter2-smtp", "new-smtp-secret", new_key["key"], token["token"],
                   "viewer-pass-123456", org.creds.api_key):
        assert secret not in everything
    by_person = entries(org, actor=org.creds.email)
    assert by_person and {e["actor_kind"] for e in by_person} == {"user"}
    assert {e["target_type"] for e in entries(org, target_type="channel")} == {"channel"}
    first = ok(api.get("/api/v1/audit", headers=key, params={"limit": 3}))
    second = ok(api.get("/api/v1/audit", headers=key,
                        params={"limit": 3, "cursor": first["next_cursor"]}))
    assert [e["at"] for e in first["items"]] == sorted(
        (e["at"] for e in first["items"]), reverse=True)
    assert first["items"][-1]["at"] >= second["items"][0]["at"]
    assert not {e["id"] for e in first["items"]} & {e["id"] for e in second["items"]}
    r = api.get("/api/v1/audit", headers=key, params={"cursor": "nonsense"})
    assert r.status_code == 422 and "cursor" in r.text


def test_a_refused_change_leaves_no_entry(org: Org) -> None:
    api, key, person, csrf = org.api, org.key, org.person, org.csrf
    email = f"dup-{uuid.uuid4().hex[:8]}@example.test"
    ok(person.post("/api/v1/users", headers=csrf, json={
        "email": email, "password": "viewer-pass-123456", "role": "viewer"}), 201)
    r = person.post("/api/v1/users", headers=csrf, json={
        "email": email, "password": "viewer-pass-123456", "role": "viewer"})
    assert r.status_code == 409, r.text
    assert len(entries(org, action="user.create")) == 1
    me = next(u for u in ok(api.get("/api/v1/users", headers=key))
              if u["email"] == org.creds.email)
    assert person.delete(f"/api/v1/users/{me['id']}", headers=csrf).status_code == 409
    r = api.patch("/api/v1/org", headers=key, json={"raw_retention_days": -3})
    assert r.status_code == 422, r.text
    r = api.put("/api/v1/pricing/aws/nowhere-9/put_per_1k", headers=key,
                json={"price_usd": 1, "source": "x"})
    assert r.status_code == 422, r.text
    assert [e["action"] for e in entries(org)] == ["user.create"]


def test_only_admins_read_the_log_and_only_their_own_org(
        org: Org, make_org: Callable[..., Any], api_server: ApiServer) -> None:
    ok(org.api.post("/api/v1/enrollment-tokens", headers=org.key, json={"name": "x"}), 201)
    email = f"viewer-{uuid.uuid4().hex[:8]}@example.test"
    ok(org.person.post("/api/v1/users", headers=org.csrf, json={
        "email": email, "password": PASSWORD, "role": "viewer"}), 201)
    with api_server.client() as viewer:
        ok(viewer.post("/api/v1/auth/login", json={"email": email, "password": PASSWORD}))
        r = viewer.get("/api/v1/audit")
        assert r.status_code == 403 and "admin" in r.text
    assert org.person.get("/api/v1/audit").status_code == 200
    other = Org(make_org(), api_server)
    try:
        theirs = entries(other)
        assert not {e["id"] for e in theirs} & {e["id"] for e in entries(org)}
        assert all(e["actor_label"] != org.creds.email for e in theirs)
        assert len(entries(org)) == 2
    finally:
        other.close()


@pytest.fixture
def rollup_tasks(services: Services) -> Iterator[Any]:
    get_settings.cache_clear()
    get_sync_engine.cache_clear()
    from stormwatch.worker.tasks import rollups
    yield rollups
    get_sync_engine().dispose()
    get_sync_engine.cache_clear()


def test_retention_prunes_old_entries_and_is_safe_to_run_twice(
        org: Org, db: Engine, rollup_tasks: Any) -> None:
    ok(org.api.post("/api/v1/enrollment-tokens", headers=org.key, json={"name": "x"}), 201)
    days = get_settings().audit_retention_days
    with db.begin() as conn:
        conn.execute(text(
            "INSERT INTO audit_events (id, org_id, at, actor_kind, actor_label, action, "
            "target_type) VALUES (:id, :org, now() - make_interval(days => :d), 'user', "
            "'old@example.test', 'org.update', 'org')"),
            {"id": uuid.uuid4(), "org": org.creds.org_id, "d": days + 1})
    assert len(entries(org)) == 2
    removed = rollup_tasks.apply_rollup_retention.apply().get()
    assert removed["audit_events"] >= 1
    assert [e["action"] for e in entries(org)] == ["enrollment_token.create"]
    assert rollup_tasks.apply_rollup_retention.apply().get()["audit_events"] == 0
    assert [e["action"] for e in entries(org)] == ["enrollment_token.create"]
