"""Microsoft Teams through a Workflows webhook ("Post to a channel when a webhook request is
received"): a message with one Adaptive Card 1.4 (a title coloured by state, the rule's facts,
a fact set per series, a button to Stormwatch). The URL carries its signature (`sig=`), so it
is kept as a secret. Workflows answers 202; 408, 429 and 5xx are transient, other 4xx
(`401`/`403` a bad or revoked signature, `400` a card it refuses, `404` a deleted flow)
permanent. Workflows take no idempotency key: a resend after it accepted shows twice."""

from __future__ import annotations

from typing import Any

from stormwatch.notifications.base import AlertItem, JsonWebhook, Message
from stormwatch.notifications.render import fmt_value, when

CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
COLOURS = {"firing": "Attention", "reminder": "Warning", "resolved": "Good", "test": "Accent"}
MAX_SERIES = 10  # a card stays readable; the rest are counted


def _series(item: AlertItem) -> list[dict[str, Any]]:
    facts = [{"title": "Value", "value": fmt_value(item.value, item.unit)}]
    if item.threshold is not None:
        facts.append({"title": "Threshold", "value": fmt_value(item.threshold, item.unit)})
    if item.baseline is not None:
        facts.append({"title": "Baseline", "value": fmt_value(item.baseline, item.unit)})
    facts.append({"title": "When", "value": when(item)})
    head = f"[{item.series}]({item.link})" if item.link else item.series
    return [{"type": "TextBlock", "text": head, "weight": "Bolder", "wrap": True,
             "spacing": "Medium"},
            {"type": "FactSet", "facts": facts}]


def card(message: Message) -> dict[str, Any]:
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": message.title, "size": "Large", "weight": "Bolder",
         "color": COLOURS[message.kind], "wrap": True}]
    if message.description:
        body.append({"type": "TextBlock", "text": message.description, "wrap": True})
    facts = [{"title": "Rule", "value": message.rule_name},
             {"title": "Severity", "value": message.severity}]
    if message.condition:
        facts.append({"title": "Condition", "value": message.condition})
    body.append({"type": "FactSet", "facts": facts})
    for item in message.alerts[:MAX_SERIES]:
        body += _series(item)
    if len(message.alerts) > MAX_SERIES:
        body.append({"type": "TextBlock", "isSubtle": True, "wrap": True,
                     "text": f"and {len(message.alerts) - MAX_SERIES} more series"})
    out: dict[str, Any] = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": "1.4",
                           "body": body, "msteams": {"width": "Full"}}
    if message.link:
        out["actions"] = [{"type": "Action.OpenUrl", "title": "Open in Stormwatch",
                           "url": message.link}]
    return out


def payload(message: Message) -> dict[str, Any]:
    return {"type": "message", "attachments": [{
        "contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None,
        "content": card(message)}]}


class TeamsChannel(JsonWebhook):
    payload = staticmethod(payload)
    user_agent = "Stormwatch-Teams/1"
