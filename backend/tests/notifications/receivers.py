"""Local stand-ins for the incident and chat services, behind `HttpReceiver.handle`: each
checks a request against the service's documented payload, answers as the service does
(400 naming the problem for an invalid one) and keeps the state a test asserts on: which
incidents or alerts are open, under which key."""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from tests.notifications.servers import Received


def _iso(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


def _json(req: Received) -> Any:
    return json.loads(req.body)


def _headers(req: Received) -> dict[str, str]:
    return {k.lower(): v for k, v in req.headers.items()}


@dataclass
class Incident:
    dedup_key: str
    summary: str
    severity: str
    triggers: int = 1
    open: bool = True


@dataclass
class PagerDutyEvents:
    """The Events API v2 enqueue endpoint: a trigger opens an incident under its dedup_key,
    or adds to the open one with that key; a resolve closes it."""

    routing_key: str
    incidents: list[Incident] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def problems(self, req: Received, e: Any) -> list[str]:
        out: list[str] = []
        if req.path != "/v2/enqueue":
            out.append(f"path {req.path}")
        if not _headers(req).get("content-type", "").startswith("application/json"):
            out.append("content-type is not application/json")
        if not isinstance(e, dict):
            return [*out, "not an object"]
        if e.get("routing_key") != self.routing_key:
            out.append("'routing_key' is missing or invalid")
        action = e.get("event_action")
        if action not in ("trigger", "acknowledge", "resolve"):
            out.append("'event_action' is missing or invalid")
        key = e.get("dedup_key")
        if key is not None and not (isinstance(key, str) and 0 < len(key) <= 255):
            out.append("'dedup_key' is invalid")
        if action in ("acknowledge", "resolve") and not key:
            out.append("'dedup_key' is required to acknowledge or resolve")
        if action == "trigger":
            p = e.get("payload")
            if not isinstance(p, dict):
                return [*out, "'payload' is missing"]
            if not isinstance(p.get("summary"), str) or not 0 < len(p["summary"]) <= 1024:
                out.append("'payload.summary' is missing or longer than 1024 characters")
            if not isinstance(p.get("source"), str) or not p["source"]:
                out.append("'payload.source' is missing")
            if p.get("severity") not in ("critical", "error", "warning", "info"):
                out.append("'payload.severity' is invalid")
            if "timestamp" in p and not _iso(p["timestamp"]):
                out.append("'payload.timestamp' is not ISO 8601")
            if "custom_details" in p and not isinstance(p["custom_details"], dict):
                out.append("'payload.custom_details' is not an object")
            for link in e.get("links", []):
                if not isinstance(link, dict) or not str(link.get("href", "")).startswith(
                        ("http://", "https://")):
                    out.append("'links' entries need an href")
        allowed = {"routing_key", "event_action", "dedup_key", "payload", "links", "images",
                   "client", "client_url"}
        out += [f"unknown field {k!r}" for k in e if k not in allowed]
        return out

    def __call__(self, req: Received) -> tuple[int, str]:
        e = _json(req)
        errors = self.problems(req, e)
        if errors:
            return 400, json.dumps({"status": "invalid event",
                                    "message": "Event object is invalid", "errors": errors})
        with self.lock:
            self.events.append(e)
            key = e.get("dedup_key") or uuid.uuid4().hex
            open_one = next((i for i in self.incidents if i.dedup_key == key and i.open), None)
            if e["event_action"] == "trigger":
                if open_one is None:
                    self.incidents.append(Incident(key, e["payload"]["summary"],
                                                   e["payload"]["severity"]))
                else:
                    open_one.triggers += 1
            elif e["event_action"] == "resolve" and open_one is not None:
                open_one.open = False
        return 202, json.dumps({"status": "success", "message": "Event processed",
                                "dedup_key": key})


@dataclass
class GenieAlert:
    alias: str
    message: str
    priority: str
    count: int = 1
    open: bool = True


@dataclass
class OpsgenieAlerts:
    """The Alert API: create opens an alert, or raises the count of the open one with its
    alias; close by alias closes it. Requests need `Authorization: GenieKey <key>`."""

    api_key: str
    alerts: list[GenieAlert] = field(default_factory=list)
    creates: list[dict[str, Any]] = field(default_factory=list)
    closes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def problems(a: Any) -> list[str]:
        if not isinstance(a, dict):
            return ["not an object"]
        out: list[str] = []
        limits = {"message": 130, "alias": 512, "description": 15000, "entity": 512,
                  "source": 100, "user": 100, "note": 25000}
        if not isinstance(a.get("message"), str) or not a["message"]:
            out.append("Message can not be empty.")
        for name, most in limits.items():
            if name in a and not (isinstance(a[name], str) and len(a[name]) <= most):
                out.append(f"{name} must be a string of at most {most} characters")
        tags = a.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) and len(t) <= 50
                                                 for t in tags):
            out.append("tags must be strings of at most 50 characters")
        details = a.get("details", {})
        if not isinstance(details, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in details.items()):
            out.append("details must map strings to strings")
        if a.get("priority", "P3") not in ("P1", "P2", "P3", "P4", "P5"):
            out.append("priority must be one of P1..P5")
        allowed = {"message", "alias", "description", "responders", "visibleTo", "actions",
                   "tags", "details", "entity", "source", "priority", "user", "note"}
        return out + [f"unknown field {k!r}" for k in a if k not in allowed]

    def __call__(self, req: Received) -> tuple[int, str]:
        if _headers(req).get("authorization") != f"GenieKey {self.api_key}":
            return 401, json.dumps({"message": "Could not authenticate", "took": 0.0})
        body = _json(req)
        path, _, query = req.path.partition("?")
        with self.lock:
            if path == "/v2/alerts":
                errors = self.problems(body)
                if errors:
                    return 422, json.dumps({"message": "Request has errors",
                                            "errors": errors})
                self.creates.append(body)
                found = self._open(body.get("alias") or uuid.uuid4().hex)
                if found is None:
                    self.alerts.append(GenieAlert(body.get("alias") or "", body["message"],
                                                  body.get("priority", "P3")))
                else:
                    found.count += 1
            elif path.startswith("/v2/alerts/") and path.endswith("/close"):
                if query != "identifierType=alias":
                    return 422, json.dumps({"message": "identifierType must be alias here"})
                name = unquote(path[len("/v2/alerts/"):-len("/close")])
                self.closes.append((name, body))
                found = self._open(name)
                if found is not None:
                    found.open = False
            else:
                return 404, json.dumps({"message": f"no route {path}"})
        return 202, json.dumps({"result": "Request will be processed", "took": 0.01,
                                "requestId": str(uuid.uuid4())})

    def _open(self, name: str) -> GenieAlert | None:
        return next((a for a in self.alerts if a.alias == name and a.open), None)


