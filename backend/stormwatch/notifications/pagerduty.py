"""PagerDuty Events API v2: one event per alert, `trigger` while it fires and `resolve` when
it resolves, under a `dedup_key` made from the alert's id. The key is the same on every
retry, every reminder and the resolution, so PagerDuty keeps one incident per Stormwatch
alert and the resolve closes that incident. 2xx (PagerDuty answers 202) is accepted; 429
and 5xx are transient; other 4xx (a bad routing key, an invalid event) permanent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stormwatch.notifications.base import AlertItem, Message, post_json
from stormwatch.notifications.render import versus, when

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
# A rule's severity -> PagerDuty's (critical, error, warning, info); overridable per channel.
DEFAULT_SEVERITIES = {"critical": "critical", "warning": "warning", "info": "info"}
MAX_SUMMARY = 1024  # PagerDuty truncates longer summaries


def dedup_key(alert_id: str) -> str:
    return f"stormwatch-alert-{alert_id}"


def _timestamp(item: AlertItem) -> str:
    at = item.resolved_at if item.state == "resolved" and item.resolved_at else item.started_at
    return at.isoformat()


def trigger(message: Message, item: AlertItem, routing_key: str,
            severities: Mapping[str, str]) -> dict[str, Any]:
    """A trigger event for one alert of the message (documented fields only)."""
    summary = f"{message.severity}: {message.rule_name} - {item.series}: {versus(item)}"
    details: dict[str, Any] = {
        "rule": message.rule_name, "rule_id": message.rule_id, "condition": message.condition,
        "description": message.description, "series": item.series, "value": item.value,
        "threshold": item.threshold, "baseline": item.baseline, "unit": item.unit,
        "since": when(item), "labels": {**message.labels, **item.labels},
    }
    event: dict[str, Any] = {
        "routing_key": routing_key, "event_action": "trigger",
        "dedup_key": dedup_key(item.alert_id),
        "payload": {
            "summary": summary[:MAX_SUMMARY], "source": item.series or "stormwatch",
            "severity": severities.get(message.severity, "warning"),
            "timestamp": _timestamp(item), "group": message.rule_name,
            "custom_details": {k: v for k, v in details.items() if v not in (None, "", {})},
        },
        "client": "Stormwatch",
    }
    link = item.link or message.link
    if link:
        event["client_url"] = link
        event["links"] = [{"href": link, "text": "Open in Stormwatch"}]
    return event


def resolve(item_alert_id: str, routing_key: str) -> dict[str, Any]:
    return {"routing_key": routing_key, "event_action": "resolve",
            "dedup_key": dedup_key(item_alert_id)}


class PagerDutyChannel:
    def __init__(self, routing_key: str, events_url: str = EVENTS_URL,
                 severity_map: Mapping[str, str] | None = None, timeout_s: float = 15.0,
                 ca_cert_pem: str | None = None) -> None:
        self.routing_key = routing_key
        self.url = events_url
        self.severities = {**DEFAULT_SEVERITIES, **(severity_map or {})}
        self.timeout_s = timeout_s
        self.ca_cert_pem = ca_cert_pem

    async def _post(self, event: dict[str, Any]) -> str:
        return await post_json(self.url, event, {"user-agent": "Stormwatch-PagerDuty/1"},
                               self.timeout_s, self.ca_cert_pem)

    def events(self, message: Message, idempotency_key: str) -> list[dict[str, Any]]:
        if message.kind == "test":
            # Opened and closed at once: the route is proven and no incident stays open.
            probe = AlertItem(alert_id=f"test-{idempotency_key}", series="stormwatch",
                              state="firing", started_at=message.created_at)
            return [trigger(message, probe, self.routing_key, self.severities),
                    resolve(probe.alert_id, self.routing_key)]
        return [trigger(message, item, self.routing_key, self.severities)
                if item.state == "firing" else resolve(item.alert_id, self.routing_key)
                for item in message.alerts]

    async def send(self, message: Message, idempotency_key: str) -> str:
        # In order, stopping at the first failure: a retry resends all, which the dedup keys
        # make harmless (a trigger on an open incident only adds to its log).
        replies = [await self._post(e) for e in self.events(message, idempotency_key)]
        return "; ".join(dict.fromkeys(replies)) or "nothing to send"
