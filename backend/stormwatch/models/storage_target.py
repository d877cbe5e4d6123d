"""Object-storage targets an org measures (seed 000 §3), and which agents probe them."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col, utcnow, uuid_pk

STORAGE_PROVIDERS = ("s3", "azure", "gcs")


class StorageTarget(Base):
    """One bucket (or Azure container) probed by the assigned agents.

    Inline credentials are kept only as `credentials_ciphertext` (Fernet, keyed by
    SECRET_KEY); `credentials_ref` holds the non-secret part (env-variable names, a path).
    """

    __tablename__ = "storage_targets"
    __table_args__ = (
        UniqueConstraint("org_id", "name"),
        CheckConstraint("provider IN ('s3', 'azure', 'gcs')", name="provider"),
        CheckConstraint("credentials_source IN ('env', 'file', 'inline', 'none')",
                        name="credentials_source"),
        CheckConstraint("interval_s BETWEEN 10 AND 86400", name="interval_s"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(10))
    endpoint: Mapped[str] = mapped_column(String(500), default="", server_default="")
    region: Mapped[str] = mapped_column(String(100), default="", server_default="")
    bucket: Mapped[str] = mapped_column(String(255))
    prefix: Mapped[str] = mapped_column(String(500), default="stormwatch-probe/",
                                        server_default="stormwatch-probe/")
    path_style: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    interval_s: Mapped[int] = mapped_column(Integer, default=600, server_default=text("600"))
    op_timeout_ms: Mapped[int] = mapped_column(Integer, default=120_000,
                                               server_default=text("120000"))
    contents: Mapped[list[str]] = mapped_column(JSONB)
    sizes_bytes: Mapped[dict[str, Any]] = mapped_column(JSONB)
    variants: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict,
                                                     server_default=text("'{}'::jsonb"))
    credentials_source: Mapped[str] = mapped_column(String(10))
    credentials_ref: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict,
                                                            server_default=text("'{}'::jsonb"))
    credentials_ciphertext: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default="true")
    assign_all: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    created_at: Mapped[datetime] = created_at_col()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(),
                                                 default=utcnow, onupdate=utcnow)


class StorageTargetAgent(Base):
    """Assignment of a target to one agent (when the target is not on every agent)."""

    __tablename__ = "storage_target_agents"

    target_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("storage_targets.id", ondelete="CASCADE"), primary_key=True)
    agent_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True, index=True)