@dataclass
class DiscordWebhook:
    """Execute Webhook (`POST /api/webhooks/{id}/{token}`): checks embeds against Discord's
    limits, answers 204 and keeps the messages it posted."""

    path: str
    posted: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def problems(m: Any) -> list[str]:
        if not isinstance(m, dict) or not (m.get("content") or m.get("embeds")):
            return ["Cannot send an empty message"]
        out: list[str] = []
        embeds = m.get("embeds", [])
        if not isinstance(embeds, list) or len(embeds) > 10:
            return ["embeds: at most 10"]
        total = 0
        for i, e in enumerate(embeds):
            limits = {"title": 256, "description": 4096}
            for name, most in limits.items():
                if name in e and not (isinstance(e[name], str) and len(e[name]) <= most):
                    out.append(f"embeds.{i}.{name}: at most {most} characters")
                total += len(e.get(name, ""))
            if "color" in e and not (isinstance(e["color"], int)
                                     and 0 <= e["color"] <= 0xFFFFFF):
                out.append(f"embeds.{i}.color: an integer 0..0xFFFFFF")
            if "timestamp" in e and not _iso(e["timestamp"]):
                out.append(f"embeds.{i}.timestamp: ISO 8601")
            if "url" in e and not str(e["url"]).startswith(("http://", "https://")):
                out.append(f"embeds.{i}.url: not a URL")
            fields = e.get("fields", [])
            if len(fields) > 25:
                out.append(f"embeds.{i}.fields: at most 25")
            for j, f in enumerate(fields):
                if not (isinstance(f.get("name"), str) and 0 < len(f["name"]) <= 256 and
                        isinstance(f.get("value"), str) and 0 < len(f["value"]) <= 1024):
                    out.append(f"embeds.{i}.fields.{j}: name 1..256, value 1..1024 characters")
                total += len(f.get("name", "")) + len(f.get("value", ""))
            total += len(e.get("footer", {}).get("text", ""))
        if total > 6000:
            out.append("embeds: more than 6000 characters in all")
        return out

    def __call__(self, req: Received) -> tuple[int, str]:
        if req.path != self.path:
            return 404, json.dumps({"message": "Unknown Webhook", "code": 10015})
        m = _json(req)
        errors = self.problems(m)
        if errors:
            return 400, json.dumps({"message": "Invalid Form Body", "code": 50035,
                                    "errors": errors})
        self.posted.append(m)
        return 204, ""


