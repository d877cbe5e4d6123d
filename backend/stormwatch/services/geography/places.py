"""An org's places: the catalog with the org's own added or put in its place, and the metro
and physical floor of the fleet's paths (services/geography/catalog.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models.geography import OrgPlace
from stormwatch.services.geography.catalog import (
    MIN_STRETCH_KM,
    Place,
    distance_km,
    floor_rtt_us,
    places_of,
)


async def load_places(session: AsyncSession, org_id: uuid.UUID) -> dict[tuple[str, str], Place]:
    rows = (await session.execute(select(OrgPlace).where(OrgPlace.org_id == org_id))).scalars()
    return places_of(Place(r.provider, r.region, r.location, r.metro, r.lat, r.lon, "org")
                     for r in rows)


@dataclass(frozen=True)
class Geography:
    """Where (provider, region) pairs stand, for one org."""

    places: Mapping[tuple[str, str], Place]

    def place(self, provider: str, region: str) -> Place | None:
        return self.places.get((provider, region))

    def metro(self, provider: str, region: str) -> str:
        """The metro of a region, or the region itself where the org has not placed it."""
        p = self.place(provider, region)
        return p.metro if p is not None else region

    def floor_us(self, a: tuple[str, str], b: tuple[str, str]) -> float | None:
        """The physical floor between two (provider, region) places, or None where either
        is unplaced or they lie under MIN_STRETCH_KM apart (a ratio to it says nothing)."""
        pa, pb = self.places.get(a), self.places.get(b)
        if pa is None or pb is None:
            return None
        km = distance_km(pa, pb)
        return floor_rtt_us(km) if km >= MIN_STRETCH_KM else None

    def metro_floors_us(self, metros: Iterable[str]) -> dict[tuple[str, str], float]:
        """The physical floor between every two of these metros that are placed (keyed in
        sorted order), from the first place listed in each metro (places of one metro lie
        within a few km of each other)."""
        wanted = set(metros)
        where: dict[str, Place] = {}
        for p in self.places.values():
            if p.metro in wanted:
                where.setdefault(p.metro, p)
        metros = sorted(where)
        return {(a, b): floor_rtt_us(distance_km(where[a], where[b]))
                for i, a in enumerate(metros) for b in metros[i + 1:]}


async def load_geography(session: AsyncSession, org_id: uuid.UUID) -> Geography:
    return Geography(await load_places(session, org_id))
