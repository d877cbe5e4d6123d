"""Who may call what: every operation of the OpenAPI schema, called by each kind of caller,
answers as ACCESS says (docs/api.md, "Roles"). A route missing from ACCESS fails the test,
so each new route states its rule here."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from stormwatch.main import app
from tests.helpers import enroll

CALLERS = ("admin", "viewer", "api_key", "agent", "anonymous")

# Policies: which callers get past authentication and authorisation.
POLICIES: dict[str, frozenset[str]] = {
    "public": frozenset(CALLERS),                                  # no credential needed
    "signed_in": frozenset({"admin", "viewer", "api_key", "agent"}),  # any credential
    "read": frozenset({"admin", "viewer", "api_key"}),             # people and REST clients
    "manage": frozenset({"admin", "api_key"}),                     # the admin role
    "manage_in_person": frozenset({"admin"}),                      # grants access to others
    "agent": frozenset({"agent"}),                                 # the agent's own token
    "in_person": frozenset({"admin", "viewer"}),                   # a signed-in person
}

ACCESS: dict[tuple[str, str], str] = {
    ("GET", "/api/v1/health"): "public",
    ("POST", "/api/v1/auth/login"): "public",
    ("POST", "/api/v1/auth/logout"): "signed_in",
    ("GET", "/api/v1/auth/me"): "signed_in",
    ("POST", "/api/v1/auth/password"): "in_person",
    # The links sent by mail: the token in the body is the credential.
    ("POST", "/api/v1/auth/invitations/accept"): "public",
    ("POST", "/api/v1/auth/password-reset"): "public",
    ("POST", "/api/v1/auth/password-reset/confirm"): "public",
    # Single sign-on: the browser's round trip to the org's provider needs no credential.
    ("GET", "/api/v1/auth/oidc/start"): "public",
    ("GET", "/api/v1/auth/oidc/callback"): "public",
    ("POST", "/api/v1/agents/enroll"): "public",  # the enrollment token in the body
    ("GET", "/api/v1/agent/config"): "agent",
    ("PATCH", "/api/v1/agent/self"): "agent",
    ("POST", "/api/v1/ingest/batches"): "agent",
    ("GET", "/api/v1/agents"): "read",
    ("GET", "/api/v1/agents/pairs"): "read",
    ("GET", "/api/v1/agents/{agent_id}"): "read",
    ("DELETE", "/api/v1/agents/{agent_id}"): "manage",
    ("GET", "/api/v1/agents/{agent_id}/quorum-groups"): "read",
    ("GET", "/api/v1/org"): "read",
    ("PATCH", "/api/v1/org"): "manage",
    ("GET", "/api/v1/api-keys"): "read",
    ("POST", "/api/v1/api-keys"): "manage_in_person",
    ("DELETE", "/api/v1/api-keys/{key_id}"): "manage_in_person",
    ("GET", "/api/v1/enrollment-tokens"): "read",
    ("POST", "/api/v1/enrollment-tokens"): "manage",
    ("DELETE", "/api/v1/enrollment-tokens/{token_id}"): "manage",
    ("GET", "/api/v1/users"): "read",
    ("POST", "/api/v1/users"): "manage_in_person",
    ("DELETE", "/api/v1/users/{user_id}"): "manage_in_person",
    ("DELETE", "/api/v1/users/{user_id}/login-lock"): "manage",
    ("GET", "/api/v1/invitations"): "read",
    ("POST", "/api/v1/invitations"): "manage_in_person",
    ("DELETE", "/api/v1/invitations/{invitation_id}"): "manage_in_person",
    ("GET", "/api/v1/oidc-config"): "read",
    ("PUT", "/api/v1/oidc-config"): "manage_in_person",
    ("DELETE", "/api/v1/oidc-config"): "manage_in_person",
    ("GET", "/api/v1/storage-targets"): "read",
    ("POST", "/api/v1/storage-targets"): "manage",
    ("GET", "/api/v1/storage-targets/{target_id}"): "read",
    ("PATCH", "/api/v1/storage-targets/{target_id}"): "manage",
    ("DELETE", "/api/v1/storage-targets/{target_id}"): "manage",
    ("GET", "/api/v1/pricing"): "read",
    ("PUT", "/api/v1/pricing/{provider}/{region}/{item}"): "manage",
    ("DELETE", "/api/v1/pricing/{provider}/{region}/{item}"): "manage",
    # Advisors compute answers from the org's data and change nothing: readers may ask.
    ("POST", "/api/v1/advisors/compression"): "read",
    ("POST", "/api/v1/advisors/replication"): "read",
    ("POST", "/api/v1/advisors/placement"): "read",
    ("GET", "/api/v1/advisors/placement/{input_hash}"): "read",
    ("POST", "/api/v1/advisors/timeout"): "read",
    ("GET", "/api/v1/advisors/rankings"): "read",
    # Alerting: people and REST clients read rules, alerts, channels and the delivery log and
    # may backtest a draft (it changes nothing); only admins change them or send a test.
    ("GET", "/api/v1/alert-rules"): "read",
    ("GET", "/api/v1/alert-rules/metrics"): "read",
    ("GET", "/api/v1/vocabularies"): "read",
    ("POST", "/api/v1/alert-rules"): "manage",
    ("POST", "/api/v1/alert-rules/backtest"): "read",
    ("GET", "/api/v1/alert-rules/{rule_id}"): "read",
    ("PATCH", "/api/v1/alert-rules/{rule_id}"): "manage",
    ("DELETE", "/api/v1/alert-rules/{rule_id}"): "manage",
    ("GET", "/api/v1/alerts"): "read",
    ("GET", "/api/v1/alerts/{alert_id}"): "read",
    ("GET", "/api/v1/audit"): "manage",  # admins only: people and admin API keys
    ("GET", "/api/v1/channels"): "read",
    ("POST", "/api/v1/channels"): "manage",
    ("GET", "/api/v1/channels/{channel_id}"): "read",
    ("PATCH", "/api/v1/channels/{channel_id}"): "manage",
    ("DELETE", "/api/v1/channels/{channel_id}"): "manage",
    ("POST", "/api/v1/channels/{channel_id}/test"): "manage",
    ("GET", "/api/v1/channels/{channel_id}/deliveries"): "read",
    ("GET", "/api/v1/deliveries"): "read",
    ("GET", "/api/v1/silences"): "read",
    ("POST", "/api/v1/silences"): "manage",
    ("DELETE", "/api/v1/silences/{silence_id}"): "manage",
    ("GET", "/api/v1/maintenance-windows"): "read",
    ("POST", "/api/v1/maintenance-windows"): "manage",
    ("PATCH", "/api/v1/maintenance-windows/{window_id}"): "manage",
    ("DELETE", "/api/v1/maintenance-windows/{window_id}"): "manage",
    # Throughput: readers see settings, budget, experiments and analyses; admins change the
    # settings and schedule experiments.
    ("GET", "/api/v1/throughput/settings"): "read",
    ("PUT", "/api/v1/throughput/settings"): "manage",
    ("GET", "/api/v1/throughput/budget"): "read",
    ("GET", "/api/v1/throughput/experiments"): "read",
    ("POST", "/api/v1/throughput/experiments"): "manage",
    ("GET", "/api/v1/throughput/experiments/{experiment_id}"): "read",
    ("GET", "/api/v1/throughput/experiments/{experiment_id}/samples"): "read",
    ("GET", "/api/v1/throughput/pairs"): "read",
    ("GET", "/api/v1/throughput/az-pairs"): "read",
    ("GET", "/api/v1/throughput/degradations"): "read",
    **{("GET", f"/api/v1/analytics/{p}"): "read" for p in (
        "{kind}/summary", "{kind}/series", "{kind}/series.csv", "{kind}/distribution",
        "{kind}/boxplots", "{kind}/heatmap", "{kind}/level-shifts", "{kind}/cycles",
        "{kind}/asymmetry", "{kind}/welch", "{kind}/cv-rmse", "mesh/detours", "mesh/stretch",
        "mesh/loss-reasons",
        "quorum/compare", "storage/comparison", "storage/daily-medians",
        "storage/replication")},
    # The Prometheus scrape target reads like the analyses.
    ("GET", "/api/v1/export/prometheus"): "read",
    ("GET", "/api/v1/export/otlp"): "read",
    ("PUT", "/api/v1/export/otlp"): "manage",
    ("DELETE", "/api/v1/export/otlp"): "manage",
    ("POST", "/api/v1/export/otlp/test"): "manage",
    ("GET", "/api/v1/geography/places"): "read",
    ("PUT", "/api/v1/geography/places/{provider}/{region}"): "manage",
    ("DELETE", "/api/v1/geography/places/{provider}/{region}"): "manage",
    ("POST", "/api/v1/ingest/paths"): "agent",
    ("GET", "/api/v1/analytics/paths/traces"): "read",
    ("GET", "/api/v1/analytics/paths/current"): "read",
    ("GET", "/api/v1/analytics/paths/changes"): "read",
    ("GET", "/api/v1/analytics/paths/diff"): "read",
    ("POST", "/api/v1/analytics/paths/requests"): "manage",
}

DENIED = {401, 403}


def operations() -> list[tuple[str, str]]:
    schema = app.openapi()
    ops = [(method.upper(), path) for path, item in schema["paths"].items()
           for method in item if method in {"get", "post", "put", "patch", "delete"}]
    # Logging out ends the caller's session: last, so every other call still has one.
    return sorted(ops, key=lambda op: op == ("POST", "/api/v1/auth/logout"))


def test_every_operation_of_the_schema_is_in_the_access_table_and_no_other():
    ops = set(operations())
    assert not ops - ACCESS.keys(), f"add these operations to ACCESS: {sorted(ops - ACCESS.keys())}"
    assert not ACCESS.keys() - ops, f"no longer in the schema: {sorted(ACCESS.keys() - ops)}"
    assert set(ACCESS.values()) <= POLICIES.keys()


def concrete(path: str) -> str:
    """The path with a value for each parameter: a fresh id, or the first analysis kind."""
    params = app.openapi()["paths"][path]
    schemas = {p["name"]: p.get("schema", {}) for item in params.values()
               if isinstance(item, dict) for p in item.get("parameters", [])
               if p.get("in") == "path"}

    def value(m: re.Match[str]) -> str:
        schema = schemas.get(m.group(1), {})
        enum = schema.get("enum") or next((s.get("enum") for s in schema.get("anyOf", [])
                                           if s.get("enum")), None)
        if enum:
            return str(enum[0])
        return "mesh" if m.group(1) == "kind" else str(uuid.uuid4())
    return re.sub(r"\{(\w+)\}", value, path)


@dataclass
class Caller:
    headers: dict[str, str]
    cookies: dict[str, str]


@pytest.fixture
def callers(api_server, make_org) -> Iterator[dict[str, Caller]]:
    org = make_org()
    with api_server.client() as c:
        def login(email: str, password: str) -> Caller:
            # Each person from a browser of their own: a login ends the session it is sent with.
            with api_server.client() as browser:
                r = browser.post("/api/v1/auth/login",
                                 json={"email": email, "password": password})
            assert r.status_code == 200, r.text
            return Caller({"X-CSRF-Token": r.cookies["sw_csrf"]}, dict(r.cookies))

        admin = login(org.email, org.password)
        viewer_email = f"viewer-{uuid.uuid4().hex[:8]}@example.test"
        with api_server.client(headers=admin.headers, cookies=admin.cookies) as ac:
            r = ac.post("/api/v1/users", json={"email": viewer_email,
                                               "password": "a viewer's long password",
                                               "role": "viewer"})
        assert r.status_code == 201, r.text
        agent = enroll(c, org.enrollment_token, "role-table-agent")
        yield {"admin": admin, "viewer": login(viewer_email, "a viewer's long password"),
               "api_key": Caller({"Authorization": f"Bearer {org.api_key}"}, {}),
               "agent": Caller(agent.headers, {}), "anonymous": Caller({}, {})}


def test_each_caller_gets_exactly_the_access_the_table_gives_on_every_operation(
        api_server, callers):
    wrong = []
    for name in CALLERS:
        caller = callers[name]
        with api_server.client(headers=caller.headers, cookies=caller.cookies) as c:
            for method, path in operations():
                allowed = POLICIES[ACCESS[(method, path)]]
                url = concrete(path)
                # Invalid on purpose: a permitted caller gets a 4xx and changes nothing.
                body = {} if method in {"POST", "PUT", "PATCH"} else None
                r = c.request(method, url, json=body)
                # Health answers 503 while the worker is not running: documented, not a fault.
                assert r.status_code < 500 or (path, r.status_code) == (
                    "/api/v1/health", 503), (method, url, name, r.status_code, r.text)
                if (name in allowed) == (r.status_code in DENIED):
                    wrong.append(f"{method} {path} as {name}: {r.status_code} "
                                 f"({'allowed' if name in allowed else 'denied'} by the table)")
    assert not wrong, "\n".join(wrong)


def test_a_viewer_cannot_create_keys_or_admins_change_retention_or_delete_agents(
        api_server, callers, make_org):
    viewer = callers["viewer"]
    with api_server.client(headers=viewer.headers, cookies=viewer.cookies) as c:
        assert c.post("/api/v1/api-keys", json={"name": "mine"}).status_code == 403
        r = c.post("/api/v1/users", json={"email": "root@example.test",
                                          "password": "a very long password", "role": "admin"})
        assert r.status_code == 403
        assert c.patch("/api/v1/org", json={"raw_retention_days": 1}).status_code == 403
        agents = c.get("/api/v1/agents").json()
        assert agents and c.delete(f"/api/v1/agents/{agents[0]['id']}").status_code == 403
        assert len(c.get("/api/v1/agents").json()) == len(agents)
        assert c.get("/api/v1/org").json()["raw_retention_days"] != 1
        assert all(u["email"] != "root@example.test" for u in c.get("/api/v1/users").json())


def test_who_am_i_names_the_role_the_ui_offers_changes_by(api_server, callers):
    want = {"admin": "admin", "viewer": "viewer", "api_key": "admin", "agent": "viewer"}
    for name, role in want.items():
        caller = callers[name]
        with api_server.client(headers=caller.headers, cookies=caller.cookies) as c:
            r = c.get("/api/v1/auth/me")
            assert r.status_code == 200, (name, r.text)
            assert r.json()["role"] == role, (name, r.json())
