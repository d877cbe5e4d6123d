"""Opsgenie's Alert API against a local endpoint that checks the GenieKey header and each
request's documented fields: one alert per Stormwatch alert under an alias from its id, the
same alias on a retry, a reminder and the close that ends it."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from stormwatch.core.config import Settings
from stormwatch.core.db import get_sync_engine
from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.notifications.opsgenie import OpsgenieChannel
from stormwatch.services.notify import dispatch
from tests.notifications.conftest import Org, add_rule, deliveries, fire, resolve
from tests.notifications.receivers import OpsgenieAlerts
from tests.notifications.servers import HttpReceiver, wait_until
from tests.notifications.test_dispatch import run_dispatch
from tests.notifications.test_email import message

KEY = "eb243592-faa2-4ba2-a551q-1afdf565c889"


def opsgenie() -> tuple[HttpReceiver, OpsgenieAlerts]:
    hook = HttpReceiver()
    hook.handle = genie = OpsgenieAlerts(KEY)
    return hook, genie


def base(hook: HttpReceiver) -> str:
    return f"http://127.0.0.1:{hook.port}"


@pytest.mark.usefixtures("loopback_allowed")
def test_each_alert_is_created_under_its_alias_and_closed_by_it() -> None:
    long_name = replace(message(), rule_name="p99 " + "very " * 40 + "long",
                        labels={"team": "net"})
    fired = replace(long_name, alerts=(replace(long_name.alerts[0],
                                               labels={"src_region": "eu-west-1"}),))
    hook, genie = opsgenie()
    with hook:
        ch = OpsgenieChannel(KEY, base(hook), {"critical": "P2"}, ("network",))
        assert asyncio.run(ch.send(fired, "msg_1")) == "HTTP 202"
        [made] = genie.creates
        assert made["alias"] == "stormwatch-alert-a1"
        assert made["message"].startswith("[critical] p99 very") and len(made["message"]) == 130
        assert made["priority"] == "P2"
        assert made["tags"] == ["stormwatch", "critical", "network"]
        assert made["entity"] == "eu-1 -> us-1" and made["source"] == "Stormwatch"
        assert "value 912.5 ms vs threshold 50 ms" in made["description"]
        assert "Open in Stormwatch: http://sw.example/pair?src=1&dst=2" in made["description"]
        assert made["details"]["label_team"] == "net"
        assert made["details"]["label_src_region"] == "eu-west-1"
        assert made["details"]["link"] == "http://sw.example/pair?src=1&dst=2"

        asyncio.run(ch.send(replace(fired, kind="reminder"), "msg_2"))
        done = replace(fired, kind="resolved", alerts=tuple(
            replace(a, state="resolved", resolved_at=datetime.now(UTC)) for a in fired.alerts))
        asyncio.run(ch.send(done, "msg_3"))
    assert [c[0] for c in genie.closes] == ["stormwatch-alert-a1"]
    assert genie.closes[0][1] == {"source": "Stormwatch", "note": "Resolved in Stormwatch"}
    assert [(a.alias, a.count, a.open, a.priority) for a in genie.alerts] == [
        ("stormwatch-alert-a1", 2, False, "P2")]


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize(("status", "error"), [
    (401, PermanentError), (403, PermanentError), (422, PermanentError),
    (429, TransientError), (500, TransientError), (503, TransientError)])
def test_the_status_decides_permanent_or_transient(status: int,
                                                   error: type[Exception]) -> None:
    hook, _ = opsgenie()
    hook.default = (status, '{"message": "no"}')
    with hook, pytest.raises(error):
        asyncio.run(OpsgenieChannel(KEY, base(hook)).send(message(), "msg_1"))


@pytest.mark.usefixtures("loopback_allowed")
def test_a_wrong_key_is_permanent() -> None:
    hook, genie = opsgenie()
    with hook, pytest.raises(PermanentError, match="HTTP 401"):
        asyncio.run(OpsgenieChannel("revoked", base(hook)).send(message(), "msg_1"))
    assert genie.alerts == []


def test_a_retried_delivery_and_the_resolution_keep_one_alert(
        settings: Settings, org: Org, db: Engine) -> None:
    hook, genie = opsgenie()
    with hook:
        ch = org.post("/channels", {"name": "genie", "kind": "opsgenie", "config": {
            "api_key": KEY, "api_url": base(hook), "tags": ["net"]}})
        assert ch["config"]["has_api_key"] is True and KEY not in str(ch)
        hook.script = [(503, "busy")]
        rule = add_rule(db, org.id, [uuid.UUID(ch["id"])], severity="warning")
        alert = fire(db, org.id, rule, "eu-1 -> us-1")
        assert run_dispatch().get("retry") == 1
        wait_until("the retry", 10,
                   lambda: dispatch.deliver_due(get_sync_engine()).get("sent") == 1)
        resolve(db, alert)
        assert run_dispatch().get("sent") == 1
    assert len(hook.requests) == 3  # the refused create, its retry, the close
    assert hook.requests[0].body == hook.requests[1].body
    assert [c["alias"] for c in genie.creates] == [f"stormwatch-alert-{alert}"]
    assert [c[0] for c in genie.closes] == [f"stormwatch-alert-{alert}"]
    assert [(a.count, a.open, a.priority) for a in genie.alerts] == [(1, False, "P3")]
    assert [d["state"] for d in deliveries(db, rule)] == ["sent", "sent"]


def test_a_test_send_creates_and_closes_an_alert(org: Org) -> None:
    hook, genie = opsgenie()
    with hook:
        ch = org.post("/channels", {"name": "genie", "kind": "opsgenie", "config": {
            "api_key": KEY, "api_url": base(hook)}})
        assert org.post(f"/channels/{ch['id']}/test", {}) == {
            "ok": True, "permanent": None, "detail": "HTTP 202"}
    [alert] = genie.alerts
    assert not alert.open and alert.priority == "P5"


def test_bad_opsgenie_config_is_a_422_naming_the_field(org: Org) -> None:
    r = org.api.post("/api/v1/channels", json={"name": "g", "kind": "opsgenie", "config": {
        "api_key": KEY, "priority_map": {"warning": "P9"}}}, headers=org.headers)
    assert r.status_code == 422
    assert ["body", "opsgenie", "config", "priority_map", "warning"] in [
        e["loc"] for e in r.json()["detail"]]
    # A control character in a tag (the fuzzer's NUL once reached PostgreSQL: a 500).
    r = org.api.post("/api/v1/channels", json={"name": "g", "kind": "opsgenie", "config": {
        "api_key": KEY, "tags": ["ok", "bad\u0000tag"]}}, headers=org.headers)
    assert r.status_code == 422, r.text
    assert ["body", "opsgenie", "config", "tags", 1] in [e["loc"] for e in r.json()["detail"]]
