"""Each periodic job's run record (services/jobs.py writes it, health reads it)."""

from datetime import datetime

from sqlalchemy import DateTime, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base


class JobRun(Base):
    __tablename__ = "job_runs"

    job: Mapped[str] = mapped_column(String(200), primary_key=True)
    cadence_s: Mapped[int] = mapped_column(Integer)
    first_start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_success: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_failure: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    failures_in_a_row: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
