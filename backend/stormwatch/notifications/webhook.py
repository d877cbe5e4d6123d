"""Generic webhooks: a JSON body signed per the Standard Webhooks spec (standardwebhooks:
webhook-id, webhook-timestamp, webhook-signature = v1,HMAC-SHA256). The webhook-id is the
delivery's id, the same on every retry, so a receiver that remembers ids deduplicates."""

from __future__ import annotations

import secrets
import ssl
from datetime import UTC, datetime
from typing import Any

import orjson
from standardwebhooks import Webhook

from stormwatch.notifications.base import (
    Message,
    PermanentError,
    TransientError,
    http_post,
    reply_problem,
)

SECRET_PREFIX = "whsec_"


def new_signing_secret() -> str:
    """24 random bytes, base64 with the spec's whsec_ prefix (what receivers' libraries take)."""
    import base64

    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def payload(message: Message) -> dict[str, Any]:
    return {
        "type": f"alert.{message.kind}",
        "timestamp": message.created_at.isoformat(),
        "data": {
            "org_id": message.org_id, "rule_id": message.rule_id, "rule": message.rule_name,
            "severity": message.severity, "labels": message.labels,
            "description": message.description, "condition": message.condition,
            "link": message.link,
            "alerts": [a.to_json() for a in message.alerts],
        },
    }


class WebhookChannel:
    def __init__(self, url: str, signing_secret: str, timeout_s: float = 15.0,
                 ca_cert_pem: str | None = None) -> None:
        self.url = url
        self.signer = Webhook(signing_secret)
        self.timeout_s = timeout_s
        self.ca_cert_pem = ca_cert_pem

    def signed(self, message: Message, idempotency_key: str) -> tuple[bytes, dict[str, str]]:
        body = orjson.dumps(payload(message))
        now = datetime.now(UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": idempotency_key,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(idempotency_key, now, body.decode()),
            "user-agent": "Stormwatch-Webhooks/1",
        }
        return body, headers

    async def send(self, message: Message, idempotency_key: str) -> str:
        body, headers = self.signed(message, idempotency_key)
        verify: ssl.SSLContext | bool = True
        if self.ca_cert_pem:
            verify = ssl.create_default_context(cadata=self.ca_cert_pem)
        reply = await http_post(self.url, body, headers, self.timeout_s, verify)
        if reply.status in (408, 425, 429) or reply.status >= 500:
            raise TransientError(reply.detail)
        if not 200 <= reply.status < 300:
            raise PermanentError(reply_problem(reply))
        return reply.detail
