"""Geography: where each (provider, region) stands (its metro and coordinates, from the
catalog in regions.csv and the org's own places), how far apart two places are, and the
physical floor of a round trip between them."""

from stormwatch.services.geography.catalog import (
    CATALOG,
    FIBRE_RTT_US_PER_KM,
    Place,
    distance_km,
    floor_rtt_us,
    great_circle_km,
    places_of,
)

__all__ = ["CATALOG", "FIBRE_RTT_US_PER_KM", "Place", "distance_km", "floor_rtt_us",
           "great_circle_km", "places_of"]
