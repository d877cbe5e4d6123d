"""Channel CRUD, the channel a row describes, and test sends. No FastAPI here."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core import egress
from stormwatch.core.security import decrypt_secret, encrypt_secret
from stormwatch.models import NotificationChannel
from stormwatch.notifications.base import Channel, Message
from stormwatch.notifications.registry import ChannelKind, kind, kind_of_config
from stormwatch.schemas.notifications import (
    ChannelCreate,
    ChannelCreated,
    ChannelPublic,
    ChannelUpdate,
)
from stormwatch.services.owned import get_owned


class ChannelNotFound(Exception):
    pass


class ChannelConflict(Exception):
    pass


class Invalid(Exception):
    """`errors` are FastAPI-style {loc, msg, type} items naming the fields."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors


async def _check_egress(cfg: BaseModel) -> None:
    """Save-time check of the destination against the egress policy: a 422 naming the field."""
    where = kind_of_config(cfg).destination(cfg)
    try:
        if where.url is not None:
            await egress.check_url(where.url)
        elif where.host is not None and where.port is not None:
            await egress.check_destination(where.host, where.port)
    except egress.EgressRefused as exc:
        raise Invalid([{"loc": ["body", "config", where.field], "msg": exc.detail,
                        "type": "egress_refused"}]) from exc


def _split(k: ChannelKind, cfg: BaseModel, old_secrets: dict[str, str]
           ) -> tuple[dict[str, Any], dict[str, str]]:
    """Stored public config and secrets of a validated config."""
    data = cfg.model_dump(mode="json")
    secrets = dict(old_secrets)
    for name in k.secret_fields:
        data.pop(name, None)
        raw = getattr(cfg, name, None)
        if raw is None:  # left out: the stored one stays
            continue
        value = raw.get_secret_value() if isinstance(raw, SecretStr) else str(raw)
        if value:
            secrets[name] = value
        else:  # given empty: the stored one goes
            secrets.pop(name, None)
    return data, secrets


def secret_values(row: NotificationChannel) -> dict[str, str]:
    """The channel's decrypted secrets (password, url, signing_secret): for comparison only."""
    return _secrets(row)


def _secrets(row: NotificationChannel) -> dict[str, str]:
    if not row.secret_ciphertext:
        return {}
    loaded: dict[str, str] = json.loads(decrypt_secret(row.secret_ciphertext))
    return loaded


def _public_config(row: NotificationChannel) -> dict[str, object]:
    cfg: dict[str, object] = {k: v for k, v in row.config.items() if k != "ca_cert_pem"}
    cfg["has_ca_cert"] = bool(row.config.get("ca_cert_pem"))
    cfg.update(kind(row.kind).public_hints(_secrets(row)))
    return cfg


def public(row: NotificationChannel) -> ChannelPublic:
    return ChannelPublic(id=row.id, name=row.name, kind=row.kind,  # type: ignore[arg-type]
                         enabled=row.enabled, config=_public_config(row),
                         created_at=row.created_at, updated_at=row.updated_at)


async def _name_free(session: AsyncSession, org_id: uuid.UUID, name: str,
                     other_than: uuid.UUID | None = None) -> None:
    q = select(NotificationChannel.id).where(NotificationChannel.org_id == org_id,
                                             NotificationChannel.name == name)
    found = await session.scalar(q)
    if found is not None and found != other_than:
        raise ChannelConflict(f"a channel named {name!r} exists")


async def create_channel(session: AsyncSession, org_id: uuid.UUID, body: ChannelCreate,
                         created_by: uuid.UUID | None) -> ChannelCreated:
    await _name_free(session, org_id, body.name)
    await _check_egress(body.config)
    k = kind(body.kind)
    config, secrets = _split(k, body.config, {})
    signing_secret = None
    if k.issued_secret is not None:
        name, make = k.issued_secret
        signing_secret = secrets[name] = make()
    now = datetime.now(UTC)
    row = NotificationChannel(
        id=uuid.uuid4(), org_id=org_id, name=body.name, kind=body.kind, config=config,
        secret_ciphertext=encrypt_secret(json.dumps(secrets)) if secrets else None,
        enabled=body.enabled, created_by=created_by, created_at=now, updated_at=now)
    session.add(row)
    await session.flush()
    return ChannelCreated(**public(row).model_dump(), signing_secret=signing_secret)


