"""Slack incoming webhooks through slack_sdk's WebhookClient, as Block Kit: what, where,
value vs threshold, a link. 4xx other than 429 are permanent (revoked or wrong URL, bad
payload); 429, 5xx and network errors are transient."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from slack_sdk.webhook import WebhookClient

from stormwatch.notifications.base import Message, PermanentError, TransientError
from stormwatch.notifications.render import versus, when

MAX_SERIES_IN_BLOCKS = 10  # Slack caps a message at 50 blocks; long groups are summarised
BODY_EXCERPT = 300


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

    def _post(self, message: Message) -> tuple[int, str]:
        # No retry handlers: the outbox owns retries, with backoff and a bound.
        client = WebhookClient(self.url, timeout=self.timeout_s, ssl=self.ssl, retry_handlers=[])
        resp = client.send(text=message.title, blocks=blocks(message))
        return resp.status_code, resp.body or ""

    async def send(self, message: Message, idempotency_key: str) -> str:
        # slack_sdk's async client needs aiohttp; the sync one in a thread keeps one HTTP stack.
        try:
            status, body = await asyncio.to_thread(self._post, message)
        except (OSError, TimeoutError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        detail = f"HTTP {status}: {body[:BODY_EXCERPT]}"
        if status == 429 or status >= 500:
            raise TransientError(detail)
        if status >= 400:
            raise PermanentError(detail)
        if not 200 <= status < 300:
            raise PermanentError(detail)
        return detail
