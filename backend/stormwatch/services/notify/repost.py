"""The repost stage of Alertmanager channels: Alertmanager expects its clients to post firing
alerts again and again (each post is valid until its `endsAt`), as Prometheus does every
minute. Every minute, for each enabled Alertmanager channel, the alerts it was told about are
posted again as they stand now: firing ones valid for another few minutes, ones resolved in
the last `RESOLVED_RETENTION` with their resolution time.

This is state, not news: Alertmanager deduplicates by label set, so a repost notifies no one
anew, and nothing goes through the outbox (a failed repost is simply the next minute's).
Silences do not stop it: what was told stays true until the alert resolves."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, text

from stormwatch.core.config import get_settings
from stormwatch.notifications.alertmanager import (
    RESOLVED_RETENTION,
    AlertmanagerChannel,
    postable,
)
from stormwatch.notifications.base import DeliveryError
from stormwatch.notifications.render import alert_item, message
from stormwatch.services.alerts.definition import load_rules_by_id
from stormwatch.services.alerts.evidence import Evidence
from stormwatch.services.notify.channels import build_channel

log = logging.getLogger("stormwatch.notify")

# Alerts firing or lately resolved that an Alertmanager channel was sent a message about.
_TOLD = text(
    "SELECT DISTINCT c.id AS channel_id, c.config, c.secret_ciphertext, a.id, a.org_id, "
    "a.rule_id, a.group_key, a.state, a.started_at, a.resolved_at, a.evidence "
    "FROM alerts a "
    "JOIN notifications n ON n.alert_ids @> ARRAY[a.id] "
    "JOIN notification_deliveries d ON d.notification_id = n.id AND d.state = 'sent' "
    "JOIN notification_channels c ON c.id = d.channel_id AND c.kind = 'alertmanager' "
    "  AND c.enabled AND c.org_id = a.org_id "
    "WHERE a.state = 'firing' OR a.resolved_at > :since")


def repost(engine: Engine, now: datetime | None = None) -> dict[str, int]:
    """Posts each Alertmanager channel's told alerts as they stand; counts of posts by
    outcome ("sent", "failed")."""
    now = now or datetime.now(UTC)
    base_url = get_settings().public_base_url
    with engine.connect() as conn:
        rows = conn.execute(_TOLD, {"since": now - RESOLVED_RETENTION}).mappings().all()
        rules = load_rules_by_id(conn, {r["rule_id"] for r in rows})
    by_channel: dict[uuid.UUID, list[Any]] = defaultdict(list)
    for r in rows:
        if r["rule_id"] in rules:
            by_channel[r["channel_id"]].append(r)

    async def post(rs: list[Any]) -> str:
        first = rs[0]
        try:
            channel = build_channel("alertmanager", first["config"], first["secret_ciphertext"])
        except (ValueError, KeyError) as exc:  # e.g. SECRET_KEY changed since it was stored
            log.warning("Alertmanager channel %s unusable: %s", first["channel_id"], exc)
            return "failed"
        if not isinstance(channel, AlertmanagerChannel):
            raise TypeError(f"not an Alertmanager channel: {type(channel).__name__}")
        alerts: list[dict[str, Any]] = []
        groups: dict[tuple[uuid.UUID, str], list[Any]] = defaultdict(list)
        for r in rs:
            groups[(r["rule_id"], r["state"])].append(r)
        for (rule_id, state), grs in groups.items():
            items = [alert_item(r, Evidence.read(r["evidence"]), base_url) for r in grs]
            kind = "resolved" if state == "resolved" else "firing"
            alerts += postable(message(rules[rule_id], kind, items, now, base_url), "", now)
        try:
            await channel.post(alerts)
        except DeliveryError as exc:
            log.warning("repost of %d alerts to Alertmanager channel %s failed: %s",
                        len(alerts), first["channel_id"], exc.detail)
            return "failed"
        return "sent"

    async def run() -> list[str]:
        return list(await asyncio.gather(*(post(rs) for rs in by_channel.values())))

    counts: dict[str, int] = defaultdict(int)
    for outcome in asyncio.run(run()) if by_channel else []:
        counts[outcome] += 1
    return dict(counts)
