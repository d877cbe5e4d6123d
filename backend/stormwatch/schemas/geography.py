"""Places: where each (provider, region) stands (`/api/v1/geography/...`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PlaceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    location: str = Field(min_length=1, max_length=200,
                          description="where the region is, in words (e.g. 'Frankfurt office')")
    metro: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$",
                       description="the city it stands in, lowercase with dashes; regions of "
                       "any provider in one metro are compared as one place (e.g. dublin)")
    lat: float = Field(ge=-90, le=90, description="latitude, degrees north")
    lon: float = Field(ge=-180, le=180, description="longitude, degrees east")


class PlacePublic(BaseModel):
    provider: str
    region: str
    location: str
    metro: str
    lat: float
    lon: float
    source: Literal["catalog", "org"] = Field(
        description="catalog: the providers' published list; org: added or corrected by the org")


class PlacesResponse(BaseModel):
    catalog_as_of: str = Field(description="when the catalog was taken from the providers' "
                               "pages (backend/stormwatch/services/geography/regions.csv)")
    fibre_rtt_us_per_km: float = Field(
        description="round trip per km of great-circle distance used for the physical floor")
    places: list[PlacePublic]
    unplaced: list[dict[str, str]] = Field(
        description="provider and region of agents of the org that no place covers")
