"""Tenants and the people and keys that act for them."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, String, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col, uuid_pk

DEFAULT_MESH_SETTINGS: dict[str, Any] = {
    "enabled": True,
    "rate_hz": 10,
    "payload_bytes": 1024,
    "timeout_ms": 1000,
    # Each agent traces the path to each peer this often (spread over the interval), and at
    # once when the server asks (a level shift, rising loss, an alert): docs/paths.md.
    "path_trace_interval_s": 600,
    "path_trace_proto": "tcp",
}


class Org(Base):
    __tablename__ = "orgs"

    id: Mapped[uuid.UUID] = uuid_pk()
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    raw_retention_days: Mapped[int] = mapped_column(server_default=text("14"), default=14)
    rollup_retention_days: Mapped[int] = mapped_column(server_default=text("400"), default=400)
    mesh_settings: Mapped[dict[str, Any]] = mapped_column(
        JSONB, server_default=text("'{}'::jsonb"), default=dict
    )
    created_at: Mapped[datetime] = created_at_col()


class User(Base):
    __tablename__ = "users"

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(20), server_default="admin", default="admin")
    created_at: Mapped[datetime] = created_at_col()


class UserSession(Base):
    """Server-side login session; the cookie holds the token, the row holds its hash."""

    __tablename__ = "user_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"),
                                               index=True)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = created_at_col()
    # The absolute timeout as it was at login; a lower setting later applies too.
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    # Moved forward at most once a minute: the idle timeout counts from here.
    last_seen_at: Mapped[datetime] = created_at_col()


# What an API key may do in its org: "admin" what an admin may (every key made before scopes
# existed), "read" what a viewer may (a scrape job, a dashboard).
API_KEY_SCOPES = ("admin", "read")


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(20))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # "admin" acts as an admin of the org; "read" reads it as a viewer does (API_KEY_SCOPES).
    scope: Mapped[str] = mapped_column(String(10), server_default="admin", default="admin")
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = created_at_col()
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AccountLink(Base):
    """A single-use link sent by mail: an invitation (sets the password of a new user) or a
    password reset (of an existing one); the link holds the token, the row its hash."""

    __tablename__ = "account_links"

    id: Mapped[uuid.UUID] = uuid_pk()
    purpose: Mapped[str] = mapped_column(String(10))  # "invite" | "reset"
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    email: Mapped[str] = mapped_column(String(320))
    role: Mapped[str] = mapped_column(String(20))
    user_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = created_at_col()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class OidcConfig(Base):
    """An org's own OpenID Connect provider; the client secret is stored encrypted."""

    __tablename__ = "oidc_configs"

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              primary_key=True)
    issuer_url: Mapped[str] = mapped_column(String(500))
    client_id: Mapped[str] = mapped_column(String(300))
    client_secret_enc: Mapped[str] = mapped_column(Text)
    default_role: Mapped[str] = mapped_column(String(20))
    # Lower-case domains whose addresses may sign in; empty: any the provider verified.
    allowed_domains: Mapped[list[str]] = mapped_column(
        JSONB, server_default=text("'[]'::jsonb"), default=list)
    created_at: Mapped[datetime] = created_at_col()
    updated_at: Mapped[datetime] = created_at_col()


class OidcLogin(Base):
    """A sign-in started at the provider: what the callback needs to finish it, once."""

    __tablename__ = "oidc_logins"

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    code_verifier: Mapped[str] = mapped_column(String(200))
    nonce: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = created_at_col()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
