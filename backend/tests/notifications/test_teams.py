"""Microsoft Teams through a local Workflows webhook trigger that checks the message envelope
and the Adaptive Card: title coloured by state, the rule's facts, a fact set per series, an
Action.OpenUrl; 429/5xx transient, other 4xx permanent."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.notifications.teams import TeamsChannel
from tests.notifications.conftest import Org
from tests.notifications.receivers import TeamsWorkflow
from tests.notifications.servers import HttpReceiver
from tests.notifications.test_email import message


def teams() -> tuple[HttpReceiver, TeamsWorkflow, str]:
    hook = HttpReceiver()
    hook.handle = flow = TeamsWorkflow()
    return hook, flow, (f"http://127.0.0.1:{hook.port}/workflows/abc/triggers/manual/paths/"
                        "invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sig=s3cr3t")


@pytest.mark.usefixtures("loopback_allowed")
def test_teams_gets_an_adaptive_card_with_facts_per_series_and_a_link() -> None:
    m = message()
    hook, flow, url = teams()
    with hook:
        assert asyncio.run(TeamsChannel(url).send(m, "msg_1")) == "HTTP 202"
        done = replace(m, kind="resolved", alerts=tuple(
            replace(a, state="resolved", resolved_at=datetime.now(UTC)) for a in m.alerts))
        asyncio.run(TeamsChannel(url).send(done, "msg_2"))
    assert "sig=s3cr3t" in hook.requests[0].path  # the query string is the credential
    firing, resolved = flow.cards
    title, desc, rule, series, facts = firing["body"]
    assert (title["text"], title["color"]) == ("[FIRING] critical: p99 eu-west -> us-east",
                                               "Attention")
    assert resolved["body"][0]["color"] == "Good"
    assert desc["text"] == "Tail above the timeout budget"
    assert {f["title"]: f["value"] for f in rule["facts"]} == {
        "Rule": "p99 eu-west -> us-east", "Severity": "critical",
        "Condition": "p99 of mesh_rtt over 30 s windows above 50"}
    assert series["text"] == "[eu-1 -> us-1](http://sw.example/pair?src=1&dst=2)"
    assert {f["title"]: f["value"] for f in facts["facts"]} == {
        "Value": "912.5 ms", "Threshold": "50 ms", "When": "since 2026-11-23 12:00:00 UTC"}
    assert firing["actions"] == [{"type": "Action.OpenUrl", "title": "Open in Stormwatch",
                                  "url": "http://sw.example/alerts?rule_id=r1"}]


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize(("status", "error"), [
    (400, PermanentError), (401, PermanentError), (404, PermanentError),
    (408, TransientError), (429, TransientError), (500, TransientError)])
def test_the_status_decides_permanent_or_transient(status: int,
                                                   error: type[Exception]) -> None:
    hook, _, url = teams()
    hook.default = (status, "no")
    with hook, pytest.raises(error):
        asyncio.run(TeamsChannel(url).send(message(), "msg_1"))


def test_a_test_send_posts_a_card_and_the_url_stays_secret(org: Org) -> None:
    hook, flow, url = teams()
    with hook:
        ch = org.post("/channels", {"name": "teams", "kind": "teams", "config": {"url": url}})
        assert ch["config"]["url_hint"] == f"http://127.0.0.1:{hook.port}/…"
        assert org.post(f"/channels/{ch['id']}/test", {}) == {
            "ok": True, "permanent": None, "detail": "HTTP 202"}
    assert "s3cr3t" not in org.api.get("/api/v1/channels", headers=org.headers).text
    [card] = flow.cards
    assert card["body"][0]["text"] == "[TEST] info: Test of channel teams"
    assert card["body"][0]["color"] == "Accent" and "actions" not in card
