"""The region catalog and the physics of distance.

A round trip between two places cannot be faster than light in fibre over the great circle
between them, there and back: light in silica fibre travels at about c / 1.47, 204,000 km/s,
so 9.8 µs of round trip per km, and the floor used here is the rounder 10 µs per km ("about
1 ms of RTT per 100 km"). Real routes follow cables and cross routers, so a measured RTT is
always above the floor; how far above (the stretch, RTT / floor) is what the stretch
analysis and the detour rule read."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# Mean Earth radius (IUGG): the great-circle formula's error against the ellipsoid (< 0.5%)
# is far below what routes add.
EARTH_RADIUS_KM = 6371.0088
FIBRE_RTT_US_PER_KM = 10.0
# Regions closer than this share a metro: their floor is too small to divide by.
MIN_STRETCH_KM = 50.0
# When regions.csv was taken from the providers' pages.
CATALOG_AS_OF = "2026-11"


@dataclass(frozen=True)
class Place:
    provider: str
    region: str
    location: str  # the provider's (or the org's) own name for where it is
    metro: str  # the city it stands in, shared across providers
    lat: float
    lon: float
    source: Literal["catalog", "org"] = "catalog"  # org: one the org added or corrected


def great_circle_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Haversine distance between two (lat, lon) points in degrees."""
    lat1, lon1, lat2, lon2 = map(math.radians, (*a, *b))
    h = (math.sin((lat2 - lat1) / 2) ** 2
         + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2)
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def distance_km(a: Place, b: Place) -> float:
    return great_circle_km((a.lat, a.lon), (b.lat, b.lon))


def floor_rtt_us(distance_km: float) -> float:
    """The fastest round trip physics allows over distance_km of fibre, each way."""
    return distance_km * FIBRE_RTT_US_PER_KM


def _load(path: Path) -> dict[tuple[str, str], Place]:
    with path.open(encoding="utf-8") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        places = {}
        for r in rows:
            place = Place(r["provider"], r["region"], r["location"], r["metro"],
                          float(r["lat"]), float(r["lon"]))
            if (place.provider, place.region) in places:
                raise ValueError(f"{path}: {place.provider}/{place.region} is listed twice")
            places[(place.provider, place.region)] = place
    return places


CATALOG: Mapping[tuple[str, str], Place] = _load(Path(__file__).with_name("regions.csv"))


def places_of(org_places: Iterable[Place]) -> dict[tuple[str, str], Place]:
    """The catalog with an org's own places added, or put in place of the catalog's."""
    merged = dict(CATALOG)
    for p in org_places:
        merged[(p.provider, p.region)] = p
    return merged
