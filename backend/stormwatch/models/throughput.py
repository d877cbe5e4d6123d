"""Throughput experiments (seed 004): an org's settings, the experiments the scheduler (or an
admin) planned, and the monthly budget ledger the scheduler writes what it refused into."""

import uuid
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col, utcnow

PROTOS = ("tcp", "udp")


class ThroughputSettings(Base):
    """One row per org that configured throughput; an org without a row uses the defaults
    (services/throughput/settings.py) and is not scheduled."""

    __tablename__ = "throughput_settings"

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean)
    monthly_budget_bytes: Mapped[int] = mapped_column(BigInteger)
    monthly_budget_usd: Mapped[float | None] = mapped_column(Float)
    price_per_gb_usd: Mapped[float | None] = mapped_column(Float)
    default_duration_s: Mapped[int] = mapped_column(Integer)
    default_proto: Mapped[str] = mapped_column(String(5))
    streams: Mapped[int] = mapped_column(Integer)
    udp_rate_bits_per_s: Mapped[int] = mapped_column(BigInteger)
    udp_datagram_bytes: Mapped[int] = mapped_column(Integer)
    experiments_per_pair_per_day: Mapped[int] = mapped_column(Integer)
    pairs: Mapped[list[dict[str, str]] | None] = mapped_column(JSONB)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ThroughputExperiment(Base):
    """An ordered pair's experiment: forward (initiator sends) for duration_s, then reverse.
    Its status is derived from the clock and the stored samples (services/throughput)."""

    __tablename__ = "throughput_experiments"
    __table_args__ = (
        # The scheduler's slots are deterministic: running it twice inserts nothing new.
        UniqueConstraint("org_id", "initiator_agent_id", "responder_agent_id", "proto",
                         "start_at", name="uq_throughput_experiments_slot"),
        CheckConstraint("proto IN ('tcp', 'udp')", name="proto"),
        CheckConstraint("duration_s > 0", name="duration_s"),
        Index("ix_throughput_experiments_time", "org_id", "start_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    initiator_agent_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    responder_agent_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    proto: Mapped[str] = mapped_column(String(5))
    start_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    duration_s: Mapped[int] = mapped_column(Integer)
    streams: Mapped[int] = mapped_column(Integer)
    udp_rate_bits_per_s: Mapped[int] = mapped_column(BigInteger)
    udp_datagram_bytes: Mapped[int] = mapped_column(Integer)
    # Secret shared by the two agents for the control handshake; only they ever see it.
    token: Mapped[str] = mapped_column(String(64))
    est_bytes: Mapped[int] = mapped_column(BigInteger)
    est_cost_usd: Mapped[float] = mapped_column(Float)
    origin: Mapped[str] = mapped_column(String(10))  # "scheduler" or "manual"
    # Per-direction statistics and transitions, written once the experiment is analysed:
    # long ranges read these instead of raw samples, which retention drops.
    results: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    analyzed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = created_at_col()


class ThroughputBudgetLedger(Base):
    """Per org and month: what the scheduler planned and what it refused on its last run."""

    __tablename__ = "throughput_budget_ledger"

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              primary_key=True)
    month: Mapped[date] = mapped_column(Date, primary_key=True)
    refused: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
