"""Alerting end to end on the real stack: the API (uvicorn), a Celery worker and beat, a
real SMTP server (aiosmtpd, STARTTLS + AUTH), a local HTTP server standing in for Slack's
webhook URL, and a webhook receiver that verifies the Standard Webhooks signature.

Three agents stream mesh samples through the ingest API. Three p99 rules watch three pairs,
each notifying all three channels; one rule is silenced, one is inside a maintenance window.
A p99 spike injected on all three pairs at once must bring exactly one firing message per
channel within 60 s of the spike's first sample, from the unmuted rule only, then exactly one
resolved message per channel after recovery; the muted rules fire (their alerts exist) and
send nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from celery import Celery
from sqlalchemy import Engine, text

from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import LOOPBACK_ALLOWED, REPO, ApiServer, Services
from tests.helpers import EnrolledAgent, enroll, post_batch, stop_group
from tests.notifications.conftest import add_rule, deliveries, fire
from tests.notifications.servers import HttpReceiver, SmtpServer, make_tls, wait_until

RATE_HZ = 10
NORMAL_US = 400
SPIKE_US = 80_000  # 80 ms against a 20 ms p99 threshold
SPIKE_S = 6  # 60 of a window's 300 samples: the window's p99 is the spike's level
PUBLIC_URL = "https://stormwatch.example"


class Worker:
    """Celery worker and beat as the product runs them (stormwatch.devtools.stack)."""

    def __init__(self, services: Services, extra_env: dict[str, str] | None = None) -> None:
        self.dir = services.tmp / f"celery-{uuid.uuid4().hex[:6]}"
        self.dir.mkdir()
        self.env = {**os.environ, "DATABASE_URL": services.database_url,
                    "REDIS_URL": services.redis_url, "PYTHONPATH": str(REPO / "backend"),
                    "PUBLIC_BASE_URL": PUBLIC_URL, "PYTHONUNBUFFERED": "1",
                    "EGRESS_ALLOW": LOOPBACK_ALLOWED, **(extra_env or {})}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> None:
        celery = [sys.executable, "-m", "celery", "-A", "stormwatch.worker.app"]
        args = {"worker": [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2",
                           "--without-gossip", "--without-mingle", "--hostname",
                           f"e2e-{uuid.uuid4().hex[:6]}@%h"],
                "beat": [*celery, "beat", "--loglevel", "WARNING", "--schedule",
                         str(self.dir / "beat-schedule")]}[name]
        with open(self.dir / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(args, env=self.env, cwd=REPO, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True)

    def kill(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            stop_group(proc, 20, sig)

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def log(self, name: str) -> str:
        return (self.dir / f"{name}.log").read_text(errors="replace")[-6000:]


class Feeder:
    """Each agent posts one batch a second of RATE_HZ rounds to its peers through ingest;
    `spike(pairs, seconds)` makes those pairs' replies slow from the next round on."""

    def __init__(self, api: ApiServer, agents: list[EnrolledAgent]) -> None:
        self.api = api
        self.agents = agents
        self.spiking: dict[tuple[str, str], float] = {}  # pair -> spike end (epoch s)
        self.first_spike_at: float | None = None
        self.stop_flag = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.next_round = 0

    def spike(self, pairs: list[tuple[str, str]], seconds: float) -> float:
        start = time.time() + 0.5
        for p in pairs:
            self.spiking[p] = start + seconds
        self.spike_start = start
        return start

    def _batch(self, src: EnrolledAgent, t0: float, t1: float) -> dict[str, Any]:
        peers = [a.agent_id for a in self.agents if a is not src]
        cols: dict[str, list[Any]] = {"time_us": [], "peer_idx": [], "round": [],
                                      "payload_bytes": [], "rtt_us": [], "status": []}
        t = t0
        while t < t1:
            for i, dst in enumerate(peers):
                end = self.spiking.get((src.agent_id, dst))
                slow = end is not None and self.spike_start <= t < end
                cols["time_us"].append(int(t * 1e6))
                cols["peer_idx"].append(i)
                cols["round"].append(self.next_round)
                cols["payload_bytes"].append(1024)
                cols["rtt_us"].append(SPIKE_US if slow else NORMAL_US + (self.next_round % 7))
                cols["status"].append(0)
                if slow and self.first_spike_at is None:
                    self.first_spike_at = t
            self.next_round += 1
            t += 1 / RATE_HZ
        return {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id,
                "mesh": {"peers": peers, **cols}}

    def _run(self) -> None:
        self.spike_start = float("inf")
        last = time.time() - 1
        with self.api.client() as client:
            while not self.stop_flag.is_set():
                now = time.time()
                for src in self.agents:
                    r = post_batch(client, src, self._batch(src, last, now))
                    if r.status_code not in (200, 201, 202):
                        self.errors.append(f"{r.status_code} {r.text[:200]}")
                last = now
                self.stop_flag.wait(max(0.0, 1.0 - (time.time() - now)))

    def __enter__(self) -> Feeder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_flag.set()
        self.thread.join(10)


