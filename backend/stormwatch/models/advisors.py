"""An org's own prices (overriding the shipped catalog) and cached advisor answers."""

import uuid
from datetime import date, datetime
from typing import Any

from sqlalchemy import CheckConstraint, Date, DateTime, Float, ForeignKey, String, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col


class PricingOverride(Base):
    """One figure an org set itself; it wins over the shipped figure of the same key, whatever
    catalog version ships later."""

    __tablename__ = "pricing_overrides"
    __table_args__ = (CheckConstraint("price_usd >= 0", name="price_usd"),)

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              primary_key=True)
    provider: Mapped[str] = mapped_column(String(50), primary_key=True)
    region: Mapped[str] = mapped_column(String(100), primary_key=True)
    item: Mapped[str] = mapped_column(String(50), primary_key=True)
    price_usd: Mapped[float] = mapped_column(Float)
    effective_date: Mapped[date] = mapped_column(Date)
    source: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = created_at_col()


class AdvisorResult(Base):
    """An advisor's answer for one input (hashed): computed once, read many times."""

    __tablename__ = "advisor_results"
    __table_args__ = (CheckConstraint("status IN ('pending', 'done', 'failed')", name="status"),)

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              primary_key=True)
    advisor: Mapped[str] = mapped_column(String(30), primary_key=True)
    input_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(String(10))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = created_at_col()
    computed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
