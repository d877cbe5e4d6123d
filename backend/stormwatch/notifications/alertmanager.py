"""Prometheus Alertmanager: each Stormwatch alert posted to `POST /api/v2/alerts` as one
Alertmanager alert, as Prometheus posts its own.

Alertmanager tells alerts apart by their label set, so the labels carry
`stormwatch_alert_id` beside `alertname` (the rule), `severity`, `stormwatch_rule_id`, the
rule's labels and the series' (src_agent, src_region, provider...): one Alertmanager alert
per Stormwatch alert, grouped and routed by the operator's own config. Annotations hold the
summary, description and value; `generatorURL` the alert's view in Stormwatch.

A firing alert is posted with `endsAt` = now + `FIRING_VALIDITY`, and re-posted every minute
while it fires (services/notify/repost.py, a beat task): Alertmanager ends an alert whose
`endsAt` passed, so if Stormwatch stops saying it fires, it resolves there on its own, as a
stopped Prometheus's alerts do. A resolved alert is posted with `endsAt` = its resolution
time, and re-posted for `RESOLVED_RETENTION` after it, which repairs a resolution lost or
overtaken by a late re-post. 2xx is accepted; 408, 429 and 5xx are transient; other 4xx
(`400` an alert it refuses, `401`/`403` credentials) permanent."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from stormwatch.notifications.base import AlertItem, Message, post_json
from stormwatch.notifications.render import versus, when

# The resend period of the repost task and the validity of each post, as Prometheus sets
# them (resend_delay 1 m, alerts valid 4 resend periods).
REPOST_INTERVAL = timedelta(minutes=1)
FIRING_VALIDITY = 4 * REPOST_INTERVAL
# How long resolved alerts are re-posted, as Prometheus keeps sending resolved alerts.
RESOLVED_RETENTION = timedelta(minutes=15)
TEST_VALIDITY = timedelta(minutes=5)

_INVALID = re.compile(r"[^A-Za-z0-9_]")


def label_name(name: str) -> str:
    """A label name Alertmanager 0.25 accepts ([A-Za-z_][A-Za-z0-9_]*)."""
    clean = _INVALID.sub("_", name) or "_"
    return f"_{clean}" if clean[0].isdigit() else clean


def labels(message: Message, item: AlertItem) -> dict[str, str]:
    out = {label_name(k): v for k, v in {**message.labels, **item.labels}.items() if v}
    # Stormwatch's own labels last: a rule label cannot hide which alert this is.
    out.update({"alertname": message.rule_name, "severity": message.severity,
                "stormwatch_alert_id": item.alert_id})
    if message.rule_id:
        out["stormwatch_rule_id"] = message.rule_id
    if item.series:
        out["series"] = item.series
    return out


def _ts(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def alert(message: Message, item: AlertItem, now: datetime) -> dict[str, Any]:
    """One postable alert: firing until now + FIRING_VALIDITY, or ended at its resolution."""
    ends = (item.resolved_at or now) if item.state == "resolved" else now + FIRING_VALIDITY
    annotations = {"summary": f"{message.rule_name}: {item.series}",
                   "description": message.description or message.condition,
                   "value": versus(item), "since": when(item), "condition": message.condition}
    out: dict[str, Any] = {
        "labels": labels(message, item),
        "annotations": {k: v for k, v in annotations.items() if v},
        "startsAt": _ts(item.started_at), "endsAt": _ts(ends)}
    link = item.link or message.link
    if link:
        out["generatorURL"] = link
    return out


def postable(message: Message, idempotency_key: str, now: datetime) -> list[dict[str, Any]]:
    if message.kind == "test":
        # A real alert that ends on its own: the route to the operator's receivers is proven.
        probe = AlertItem(alert_id=f"test-{idempotency_key}", series="stormwatch",
                          state="firing", started_at=now)
        test = alert(message, probe, now)
        test["labels"]["alertname"] = "StormwatchTest"
        test["endsAt"] = _ts(now + TEST_VALIDITY)
        return [test]
    return [alert(message, item, now) for item in message.alerts]


class AlertmanagerChannel:
    def __init__(self, url: str, username: str | None = None, password: str | None = None,
                 bearer_token: str | None = None, timeout_s: float = 15.0,
                 ca_cert_pem: str | None = None) -> None:
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self.headers = {"user-agent": "Stormwatch-Alertmanager/1"}
        if bearer_token:
            self.headers["authorization"] = f"Bearer {bearer_token}"
        elif username:
            pair = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self.headers["authorization"] = f"Basic {pair}"
        self.timeout_s = timeout_s
        self.ca_cert_pem = ca_cert_pem

    async def post(self, alerts: Sequence[Mapping[str, Any]]) -> str:
        return await post_json(self.url, alerts, self.headers, self.timeout_s,
                               self.ca_cert_pem)

    async def send(self, message: Message, idempotency_key: str) -> str:
        # One POST for the message's alerts; a resend only refreshes them (same label sets).
        alerts = postable(message, idempotency_key, datetime.now(UTC))
        return await self.post(list(alerts)) if alerts else "nothing to send"
