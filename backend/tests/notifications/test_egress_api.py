"""The egress policy over the REST API and the outbox, on the default policy: every address an
org can make the server connect to (webhook and Slack URLs, the SMTP host, storage endpoints)
is refused when it is loopback, private, link-local or the cloud metadata address, in any
spelling; a refused address is a 422 naming the field at save time, and a permanent failure
at send time that fetches nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from stormwatch.core.config import Settings, get_settings
from stormwatch.core.db import get_sync_engine
from stormwatch.devtools.bootstrap import OrgCredentials
from stormwatch.services.notify import dispatch
from tests.conftest import ApiServer, Services
from tests.notifications.conftest import Org, add_rule, deliveries, fire
from tests.notifications.servers import HttpReceiver, SmtpServer

# Each spelling a client library or the resolver would take to a refused address.
REFUSED_HOSTS = [
    "127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.5.4", "192.168.0.10", "100.64.0.1",
    "169.254.169.254", "0.0.0.0", "224.0.0.251", "2130706433", "0x7f.1", "017700000001",
    "0x7f000001", "localhost", "[::1]", "[::]", "[::ffff:127.0.0.1]",
    "[::ffff:169.254.169.254]", "[::ffff:10.0.0.1]", "[fd00:ec2::254]", "[fe80::1]",
    "[fc00::5]", "[ff02::1]", "[64:ff9b::a9fe:a9fe]",
]


@pytest.fixture(scope="module")
def strict_server(services: Services) -> Iterator[ApiServer]:
    """An API on the default policy (the shared test API opens loopback for the receivers)."""
    server = ApiServer(services, {"EGRESS_ALLOW": ""})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def strict(strict_server: ApiServer, make_org: Callable[..., OrgCredentials]) -> Iterator[Org]:
    with strict_server.client() as client:
        yield Org(make_org(), client)


@pytest.fixture
def strict_settings(services: Services, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The worker's settings on the test database and the default policy."""
    monkeypatch.delenv("EGRESS_ALLOW", raising=False)
    get_settings.cache_clear()
    get_sync_engine.cache_clear()
    s = get_settings()
    monkeypatch.setattr(s, "public_base_url", "https://sw.example")
    yield s
    get_sync_engine().dispose()
    get_sync_engine.cache_clear()
    get_settings.cache_clear()


def post(org: Org, path: str, body: Any) -> httpx.Response:
    return org.api.post(f"/api/v1{path}", json=body, headers=org.headers)


def bare(host: str) -> str:
    return host.strip("[]")


EMAIL = {"port": 25, "security": "none", "from_address": "alerts@example.com",
         "to_addresses": ["oncall@example.com"]}


def channel_bodies(host: str, port: int) -> list[tuple[dict[str, Any], list[Any]]]:
    return [
        ({"name": "hook", "kind": "webhook",
          "config": {"url": f"http://{host}:{port}/hook"}}, ["body", "config", "url"]),
        ({"name": "slack", "kind": "slack",
          "config": {"url": f"http://{host}:{port}/services/T/B/x"}}, ["body", "config", "url"]),
        ({"name": "mail", "kind": "email", "config": {**EMAIL, "host": bare(host), "port": port}},
         ["body", "config", "host"]),
    ]


def refused_locs(r: httpx.Response) -> list[list[Any]]:
    assert r.status_code == 422, r.text
    return [[p for p in e["loc"] if p not in ("webhook", "slack", "email")]
            for e in r.json()["detail"]]


@pytest.mark.parametrize("host", REFUSED_HOSTS)
def test_saving_a_refused_address_is_a_422_naming_the_field(strict: Org, host: str) -> None:
    with HttpReceiver() as receiver:
        port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
        for body, loc in channel_bodies(host, port):
            r = post(strict, "/channels", body)
            assert loc in refused_locs(r), (host, body["kind"], r.text)
            assert "egress" in r.text.lower() or "refused" in r.text.lower(), r.text
        target = {"name": "s3", "provider": "s3", "bucket": "b", "credentials": {"source": "none"},
                  "endpoint": f"http://{host}:{port}"}
        r = post(strict, "/storage-targets", target)
        assert ["body", "endpoint"] in refused_locs(r), (host, r.text)
        # A stored channel cannot be pointed there either.
        ok = post(strict, "/channels", {"name": f"ok-{uuid.uuid4().hex[:6]}", "kind": "webhook",
                                        "config": {"url": "https://hooks.example.com/x"}})
        assert ok.status_code == 201, ok.text
        r = strict.api.patch(f"/api/v1/channels/{ok.json()['id']}", headers=strict.headers,
                             json={"config": {"url": f"http://{host}:{port}/hook"}})
        assert ["body", "config", "url"] in refused_locs(r)
        t = post(strict, "/storage-targets", {**target, "endpoint": "https://s3.example.com"})
        assert t.status_code == 201, t.text
        r = strict.api.patch(f"/api/v1/storage-targets/{t.json()['id']}", headers=strict.headers,
                             json={"endpoint": f"https://{host}:{port}"})
        assert ["body", "endpoint"] in refused_locs(r)
    assert receiver.requests == []


LOOPBACK_SPELLINGS = ["127.0.0.1", "localhost", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]"]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_a_test_send_to_a_stored_loopback_channel_is_refused_and_fetches_nothing(
        org: Org, strict: Org, strict_server: ApiServer, host: str) -> None:
    """Channels stored where loopback was open (`org`'s API), sent where it is not."""
    with HttpReceiver() as hook, SmtpServer(None, "none") as smtp:
        hook.default = (200, "secret-internal-document")
        port = int(hook.url.rsplit(":", 1)[1].split("/")[0])
        ids = []
        for body, _ in channel_bodies(host, port):
            if body["kind"] == "email":
                body["config"]["port"] = smtp.port
            ids.append(post(org, "/channels", body).json()["id"])
        with strict_server.client() as api:
            for cid in ids:
                r = api.post(f"/api/v1/channels/{cid}/test", headers=org.headers)
                assert r.status_code == 200, r.text
                res = r.json()
                assert res["ok"] is False and res["permanent"] is True, (host, res)
                assert "refused" in res["detail"], res
                assert "secret-internal-document" not in res["detail"]
    assert hook.requests == [] and smtp.sink.messages == []


def test_the_outbox_fails_a_delivery_to_a_loopback_channel_permanently_without_sending(
        strict_settings: Settings, org: Org, db: Engine) -> None:
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        fire(db, org.id, rule, "eu-1 -> us-1")
        engine = get_sync_engine()
        with engine.begin() as conn:
            dispatch.plan(conn)
        assert dispatch.deliver_due(engine, budget_s=30) == {"failed": 1}
    [d] = deliveries(db, rule)
    assert (d["state"], d["attempts"]) == ("failed", 1)
    assert "refused" in d["last_error"]
    assert hook.requests == []


def test_a_test_send_reports_the_status_not_the_body(org: Org) -> None:
    with HttpReceiver() as hook:
        hook.default = (500, "root:x:0:0:root:/root:/bin/bash")
        ch = post(org, "/channels", {"name": "hook", "kind": "webhook",
                                     "config": {"url": hook.url}}).json()
        res = post(org, f"/channels/{ch['id']}/test", {}).json()
    assert res["ok"] is False and res["permanent"] is False
    assert res["detail"].startswith("HTTP 500")
    assert "root" not in res["detail"]