def rule_body(name: str, src: str, dst: str, channels: list[str]) -> dict[str, Any]:
    return {"name": name, "description": f"p99 of {name} above 20 ms", "severity": "critical",
            "labels": {"pair": name}, "metric": "mesh_rtt", "statistic": "p99",
            "window_s": 30, "condition": {"type": "above", "value": 20_000},
            "x": 1, "y": 1, "n": 1, "m": 1, "scope": {"src": [src], "dst": [dst]},
            "channel_ids": channels}


@pytest.fixture
def worker(services: Services) -> Iterator[Worker]:
    w = Worker(services, {"NOTIFY_RETRY_BASE_S": "1"})
    w.start("worker")
    w.start("beat")
    yield w
    w.stop()


def outcomes(db: Engine, rule_id: str) -> list[tuple[str, str]]:
    with db.connect() as c:
        return [tuple(r) for r in c.execute(text(
            "SELECT e.kind, d.outcome FROM alert_events e JOIN alert_event_dispatches d "
            "ON d.event_id = e.id WHERE e.rule_id = :r ORDER BY e.created_at"),
            {"r": rule_id}).all()]


def test_a_p99_spike_is_told_once_per_channel_within_60_s_then_resolved_and_muted_rules_stay_silent(  # noqa: E501
        services: Services, api_server: ApiServer, make_org: Callable[..., OrgCredentials],
        db: Engine, worker: Worker) -> None:
    org = make_org()
    h = {"Authorization": f"Bearer {org.api_key}"}
    tls = make_tls()
    api = api_server.client()
    with SmtpServer(tls, "starttls", users={"alerts": "smtp-pass"}) as smtp, \
            HttpReceiver() as slack, HttpReceiver() as hook:
        agents = [enroll(api, org.enrollment_token, f"e2e-{n}", region=r, zone=f"{r}a")
                  for n, r in (("a", "us-east-1"), ("b", "eu-west-1"), ("c", "ap-south-1"))]
        a, b, c = (x.agent_id for x in agents)
        with Feeder(api_server, agents) as feed:
            wait_until("the pairs to exist", 30, lambda: len(api.get(
                "/api/v1/agents", headers=h).json()) == 3 and not feed.errors)
            channels = []
            for body in (
                    {"name": "mail", "kind": "email", "config": {
                        "host": "localhost", "port": smtp.port, "security": "starttls",
                        "username": "alerts", "password": "smtp-pass",
                        "from_address": "stormwatch@example.com",
                        "to_addresses": ["oncall@example.com"], "ca_cert_pem": tls.ca_pem}},
                    {"name": "slack", "kind": "slack", "config": {"url": slack.url}},
                    {"name": "hook", "kind": "webhook", "config": {"url": hook.url}}):
                r = api.post("/api/v1/channels", json=body, headers=h)
                assert r.status_code == 201, r.text
                channels.append(r.json())
            hook.secret = channels[2]["signing_secret"]
            ids = [ch["id"] for ch in channels]
            rules = {}
            for name, src, dst in (("a-b", a, b), ("a-c", a, c), ("b-a", b, a)):
                r = api.post("/api/v1/alert-rules", json=rule_body(name, src, dst, ids),
                             headers=h)
                assert r.status_code == 201, r.text
                rules[name] = r.json()["id"]
            r = api.post("/api/v1/silences", headers=h, json={
                "rule_ids": [rules["a-c"]], "comment": "link a-c under repair",
                "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()})
            assert r.status_code == 201, r.text
            r = api.post("/api/v1/maintenance-windows", headers=h, json={
                "name": "b-a upgrade", "matchers": [{"label": "pair", "value": "b-a"}],
                "starts_at": (datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
                "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()})
            assert r.status_code == 201, r.text

            feed.spike([(a, b), (a, c), (b, a)], SPIKE_S)
            wait_until("the spike's first sample", 10, lambda: feed.first_spike_at is not None)
            t0 = feed.first_spike_at
            assert t0 is not None

            def told(kind: str) -> Callable[[], bool]:
                return lambda: (
                    sum(m["Subject"].startswith(f"[{kind}]") for m in smtp.sink.messages) >= 1
                    and sum(json.loads(q.body)["text"].startswith(f"[{kind}]")
                            for q in slack.requests) >= 1
                    and sum(p["type"] == f"alert.{kind.lower()}"
                            for p in hook.accepted.values()) >= 1)

            try:
                wait_until("a firing message on every channel", 90, told("FIRING"))
            except AssertionError:
                raise AssertionError(f"worker log:\n{worker.log('worker')}") from None
            received_at = time.time()
            assert received_at - t0 <= 60, f"told {received_at - t0:.1f} s after the spike"
            print(f"\nspike -> firing message on all 3 channels: {received_at - t0:.1f} s")
            wait_until("a resolved message on every channel", 150, told("RESOLVED"))
            # Both muted rules fired and resolved without a word.
            wait_until("the muted rules' events", 60, lambda: all(
                len(outcomes(db, rules[n])) == 2 for n in ("a-c", "b-a")))
            assert feed.errors == []

    assert outcomes(db, rules["a-b"]) == [("firing", "notified"), ("resolved", "notified")]
    assert outcomes(db, rules["a-c"]) == [("firing", "silenced"), ("resolved", "not_notified")]
    assert outcomes(db, rules["b-a"]) == [("firing", "maintenance"),
                                          ("resolved", "not_notified")]
    subjects = [m["Subject"] for m in smtp.sink.messages]
    assert subjects == ["[FIRING] critical: a-b", "[RESOLVED] critical: a-b"]
    slack_texts = [json.loads(q.body)["text"] for q in slack.requests]
    assert slack_texts == ["[FIRING] critical: a-b", "[RESOLVED] critical: a-b"]
    assert [p["type"] for p in hook.accepted.values()] == ["alert.firing", "alert.resolved"]
    assert hook.bad_signatures == 0 and hook.duplicates == 0
    firing = next(iter(hook.accepted.values()))
    [alert] = firing["data"]["alerts"]
    assert alert["series"] == "e2e-a → e2e-b"
    assert alert["value"] >= SPIKE_US * 0.99 and alert["threshold"] == 20_000
    assert alert["link"].startswith(f"{PUBLIC_URL}/pair?")
    blocks = json.dumps(json.loads(slack.requests[0].body)["blocks"])
    assert "vs threshold 20 ms" in blocks and f"<{PUBLIC_URL}/pair?" in blocks
    log = api.get(f"/api/v1/deliveries?rule_id={rules['a-b']}", headers=h).json()
    assert sorted((d["notification_kind"], d["channel_name"], d["state"]) for d in log) == [
        ("firing", "hook", "sent"), ("firing", "mail", "sent"), ("firing", "slack", "sent"),
        ("resolved", "hook", "sent"), ("resolved", "mail", "sent"),
        ("resolved", "slack", "sent")]
    api.close()


def webhook_rule(api: httpx.Client, org: OrgCredentials, db: Engine,
                 hook: HttpReceiver) -> uuid.UUID:
    """A webhook channel to the receiver (which learns its signing secret) and a rule on it."""
    r = api.post("/api/v1/channels", headers={"Authorization": f"Bearer {org.api_key}"},
                 json={"name": "hook", "kind": "webhook", "config": {"url": hook.url}})
    hook.secret = r.json()["signing_secret"]
    return add_rule(db, uuid.UUID(org.org_id), [uuid.UUID(r.json()["id"])])


def test_a_celery_worker_killed_mid_delivery_leaves_exactly_one_processed_message(
        services: Services, api_server: ApiServer, make_org: Callable[..., OrgCredentials],
        db: Engine) -> None:
    """The webhook receiver holds the request; the worker is SIGKILLed while waiting for the
    answer, so the outbox row stays 'sending'. The receiver then processes the request. A new
    worker resumes the row once its lease expires and resends with the same webhook-id,
    which the receiver recognises: one message processed, the row 'sent' after 2 attempts."""
    org = make_org()
    w = Worker(services, {"NOTIFY_LEASE_S": "3"})
    # What evaluation does after writing events: enqueue dispatch by name.
    client = Celery(broker=services.redis_url)
    try:
        with HttpReceiver() as hook, api_server.client() as api:
            rule = webhook_rule(api, org, db, hook)
            hook.hold.clear()
            w.start("worker")
            fire(db, uuid.UUID(org.org_id), rule, "e2e-a → e2e-b")
            client.send_task("stormwatch.dispatch_alert_events")
            assert hook.arrived.wait(90), f"nothing sent; worker log:\n{w.log('worker')}"
            w.kill("worker", signal.SIGKILL)
            [d] = deliveries(db, rule)
            assert (d["state"], d["attempts"]) == ("sending", 1)
            hook.hold.set()
            wait_until("the held request to be processed", 10, lambda: len(hook.accepted) == 1)
            w.start("worker")
            lease_end = d["lease_expires_at"]
            wait_until("the lease to expire", 10, lambda: datetime.now(UTC) > lease_end)
            client.send_task("stormwatch.dispatch_alert_events")
            wait_until("the resumed delivery", 90, lambda: any(
                d["state"] == "sent" for d in deliveries(db, rule)))
            ids = {{k.lower(): v for k, v in q.headers.items()}["webhook-id"]
                   for q in hook.requests}
    finally:
        w.stop()
        client.close()
    [d] = deliveries(db, rule)
    assert (d["state"], d["attempts"]) == ("sent", 2)
    assert len(hook.requests) == 2 and len(ids) == 1
    assert len(hook.accepted) == 1 and hook.duplicates == 1 and hook.bad_signatures == 0


def test_a_delivery_that_fails_once_is_retried_by_the_worker_itself_and_told_once(
        services: Services, api_server: ApiServer, make_org: Callable[..., OrgCredentials],
        db: Engine) -> None:
    """No beat: after a 503 the dispatch task schedules its own next run for when the
    backoff ends, and that run delivers. The receiver processes exactly one message."""
    org = make_org()
    w = Worker(services, {"NOTIFY_RETRY_BASE_S": "2"})
    client = Celery(broker=services.redis_url)
    try:
        with HttpReceiver() as hook, api_server.client() as api:
            hook.script = [(503, "busy, try later")]
            rule = webhook_rule(api, org, db, hook)
            w.start("worker")
            fire(db, uuid.UUID(org.org_id), rule, "e2e-a → e2e-b")
            client.send_task("stormwatch.dispatch_alert_events")
            wait_until("the retried delivery", 90, lambda: any(
                d["state"] == "sent" for d in deliveries(db, rule)))
    finally:
        w.stop()
        client.close()
    [d] = deliveries(db, rule)
    assert (d["state"], d["attempts"], d["last_error"]) == ("sent", 2, None)
    assert len(hook.requests) == 2 and len(hook.accepted) == 1 and hook.duplicates == 0
