"""The one interface every channel implements, and the message they all render.

A channel's `send` either returns the server's acknowledgement or raises `PermanentError`
(retrying cannot help: bad address, revoked URL, rejected credentials) or `TransientError`
(it may work later: network, timeouts, 429, 5xx). The outbox retries only the latter.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

import httpx
import orjson

from stormwatch.core import egress

MessageKind = Literal["firing", "resolved", "reminder", "test"]


class DeliveryError(Exception):
    """A send that did not go through; `detail` is the server's own words where it spoke."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class PermanentError(DeliveryError):
    """Retrying the same message on the same channel cannot succeed."""


class TransientError(DeliveryError):
    """The same message may go through later; not before `retry_after_s` if the server
    said when (a 429's Retry-After)."""

    def __init__(self, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class AlertItem:
    """One alert of a grouped message: which series, what value against what limit."""

    alert_id: str
    series: str
    state: Literal["firing", "resolved"]
    started_at: datetime
    resolved_at: datetime | None = None
    value: float | None = None
    threshold: float | None = None
    baseline: float | None = None
    unit: str = ""
    link: str | None = None
    # The series' labels (src_agent, src_region, provider...), for channels that route on them.
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Its stored form, which is also its form in the webhook payload (docs/alerts.md)."""
        return {"alert_id": self.alert_id, "series": self.series, "state": self.state,
                "started_at": self.started_at.isoformat(),
                "resolved_at": self.resolved_at.isoformat() if self.resolved_at else None,
                "value": self.value, "threshold": self.threshold, "baseline": self.baseline,
                "unit": self.unit, "link": self.link, "labels": self.labels}


@dataclass(frozen=True)
class Message:
    """Everything a channel needs to tell one notification; channels only format it."""

    kind: MessageKind
    org_id: str
    rule_id: str | None
    rule_name: str
    severity: str
    description: str
    condition: str
    alerts: tuple[AlertItem, ...]
    link: str | None
    created_at: datetime
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The stored form the outbox keeps and every retry sends."""
        return {
            "kind": self.kind, "org_id": self.org_id, "rule_id": self.rule_id,
            "rule_name": self.rule_name, "severity": self.severity,
            "description": self.description, "condition": self.condition,
            "labels": self.labels, "created_at": self.created_at.isoformat(),
            "link": self.link,
            "alerts": [i.to_json() for i in self.alerts],
        }

    @classmethod
    def from_json(cls, m: Mapping[str, Any]) -> Message:
        def ts(v: str | None) -> datetime | None:
            return datetime.fromisoformat(v) if v else None

        return cls(
            kind=m["kind"], org_id=m["org_id"], rule_id=m["rule_id"], rule_name=m["rule_name"],
            severity=m["severity"], description=m["description"], condition=m["condition"],
            labels=dict(m.get("labels") or {}), link=m.get("link"),
            created_at=datetime.fromisoformat(m["created_at"]),
            alerts=tuple(AlertItem(
                alert_id=a["alert_id"], series=a["series"], state=a["state"],
                started_at=datetime.fromisoformat(a["started_at"]),
                resolved_at=ts(a.get("resolved_at")), value=a.get("value"),
                threshold=a.get("threshold"), baseline=a.get("baseline"),
                unit=a.get("unit", ""), link=a.get("link"),
                labels=dict(a.get("labels") or {})) for a in m["alerts"]))

    @property
    def title(self) -> str:
        n = len(self.alerts)
        what = {"firing": "FIRING", "resolved": "RESOLVED", "reminder": "STILL FIRING",
                "test": "TEST"}[self.kind]
        count = f" ({n} series)" if n > 1 else ""
        return f"[{what}] {self.severity}: {self.rule_name}{count}"


class Channel(Protocol):
    """A configured destination. `idempotency_key` is stable across every retry of one
    delivery, so receivers that can deduplicate do."""

    async def send(self, message: Message, idempotency_key: str) -> str: ...


async def http_post(url: str, body: bytes, headers: dict[str, str], timeout_s: float,
                    verify: ssl.SSLContext | bool, policy: egress.Policy | None = None,
                    read_error: Callable[[int, bytes], str | None] | None = None
                    ) -> egress.HttpReply:
    """One POST through the egress policy: a refused address is permanent, an unresolved
    name, a network error or a timeout transient (policy and read_error: egress.post's)."""
    try:
        return await egress.post(url, content=body, headers=headers, timeout_s=timeout_s,
                                 verify=verify, policy=policy, read_error=read_error)
    except egress.EgressRefused as exc:
        raise PermanentError(exc.detail) from exc
    except egress.EgressUnresolved as exc:
        raise TransientError(exc.detail) from exc
    except (httpx.HTTPError, OSError, TimeoutError) as exc:
        cert = _cert_error(exc)
        if cert is not None:  # the same certificate will be refused again
            raise PermanentError(f"TLS certificate rejected: {cert.verify_message}") from exc
        raise TransientError(f"{type(exc).__name__}: {exc}") from exc


def _cert_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def reply_problem(reply: egress.HttpReply) -> str:
    if reply.redirect:
        return f"{reply.detail}: a redirect, which is not followed (give the final URL)"
    return reply.detail


def accepted(reply: egress.HttpReply) -> str:
    """A 2xx reply's detail; 408, 425, 429 and 5xx are transient, any other status
    permanent (the request as built will be refused again)."""
    if reply.status in (408, 425, 429) or reply.status >= 500:
        raise TransientError(reply.detail, reply.retry_after_s)
    if not 200 <= reply.status < 300:
        raise PermanentError(reply_problem(reply))
    return reply.detail


def tls_verify(ca_cert_pem: str | None) -> ssl.SSLContext | bool:
    """The system's trust store, or only the private CA the channel names."""
    return ssl.create_default_context(cadata=ca_cert_pem) if ca_cert_pem else True


async def post_json(url: str, doc: Any, headers: dict[str, str], timeout_s: float,
                    ca_cert_pem: str | None = None) -> str:
    """One JSON POST through the egress policy, its reply judged by `accepted`."""
    reply = await http_post(url, orjson.dumps(doc),
                            {"content-type": "application/json", **headers}, timeout_s,
                            tls_verify(ca_cert_pem))
    return accepted(reply)


class JsonWebhook:
    """A channel that POSTs one JSON document per message to its webhook URL (Discord,
    Microsoft Teams): the kind gives the document and its user agent."""

    payload: Callable[[Message], Any]
    user_agent = "Stormwatch/1"

    def __init__(self, url: str, timeout_s: float = 15.0,
                 ca_cert_pem: str | None = None) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.ca_cert_pem = ca_cert_pem

    async def send(self, message: Message, idempotency_key: str) -> str:
        return await post_json(self.url, self.payload(message),
                               {"user-agent": self.user_agent}, self.timeout_s, self.ca_cert_pem)
