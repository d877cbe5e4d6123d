"""Channel CRUD, the channel a row describes, and test sends. No FastAPI here."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, TypeAdapter, ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core import egress
from stormwatch.core.security import decrypt_secret, encrypt_secret
from stormwatch.models import NotificationChannel
from stormwatch.notifications.base import Channel, Message
from stormwatch.notifications.email import EmailChannel, EmailConfig
from stormwatch.notifications.slack import SlackChannel
from stormwatch.notifications.webhook import WebhookChannel, new_signing_secret
from stormwatch.schemas.notifications import (
    ChannelCreate,
    ChannelCreated,
    ChannelPublic,
    ChannelUpdate,
    EmailConfigIn,
    SlackConfigIn,
    WebhookConfigIn,
)
from stormwatch.services.owned import get_owned

CONFIG_MODELS: dict[str, type[BaseModel]] = {
    "email": EmailConfigIn, "slack": SlackConfigIn, "webhook": WebhookConfigIn}


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
    try:
        if isinstance(cfg, EmailConfigIn):
            where = "host"
            await egress.check_destination(cfg.host.strip("[]"), cfg.port)
        elif isinstance(cfg, SlackConfigIn | WebhookConfigIn):
            where = "url"
            await egress.check_url(str(cfg.url))
    except egress.EgressRefused as exc:
        raise Invalid([{"loc": ["body", "config", where], "msg": exc.detail,
                        "type": "egress_refused"}]) from exc


def _split(kind: str, cfg: BaseModel, old_secrets: dict[str, str]) -> tuple[dict[str, Any],
                                                                            dict[str, str]]:
    """Stored public config and secrets of a validated config."""
    data = cfg.model_dump(mode="json")
    secrets = dict(old_secrets)
    if kind == "email":
        data.pop("password", None)
        if isinstance(cfg, EmailConfigIn) and cfg.password is not None:
            # An empty password removes the stored one; leaving it out keeps it.
            if cfg.password.get_secret_value():
                secrets["password"] = cfg.password.get_secret_value()
            else:
                secrets.pop("password", None)
    if kind == "slack":
        secrets["url"] = data.pop("url")
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
    secrets = _secrets(row)
    if row.kind == "email":
        cfg["has_password"] = "password" in secrets
    if row.kind == "slack":
        parts = urlsplit(secrets.get("url", ""))
        # The path is the credential; the host says which workspace service it is.
        cfg["url_hint"] = f"{parts.scheme}://{parts.netloc}/…" if parts.netloc else ""
    if row.kind == "webhook":
        cfg["has_signing_secret"] = "signing_secret" in secrets
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
    config, secrets = _split(body.kind, body.config, {})
    signing_secret = None
    if body.kind == "webhook":
        signing_secret = new_signing_secret()
        secrets["signing_secret"] = signing_secret
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
    if body.config is not None:
        merged: dict[str, Any] = {**row.config, **body.config}
        if row.kind == "slack" and "url" not in body.config:
            merged["url"] = secrets.get("url", "")
        try:
            cfg = TypeAdapter(CONFIG_MODELS[row.kind]).validate_python(merged)
        except ValidationError as exc:
            raise Invalid([{"loc": ["body", "config", *e["loc"]], "msg": e["msg"],
                                   "type": e["type"]} for e in exc.errors()]) from exc
        await _check_egress(cfg)
        row.config, secrets = _split(row.kind, cfg, secrets)
    signing_secret = None
    if body.rotate_signing_secret:
        if row.kind != "webhook":
            raise Invalid([{"loc": ["body", "rotate_signing_secret"],
                                   "msg": "only webhook channels have a signing secret",
                                   "type": "value_error"}])
        signing_secret = new_signing_secret()
        secrets["signing_secret"] = signing_secret
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


def build_channel(kind: str, config: dict[str, Any], secret_ciphertext: str | None) -> Channel:
    """The sender for a stored channel (also used by the worker on plain rows)."""
    secrets: dict[str, str] = (json.loads(decrypt_secret(secret_ciphertext))
                               if secret_ciphertext else {})
    ca = config.get("ca_cert_pem") or None
    if kind == "email":
        return EmailChannel(EmailConfig(
            host=config["host"], port=int(config["port"]), security=config["security"],
            from_address=config["from_address"], to_addresses=tuple(config["to_addresses"]),
            username=config.get("username") or None, password=secrets.get("password"),
            ca_cert_pem=ca))
    if kind == "slack":
        return SlackChannel(secrets["url"], ca_cert_pem=ca)
    if kind == "webhook":
        return WebhookChannel(config["url"], secrets["signing_secret"], ca_cert_pem=ca)
    raise ValueError(f"unknown channel kind {kind!r}")


def test_message(org_id: uuid.UUID, channel_name: str) -> Message:
    return Message(kind="test", org_id=str(org_id), rule_id=None,
                   rule_name=f"Test of channel {channel_name}", severity="info",
                   description="A test message from Stormwatch: this channel works.",
                   condition="", alerts=(), link=None, created_at=datetime.now(UTC))