async def get_row(session: AsyncSession, org_id: uuid.UUID,
                  channel_id: uuid.UUID) -> NotificationChannel:
    return await get_owned(session, NotificationChannel, org_id, channel_id, ChannelNotFound())


async def list_channels(session: AsyncSession, org_id: uuid.UUID) -> list[ChannelPublic]:
    rows = (await session.scalars(select(NotificationChannel).where(
        NotificationChannel.org_id == org_id).order_by(NotificationChannel.name))).all()
    return [public(r) for r in rows]


async def update_channel(session: AsyncSession, org_id: uuid.UUID, channel_id: uuid.UUID,
                         body: ChannelUpdate) -> ChannelCreated:
    row = await get_row(session, org_id, channel_id)
    if body.name is not None and body.name != row.name:
        await _name_free(session, org_id, body.name, row.id)
        row.name = body.name
    if body.enabled is not None:
        row.enabled = body.enabled
    secrets = _secrets(row)
    k = kind(row.kind)
    if body.config is not None:
        merged: dict[str, Any] = {**row.config, **body.config}
        for name in k.secret_fields:
            # A required secret left out is the stored one; an optional one stays unset.
            if name not in body.config and k.config_model.model_fields[name].is_required():
                merged[name] = secrets.get(name, "")
        try:
            cfg = TypeAdapter(k.config_model).validate_python(merged)
        except ValidationError as exc:
            raise Invalid([{"loc": ["body", "config", *e["loc"]], "msg": e["msg"],
                                   "type": e["type"]} for e in exc.errors()]) from exc
        await _check_egress(cfg)
        row.config, secrets = _split(k, cfg, secrets)
    signing_secret = None
    if body.rotate_signing_secret:
        if k.issued_secret is None:
            raise Invalid([{"loc": ["body", "rotate_signing_secret"],
                                   "msg": "only webhook channels have a signing secret",
                                   "type": "value_error"}])
        name, make = k.issued_secret
        signing_secret = secrets[name] = make()
    row.secret_ciphertext = encrypt_secret(json.dumps(secrets)) if secrets else None
    row.updated_at = datetime.now(UTC)
    await session.flush()
    return ChannelCreated(**public(row).model_dump(), signing_secret=signing_secret)


async def delete_channel(session: AsyncSession, org_id: uuid.UUID, channel_id: uuid.UUID) -> None:
    row = await get_row(session, org_id, channel_id)
    await session.delete(row)
    await session.flush()


async def missing_channel_ids(session: AsyncSession, org_id: uuid.UUID,
                              ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """The ids that are not channels of this org (alert rules validate channel_ids with it)."""
    if not ids:
        return []
    found = set((await session.scalars(select(NotificationChannel.id).where(
        NotificationChannel.org_id == org_id, NotificationChannel.id.in_(ids)))).all())
    return [i for i in ids if i not in found]


def build_channel(kind_name: str, config: dict[str, Any], secret_ciphertext: str | None
                  ) -> Channel:
    """The sender for a stored channel (also used by the worker on plain rows)."""
    k = kind(kind_name)
    secrets: dict[str, str] = (json.loads(decrypt_secret(secret_ciphertext))
                               if secret_ciphertext else {})
    return k.build(config, secrets)


def test_message(org_id: uuid.UUID, channel_name: str) -> Message:
    return Message(kind="test", org_id=str(org_id), rule_id=None,
                   rule_name=f"Test of channel {channel_name}", severity="info",
                   description="A test message from Stormwatch: this channel works.",
                   condition="", alerts=(), link=None, created_at=datetime.now(UTC))
