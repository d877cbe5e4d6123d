"""Discord webhooks: one message with one embed (title, description, link, a colour by state,
a field per series, the time). The webhook URL carries its token, so it is kept as a secret.
Discord answers 204; 429 (its rate limits, with Retry-After, which the outbox waits out) and
5xx are transient, other 4xx (`404` unknown webhook, `400` an embed it refuses) permanent.
Webhooks take no idempotency key: a resend after Discord posted shows twice."""

from __future__ import annotations

from typing import Any

from stormwatch.notifications.base import JsonWebhook, Message
from stormwatch.notifications.render import versus, when

COLOURS = {"firing": 0xD93F0B, "reminder": 0xE99695, "resolved": 0x2DA44E, "test": 0x5865F2}
MAX_FIELDS = 10  # of Discord's 25, so a long group stays readable; the rest are counted
# Discord's embed limits (characters).
MAX_TITLE, MAX_DESCRIPTION, MAX_FIELD_NAME, MAX_FIELD_VALUE = 256, 4096, 256, 1024


def embed(message: Message) -> dict[str, Any]:
    intro = [f"**Severity:** {message.severity}"]
    if message.condition:
        intro.append(f"**Condition:** {message.condition}")
    if message.description:
        intro.append(message.description)
    fields = []
    for item in message.alerts[:MAX_FIELDS]:
        value = f"{versus(item)}, {when(item)}"
        if item.link:
            value += f"\n[Open in Stormwatch]({item.link})"
        fields.append({"name": item.series[:MAX_FIELD_NAME] or "series",
                       "value": value[:MAX_FIELD_VALUE], "inline": False})
    if len(message.alerts) > MAX_FIELDS:
        fields.append({"name": "more", "inline": False,
                       "value": f"and {len(message.alerts) - MAX_FIELDS} more series"})
    out: dict[str, Any] = {
        "title": message.title[:MAX_TITLE],
        "description": "\n".join(intro)[:MAX_DESCRIPTION],
        "color": COLOURS[message.kind], "timestamp": message.created_at.isoformat(),
        "fields": fields, "footer": {"text": "Stormwatch"},
    }
    if message.link:
        out["url"] = message.link
    return out


def payload(message: Message) -> dict[str, Any]:
    # No mentions: a series or rule name must never ping @everyone.
    return {"username": "Stormwatch", "embeds": [embed(message)],
            "allowed_mentions": {"parse": []}}


class DiscordChannel(JsonWebhook):
    payload = staticmethod(payload)
    user_agent = "Stormwatch-Discord/1"
