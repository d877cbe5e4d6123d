"""An org's push of its measured distributions to an OpenTelemetry collector (OTLP/HTTP)."""

import uuid
from datetime import datetime

from sqlalchemy import ARRAY, Boolean, CheckConstraint, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy import text as sql
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col


class OtlpExport(Base):
    """One per org. `headers_ciphertext` (Fernet, keyed by SECRET_KEY) holds the request
    headers as JSON (a collector's API key); `header_names` what may be shown of them."""

    __tablename__ = "otlp_exports"
    __table_args__ = (
        CheckConstraint("level IN ('region', 'pair')", name="level"),
        CheckConstraint("interval_s BETWEEN 10 AND 3600", name="interval_s"),
    )

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              primary_key=True)
    endpoint_url: Mapped[str] = mapped_column(Text)
    headers_ciphertext: Mapped[str | None] = mapped_column(Text)
    header_names: Mapped[list[str]] = mapped_column(
        ARRAY(Text), default=list, server_default=sql("'{}'::text[]"))
    level: Mapped[str] = mapped_column(String(10), default="region", server_default="region")
    kinds: Mapped[list[str]] = mapped_column(ARRAY(Text))
    interval_s: Mapped[int] = mapped_column(Integer, default=60, server_default=sql("60"))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sql("true"))
    last_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_success_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    failures_in_a_row: Mapped[int] = mapped_column(Integer, default=0, server_default=sql("0"))
    last_data_points: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = created_at_col()
    updated_at: Mapped[datetime] = created_at_col()