@dataclass
class TeamsWorkflow:
    """A Workflows "when a webhook request is received" trigger that posts Adaptive Cards:
    checks the message envelope and the card (1.4 elements only), answers 202."""

    cards: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def element_problems(where: str, e: Any) -> list[str]:
        if not isinstance(e, dict):
            return [f"{where}: not an object"]
        kind = e.get("type")
        if kind == "TextBlock":
            return [] if isinstance(e.get("text"), str) and e["text"] else [
                f"{where}: a TextBlock needs text"]
        if kind == "FactSet":
            facts = e.get("facts")
            if not isinstance(facts, list) or not facts or not all(
                    isinstance(f, dict) and isinstance(f.get("title"), str)
                    and isinstance(f.get("value"), str) for f in facts):
                return [f"{where}: a FactSet needs facts of title and value strings"]
            return []
        return [f"{where}: element type {kind!r} is not one this card uses"]

    def problems(self, m: Any) -> list[str]:
        if not isinstance(m, dict) or m.get("type") != "message":
            return ["type must be 'message'"]
        atts = m.get("attachments")
        if not isinstance(atts, list) or len(atts) != 1:
            return ["attachments must hold one card"]
        att = atts[0]
        if att.get("contentType") != "application/vnd.microsoft.card.adaptive":
            return ["contentType must be application/vnd.microsoft.card.adaptive"]
        c = att.get("content")
        if not isinstance(c, dict) or c.get("type") != "AdaptiveCard":
            return ["content must be an AdaptiveCard"]
        out = [] if c.get("version") == "1.4" else ["version must be 1.4"]
        body = c.get("body")
        if not isinstance(body, list) or not body:
            return [*out, "body must not be empty"]
        for i, e in enumerate(body):
            out += self.element_problems(f"body[{i}]", e)
        for i, a in enumerate(c.get("actions", [])):
            if a.get("type") != "Action.OpenUrl" or not str(a.get("url", "")).startswith(
                    ("http://", "https://")) or not a.get("title"):
                out.append(f"actions[{i}]: an Action.OpenUrl needs a title and an http(s) url")
        return out

    def __call__(self, req: Received) -> tuple[int, str]:
        m = _json(req)
        errors = self.problems(m)
        if errors:
            return 400, json.dumps({"error": {"code": "InvalidRequestContent",
                                              "message": "; ".join(errors)}})
        self.cards.append(m["attachments"][0]["content"])
        return 202, ""
