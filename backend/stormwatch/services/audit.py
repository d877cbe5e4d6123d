"""The org's audit log: one entry per created, changed or deleted piece of configuration,
written in the caller's transaction so a rolled-back change leaves none."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import Connection, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models import ApiKey, AuditEvent, User

MASK = "••••"
# Field names whose values are credentials wherever they appear; passwords are never kept.
SECRET_FIELDS = frozenset({"password", "signing_secret", "secret", "secrets", "token", "key",
                           "token_hash", "password_hash", "secret_ciphertext", "url",
                           "routing_key", "api_key", "bearer_token"})


@dataclass(frozen=True)
class Actor:
    kind: str  # "user" or "api_key"
    id: uuid.UUID | None
    label: str
    request_id: str | None = None


async def actor_for(session: AsyncSession, kind: str, user_id: uuid.UUID | None,
                    api_key_id: uuid.UUID | None, request_id: str | None) -> Actor:
    """The caller as the log names it: a user's email, an API key's name and prefix."""
    if kind == "user" and user_id is not None:
        email = await session.scalar(select(User.email).where(User.id == user_id))
        return Actor("user", user_id, str(email or user_id), request_id)
    if kind == "api_key" and api_key_id is not None:
        row = (await session.execute(select(ApiKey.name, ApiKey.prefix)
                                     .where(ApiKey.id == api_key_id))).first()
        label = f"{row[0]} ({row[1]}…)" if row else str(api_key_id)
        return Actor("api_key", api_key_id, label, request_id)
    return Actor(kind, None, kind, request_id)


def _plain(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)


def snapshot(value: Any) -> dict[str, Any]:
    """A JSON copy of a row's public form, taken before a change mutates the row."""
    plain = _plain(value)
    assert isinstance(plain, dict)
    return plain


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
         secret_fields: Iterable[str] = (), ignore: Iterable[str] = ()) -> dict[str, list[Any]]:
    """{field: [before, after]} of the fields that differ; a creation has before None, a
    deletion after None; credentials show as MASK."""
    secrets = SECRET_FIELDS | set(secret_fields)
    skip = {"id", "org_id", "created_at", "updated_at", *ignore}
    old, new = _plain(dict(before or {})), _plain(dict(after or {}))
    out: dict[str, list[Any]] = {}
    for field in sorted(set(old) | set(new)):
        if field in skip or field == "password_hash":
            continue
        was, now = old.get(field), new.get(field)
        if was == now:
            continue
        if field in secrets:
            was = None if was is None else MASK
            now = None if now is None else MASK
        out[field] = [was, now]
    return out


def record(session: AsyncSession, org_id: uuid.UUID, actor: Actor, action: str,
           target_type: str, target_id: Any, target_label: str | None,
           changes: Mapping[str, list[Any]] | None = None) -> AuditEvent:
    """Adds the entry to the session; it is committed (or rolled back) with the change."""
    event = AuditEvent(org_id=org_id, at=datetime.now(UTC), actor_kind=actor.kind,
                       actor_id=actor.id, actor_label=actor.label, action=action,
                       target_type=target_type,
                       target_id=None if target_id is None else str(target_id),
                       target_label=target_label or "", changes=dict(changes or {}),
                       request_id=actor.request_id)
    session.add(event)
    return event


def prune(conn: Connection, retention_days: int, now: datetime | None = None) -> int:
    """Deletes entries older than the retention; running it twice deletes nothing more."""
    cutoff = (now or datetime.now(UTC)) - timedelta(days=retention_days)
    return int(conn.execute(text("DELETE FROM audit_events WHERE at < :cutoff"),
                            {"cutoff": cutoff}).rowcount)
