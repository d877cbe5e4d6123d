"""Agents, how they enroll, and the topology class of every pair."""

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col, uuid_pk

TOPOLOGY_CLASSES = (
    "self",
    "same_subnet",
    "cross_subnet",
    "cross_az",
    "cross_region",
    "cross_provider",
)


class EnrollmentToken(Base):
    __tablename__ = "enrollment_tokens"

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(20))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = created_at_col()
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Agent(Base):
    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(50), default="", server_default="")
    region: Mapped[str] = mapped_column(String(100), default="", server_default="")
    zone: Mapped[str] = mapped_column(String(100), default="", server_default="")
    subnet: Mapped[str] = mapped_column(String(200), default="", server_default="")
    instance_type: Mapped[str] = mapped_column(String(100), default="", server_default="")
    private_ip: Mapped[str] = mapped_column(String(64), default="", server_default="")
    public_ip: Mapped[str] = mapped_column(String(64), default="", server_default="")
    mesh_address: Mapped[str] = mapped_column(String(300), default="", server_default="")
    # host:port of the agent's throughput control listener; "" when the probe is off.
    throughput_address: Mapped[str] = mapped_column(String(300), default="",
                                                    server_default="")
    agent_version: Mapped[str] = mapped_column(String(50), default="", server_default="")
    token_prefix: Mapped[str] = mapped_column(String(20))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    enrolled_with: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("enrollment_tokens.id", ondelete="SET NULL")
    )
    first_seen: Mapped[datetime] = created_at_col()
    last_seen: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AgentPair(Base):
    """Topology class of an ordered (src, dst) pair, derived from both agents' metadata."""

    __tablename__ = "agent_pairs"

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    src_agent_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    dst_agent_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    topology_class: Mapped[str] = mapped_column(String(20))


class DeletedAgent(Base):
    """An agent the org deleted, remembered so its peers' samples about it are set aside,
    its token is told it was deleted, and analyses still name it."""

    __tablename__ = "deleted_agents"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(50), default="", server_default="")
    region: Mapped[str] = mapped_column(String(100), default="", server_default="")
    zone: Mapped[str] = mapped_column(String(100), default="", server_default="")
    token_hash: Mapped[str] = mapped_column(String(64), index=True)
    deleted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
