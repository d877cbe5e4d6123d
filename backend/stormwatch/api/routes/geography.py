"""Places: the region catalog (services/geography/regions.csv) and the org's own places,
which add regions the catalog lacks (on-premises sites, other clouds) or correct it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from fastapi.responses import Response
from sqlalchemy import select

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, SessionDep
from stormwatch.core.db import lock_row_key
from stormwatch.models.agent import Agent
from stormwatch.models.geography import OrgPlace
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.geography import PlaceIn, PlacePublic, PlacesResponse
from stormwatch.services import audit
from stormwatch.services.geography.catalog import CATALOG_AS_OF, FIBRE_RTT_US_PER_KM, Place
from stormwatch.services.geography.places import load_places

router = APIRouter(prefix="/geography", tags=["geography"])

ProviderPath = Annotated[str, Path(min_length=1, max_length=50, pattern=r"^[A-Za-z0-9._-]+$")]
RegionPath = Annotated[str, Path(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")]


def _public(p: Place) -> PlacePublic:
    return PlacePublic(provider=p.provider, region=p.region, location=p.location,
                       metro=p.metro, lat=p.lat, lon=p.lon, source=p.source)


def _audited(row: OrgPlace | None) -> dict[str, object] | None:
    if row is None:
        return None
    return {"location": row.location, "metro": row.metro, "lat": row.lat, "lon": row.lon}


@router.get("/places", response_model=PlacesResponse,
            summary="Where each provider's regions stand: the catalog and the org's own places")
async def list_places(principal: OrgPrincipalDep, session: SessionDep) -> PlacesResponse:
    places = await load_places(session, principal.org_id)
    regions = (await session.execute(
        select(Agent.provider, Agent.region).where(Agent.org_id == principal.org_id)
        .distinct())).all()
    unplaced = sorted({(p, r) for p, r in regions if r and (p, r) not in places})
    return PlacesResponse(
        catalog_as_of=CATALOG_AS_OF, fibre_rtt_us_per_km=FIBRE_RTT_US_PER_KM,
        places=[_public(p) for _, p in sorted(places.items())],
        unplaced=[{"provider": p, "region": r} for p, r in unplaced])


@router.put("/places/{provider}/{region}", response_model=PlacePublic,
            summary="Place a region (add one the catalog lacks, or correct the catalog's)")
async def put_place(provider: ProviderPath, region: RegionPath, body: PlaceIn,
                    principal: AdminDep, session: SessionDep,
                    actor: AuditActorDep) -> PlacePublic:
    await lock_row_key(session, "org_places", principal.org_id, provider, region)
    row = await session.get(OrgPlace, (principal.org_id, provider, region))
    before = _audited(row)
    if row is None:
        row = OrgPlace(org_id=principal.org_id, provider=provider, region=region)
        session.add(row)
    row.location, row.metro, row.lat, row.lon = body.location, body.metro, body.lat, body.lon
    changes = audit.diff(before, _audited(row))
    if changes:
        audit.record(session, principal.org_id, actor,
                     "place.create" if before is None else "place.update", "place",
                     f"{provider}/{region}", body.location, changes)
    await session.commit()
    return _public(Place(provider, region, body.location, body.metro, body.lat, body.lon,
                         "org"))


@router.delete("/places/{provider}/{region}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND,
               summary="Remove the org's own place (the catalog's, if any, applies again)")
async def delete_place(provider: ProviderPath, region: RegionPath, principal: AdminDep,
                       session: SessionDep, actor: AuditActorDep) -> Response:
    await lock_row_key(session, "org_places", principal.org_id, provider, region)
    row = await session.get(OrgPlace, (principal.org_id, provider, region))
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"the org has no place of its own for {provider}/{region}")
    before = _audited(row)
    await session.delete(row)
    audit.record(session, principal.org_id, actor, "place.delete", "place",
                 f"{provider}/{region}", row.location, audit.diff(before, None))
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
