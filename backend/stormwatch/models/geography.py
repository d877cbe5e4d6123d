"""An org's own places: regions the catalog does not list (on-premises sites, other clouds)
or where the org knows better (services/geography)."""

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, Float, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col


class OrgPlace(Base):
    __tablename__ = "org_places"
    __table_args__ = (
        CheckConstraint("lat BETWEEN -90 AND 90", name="lat"),
        CheckConstraint("lon BETWEEN -180 AND 180", name="lon"),
    )

    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              primary_key=True)
    provider: Mapped[str] = mapped_column(String(50), primary_key=True)
    region: Mapped[str] = mapped_column(String(100), primary_key=True)
    location: Mapped[str] = mapped_column(Text)
    metro: Mapped[str] = mapped_column(String(64))
    lat: Mapped[float] = mapped_column(Float)
    lon: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = created_at_col()
    updated_at: Mapped[datetime] = created_at_col()
