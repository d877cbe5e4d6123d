"""Channels, silences, maintenance windows and the delivery log over the REST API: 422s
naming the field, write-only secrets, test sends answering the server's own words, viewers
read only, and another org sees and changes nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from stormwatch.devtools.bootstrap import OrgCredentials
from stormwatch.services import accounts
from tests.alert_helpers import sessionmaker_for
from tests.conftest import ApiServer, Services
from tests.notifications.conftest import Org
from tests.notifications.servers import HttpReceiver, SmtpServer, make_tls

EMAIL = {"host": "smtp.example.com", "port": 587, "security": "starttls", "username": "sw",
         "password": "hunter2-smtp", "from_address": "alerts@example.com",
         "to_addresses": ["oncall@example.com"]}


def post(org: Org, path: str, body: Any) -> httpx.Response:
    return org.api.post(f"/api/v1{path}", json=body, headers=org.headers)


def locs(r: httpx.Response) -> list[list[Any]]:
    assert r.status_code == 422, r.text
    return [e["loc"] for e in r.json()["detail"]]


def test_bad_channel_config_is_a_422_naming_the_field(org: Org) -> None:
    bad_host = post(org, "/channels", {"name": "m", "kind": "email",
                                       "config": {**EMAIL, "host": "smtp example..com"}})
    assert ["body", "email", "config", "host"] in locs(bad_host)
    bad_url = post(org, "/channels", {"name": "w", "kind": "webhook",
                                      "config": {"url": "ftp://nowhere"}})
    assert ["body", "webhook", "config", "url"] in locs(bad_url)
    missing = post(org, "/channels", {"name": "s", "kind": "slack", "config": {}})
    assert ["body", "slack", "config", "url"] in locs(missing)
    no_to = post(org, "/channels", {"name": "m", "kind": "email",
                                    "config": {**EMAIL, "to_addresses": []}})
    assert ["body", "email", "config", "to_addresses"] in locs(no_to)
    bad_port = post(org, "/channels", {"name": "m", "kind": "email",
                                       "config": {**EMAIL, "port": 70000}})
    assert ["body", "email", "config", "port"] in locs(bad_port)


def test_a_ca_certificate_that_is_not_ascii_pem_is_a_422_not_a_server_error(org: Org) -> None:
    # Found by the fuzzer: ssl raises TypeError (not SSLError) for non-ASCII text.
    r = post(org, "/channels", {"name": "k", "kind": "slack",
                                "config": {"ca_cert_pem": "\u00a6\u00d6M\"",
                                           "url": "https://hooks.example.com/x"}})
    assert ["body", "slack", "config", "ca_cert_pem"] in locs(r)


def test_secrets_go_in_and_never_come_out(org: Org, services: Services) -> None:
    slack_url = "https://hooks.slack.com/services/T000/B000/sekrit-token"
    mail = post(org, "/channels", {"name": "mail", "kind": "email", "config": EMAIL}).json()
    slack = post(org, "/channels", {"name": "slack", "kind": "slack",
                                    "config": {"url": slack_url}}).json()
    hook = post(org, "/channels", {"name": "hook", "kind": "webhook",
                                   "config": {"url": "https://example.com/hook"}})
    assert hook.status_code == 201
    secret = hook.json()["signing_secret"]
    assert secret.startswith("whsec_")
    assert mail["config"]["has_password"] is True and mail["signing_secret"] is None
    assert slack["config"]["url_hint"] == "https://hooks.slack.com/…"
    listing = org.api.get("/api/v1/channels", headers=org.headers).text
    one = org.api.get(f"/api/v1/channels/{hook.json()['id']}", headers=org.headers).text
    for text in (listing, one, str(mail), str(slack)):
        assert "hunter2-smtp" not in text and "sekrit-token" not in text and secret not in text
    # Editing other fields keeps the password; the database holds it encrypted only.
    r = org.api.patch(f"/api/v1/channels/{mail['id']}", json={"config": {"port": 2525}},
                      headers=org.headers)
    assert r.status_code == 200 and r.json()["config"]["port"] == 2525
    assert r.json()["config"]["has_password"] is True
    bad = org.api.patch(f"/api/v1/channels/{mail['id']}", json={"config": {"host": "a b"}},
                        headers=org.headers)
    assert ["body", "config", "host"] in locs(bad)
    rotated = org.api.patch(f"/api/v1/channels/{hook.json()['id']}",
                            json={"rotate_signing_secret": True}, headers=org.headers).json()
    assert rotated["signing_secret"].startswith("whsec_") and rotated["signing_secret"] != secret
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 port={services.pg.port} user=stormwatch "
                         "dbname=stormwatch") as conn:
        dump = str(conn.execute("SELECT config, secret_ciphertext FROM notification_channels "
                                "WHERE org_id = %s", (org.id,)).fetchall())
    assert "hunter2-smtp" not in dump and "sekrit-token" not in dump and secret not in dump


def test_a_test_send_answers_the_servers_reply_verbatim(org: Org) -> None:
    tls = make_tls()
    with SmtpServer(tls, "starttls", users={"sw": "right"}) as smtp, HttpReceiver() as slack:
        mail = post(org, "/channels", {"name": "mail", "kind": "email", "config": {
            **EMAIL, "host": "localhost", "port": smtp.port, "password": "wrong",
            "ca_cert_pem": tls.ca_pem}}).json()
        r = post(org, f"/channels/{mail['id']}/test", {})
        assert r.status_code == 200
        assert r.json()["ok"] is False and r.json()["permanent"] is True
        assert r.json()["detail"].startswith("535 ")
        org.api.patch(f"/api/v1/channels/{mail['id']}",
                      json={"config": {"password": "right"}}, headers=org.headers)
        ok = post(org, f"/channels/{mail['id']}/test", {}).json()
        assert ok["ok"] is True and "queued as TEST123" in ok["detail"]
        assert len(smtp.sink.messages) == 1
        assert smtp.sink.messages[0]["Subject"] == "[TEST] info: Test of channel mail"

        slack.default = (404, "no_service")
        ch = post(org, "/channels", {"name": "slack", "kind": "slack",
                                     "config": {"url": slack.url}}).json()
        res = post(org, f"/channels/{ch['id']}/test", {}).json()
        assert res == {"ok": False, "permanent": True, "detail": "HTTP 404: no_service"}


def test_silence_and_window_input_errors_name_the_field(org: Org) -> None:
    empty = post(org, "/silences", {"ends_at": "2030-01-01T00:00:00Z", "comment": "x"})
    assert ["body"] in locs(empty)
    unknown = post(org, "/silences", {"rule_ids": [str(uuid.uuid4())],
                                      "ends_at": "2030-01-01T00:00:00Z", "comment": "x"})
    assert ["body", "rule_ids", 0] in locs(unknown)
    regex = post(org, "/silences", {"matchers": [{"label": "a", "op": "=~", "value": "("}],
                                    "ends_at": "2030-01-01T00:00:00Z", "comment": "x"})
    assert ["body", "matchers", 0] in locs(regex)
    no_why = post(org, "/silences", {"matchers": [{"label": "a", "value": "b"}],
                                     "ends_at": "2030-01-01T00:00:00Z", "comment": ""})
    assert ["body", "comment"] in locs(no_why)
    base = {"name": "w", "starts_at": "2026-11-01T02:00:00", "duration_s": 3600,
            "matchers": [{"label": "a", "value": "b"}]}
    tz = post(org, "/maintenance-windows", {**base, "timezone": "Mars/Olympus"})
    assert ["body", "timezone"] in locs(tz)
    rr = post(org, "/maintenance-windows", {**base, "rrule": "FREQ=SOMETIMES"})
    assert ["body", "rrule"] in locs(rr)
    ok = post(org, "/maintenance-windows", {**base, "timezone": "Europe/Paris",
                                            "rrule": "FREQ=WEEKLY;BYDAY=SU"})
    assert ok.status_code == 201, ok.text
    # 02:00 in Paris on 1 November (CET, UTC+1) is stored as 01:00 UTC.
    assert ok.json()["starts_at"].startswith("2026-11-01T01:00:00")


def test_viewers_read_and_other_orgs_see_nothing(
        org: Org, api_server: ApiServer, services: Services,
        make_org: Callable[..., OrgCredentials]) -> None:
    ch = post(org, "/channels", {"name": "hook", "kind": "webhook",
                                 "config": {"url": "https://example.com/h"}}).json()
    sil = post(org, "/silences", {"matchers": [{"label": "a", "value": "b"}],
                                  "ends_at": "2030-01-01T00:00:00Z", "comment": "x"}).json()
    win = post(org, "/maintenance-windows", {
        "name": "w", "starts_at": "2030-01-01T00:00:00Z", "duration_s": 600,
        "matchers": [{"label": "a", "value": "b"}]}).json()
    email = f"viewer-{uuid.uuid4().hex[:8]}@example.test"

    async def make_viewer() -> None:
        async with sessionmaker_for(services.database_url)() as s:
            await accounts.create_user(s, org.id, email, "viewer pass 1", role="viewer")
            await s.commit()

    asyncio.run(make_viewer())
    with api_server.client() as c:
        r = c.post("/api/v1/auth/login", json={"email": email, "password": "viewer pass 1"})
        h = {"X-CSRF-Token": r.json()["csrf_token"]}
        for path in ("/channels", f"/channels/{ch['id']}", f"/channels/{ch['id']}/deliveries",
                     "/deliveries", "/silences", "/maintenance-windows"):
            assert c.get(f"/api/v1{path}").status_code == 200, path
        writes = [("post", "/channels", {"name": "x", "kind": "webhook",
                                         "config": {"url": "https://e.com"}}),
                  ("patch", f"/channels/{ch['id']}", {"name": "y"}),
                  ("delete", f"/channels/{ch['id']}", None),
                  ("post", f"/channels/{ch['id']}/test", {}),
                  ("post", "/silences", {"matchers": [{"label": "a", "value": "b"}],
                                         "ends_at": "2030-01-01T00:00:00Z", "comment": "x"}),
                  ("delete", f"/silences/{sil['id']}", None),
                  ("post", "/maintenance-windows", {"name": "w", "duration_s": 600,
                                                    "starts_at": "2030-01-01T00:00:00Z",
                                                    "matchers": [{"label": "a", "value": "b"}]}),
                  ("patch", f"/maintenance-windows/{win['id']}", {"name": "z"}),
                  ("delete", f"/maintenance-windows/{win['id']}", None)]
        for method, path, body in writes:
            kw = {"json": body} if body is not None else {}
            assert c.request(method, f"/api/v1{path}", headers=h, **kw).status_code == 403, path

    other = Org(make_org(), org.api)
    for path in ("/channels", "/silences", "/maintenance-windows", "/deliveries"):
        assert other.api.get(f"/api/v1{path}", headers=other.headers).json() == [], path
    for method, path, body in writes:
        if path in ("/channels", "/silences", "/maintenance-windows"):
            continue
        kw = {"json": body} if body is not None else {}
        r = other.api.request(method, f"/api/v1{path}", headers=other.headers, **kw)
        assert r.status_code == 404, (path, r.status_code)
    r = other.api.get(f"/api/v1/channels/{ch['id']}/deliveries", headers=other.headers)
    assert r.status_code == 404
