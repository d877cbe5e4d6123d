"""Slack incoming webhooks, as Block Kit: what, where, value vs threshold, a link. The POST
goes through the egress policy like every outbound request (an incoming webhook is one JSON
POST). 4xx other than 429 are permanent (revoked or wrong URL, bad payload); 429, 5xx and
network errors are transient; a reply names Slack's own error code (`invalid_token`)."""

from __future__ import annotations

import ssl
from typing import Any

import orjson

from stormwatch.notifications.base import (
    Message,
    PermanentError,
    TransientError,
    http_post,
    reply_problem,
)
from stormwatch.notifications.render import versus, when

MAX_SERIES_IN_BLOCKS = 10  # Slack caps a message at 50 blocks; long groups are summarised


def blocks(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": message.title[:150]}}]
    intro = [f"*Rule:* {message.rule_name}  *Severity:* {message.severity}"]
    if message.condition:
        intro.append(f"*Condition:* {message.condition}")
    if message.description:
        intro.append(message.description)
    out.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(intro)[:3000]}})
    for item in message.alerts[:MAX_SERIES_IN_BLOCKS]:
        text = f"*{item.series}*\n{versus(item)}, {when(item)}"
        if item.link:
            text += f"\n<{item.link}|Open in Stormwatch>"
        out.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}})
    if len(message.alerts) > MAX_SERIES_IN_BLOCKS:
        more = len(message.alerts) - MAX_SERIES_IN_BLOCKS
        out.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": f"and {more} more series"}]})
    if message.link:
        out.append({"type": "actions", "elements": [{
            "type": "button", "text": {"type": "plain_text", "text": "Open in Stormwatch"},
            "url": message.link}]})
    return out


class SlackChannel:
    def __init__(self, url: str, timeout_s: int = 15, ca_cert_pem: str | None = None) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.ssl = ssl.create_default_context(cadata=ca_cert_pem) if ca_cert_pem else None

    async def send(self, message: Message, idempotency_key: str) -> str:
        body = orjson.dumps({"text": message.title, "blocks": blocks(message)})
        reply = await http_post(self.url, body, {
            "content-type": "application/json;charset=utf-8",
            "user-agent": "Stormwatch-Slack/1"}, self.timeout_s, self.ssl or True)
        if reply.status == 429 or reply.status >= 500:
            raise TransientError(reply.detail)
        if not 200 <= reply.status < 300:
            raise PermanentError(reply_problem(reply))
        return reply.detail
