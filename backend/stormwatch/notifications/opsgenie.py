"""Opsgenie Alert API: per alert, create (`POST /v2/alerts`) while it fires and close
(`POST /v2/alerts/{alias}/close?identifierType=alias`) when it resolves, under an `alias`
made from the alert's id. Opsgenie deduplicates open alerts by alias, so a retry or a
reminder raises the open alert's count instead of opening a second, and the close ends that
one. Requests are accepted with 202 and processed asynchronously; 429 and 5xx are
transient, other 4xx (a revoked key, an invalid alert) permanent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from stormwatch.notifications.base import AlertItem, Message, post_json
from stormwatch.notifications.render import versus, when

API_URL = "https://api.opsgenie.com"
EU_API_URL = "https://api.eu.opsgenie.com"
DEFAULT_PRIORITIES = {"critical": "P1", "warning": "P3", "info": "P5"}
# Opsgenie's documented limits: longer values are cut by it, or refused.
MAX_MESSAGE, MAX_DESCRIPTION, MAX_TAG, MAX_DETAIL = 130, 15000, 50, 8000


def alias(alert_id: str) -> str:
    return f"stormwatch-alert-{alert_id}"


def create(message: Message, item: AlertItem, priorities: Mapping[str, str],
           tags: tuple[str, ...]) -> dict[str, Any]:
    """An alert create request for one alert of the message."""
    text = f"[{message.severity}] {message.rule_name}: {item.series}"
    lines = [f"{item.series}: {versus(item)}, {when(item)}"]
    if message.condition:
        lines.append(f"Condition: {message.condition}")
    if message.description:
        lines.append(message.description)
    link = item.link or message.link
    if link:
        lines.append(f"Open in Stormwatch: {link}")
    labels = {**message.labels, **item.labels}
    details = {"rule": message.rule_name, "rule_id": message.rule_id or "",
               "severity": message.severity, "value": versus(item), "since": when(item),
               "link": link or "", **{f"label_{k}": v for k, v in labels.items()}}
    return {
        "message": text[:MAX_MESSAGE], "alias": alias(item.alert_id),
        "description": "\n".join(lines)[:MAX_DESCRIPTION],
        "tags": list(dict.fromkeys(t[:MAX_TAG] for t in (
            "stormwatch", message.severity, *tags) if t)),
        "details": {k: str(v)[:MAX_DETAIL] for k, v in details.items() if v},
        "entity": item.series[:512], "source": "Stormwatch",
        "priority": priorities.get(message.severity, "P3"),
    }


class OpsgenieChannel:
    def __init__(self, api_key: str, api_url: str = API_URL,
                 priority_map: Mapping[str, str] | None = None, tags: tuple[str, ...] = (),
                 timeout_s: float = 15.0, ca_cert_pem: str | None = None) -> None:
        self.api_key = api_key
        self.api_url = api_url.rstrip("/")
        self.priorities = {**DEFAULT_PRIORITIES, **(priority_map or {})}
        self.tags = tags
        self.timeout_s = timeout_s
        self.ca_cert_pem = ca_cert_pem

    async def _post(self, path: str, doc: dict[str, Any]) -> str:
        return await post_json(self.api_url + path, doc, {
            "authorization": f"GenieKey {self.api_key}",
            "user-agent": "Stormwatch-Opsgenie/1"}, self.timeout_s, self.ca_cert_pem)

    def requests(self, message: Message, idempotency_key: str
                 ) -> list[tuple[str, dict[str, Any]]]:
        """(path, body) in order: creates for firing alerts, closes for resolved ones."""
        def close(alert_id: str) -> tuple[str, dict[str, Any]]:
            return (f"/v2/alerts/{quote(alias(alert_id), safe='')}/close?identifierType=alias",
                    {"source": "Stormwatch", "note": "Resolved in Stormwatch"})

        if message.kind == "test":
            # Created and closed at once: the key is proven and no alert stays open.
            probe = AlertItem(alert_id=f"test-{idempotency_key}", series="stormwatch",
                              state="firing", started_at=message.created_at)
            return [("/v2/alerts", create(message, probe, self.priorities, self.tags)),
                    close(probe.alert_id)]
        return [("/v2/alerts", create(message, item, self.priorities, self.tags))
                if item.state == "firing" else close(item.alert_id) for item in message.alerts]

    async def send(self, message: Message, idempotency_key: str) -> str:
        # In order, stopping at the first failure; a retry resends all, which the aliases
        # make harmless (a create on an open alias only raises its count).
        replies = [await self._post(path, doc)
                   for path, doc in self.requests(message, idempotency_key)]
        return "; ".join(dict.fromkeys(replies)) or "nothing to send"
