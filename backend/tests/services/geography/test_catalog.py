"""The region catalog and the physics of distance: every listed place is well formed, the
places the demo and the study tables name are in it, regions of different providers in one
city share a metro, and great-circle distances are true (known figures, and the properties
any distance has)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from stormwatch.devtools.demo import FLEET
from stormwatch.services.geography import CATALOG, floor_rtt_us, great_circle_km, places_of
from stormwatch.services.geography.catalog import EARTH_RADIUS_KM, Place

REPO = Path(__file__).resolve().parents[4]
points = st.tuples(st.floats(-90, 90), st.floats(-180, 180))


def test_every_place_has_a_metro_and_coordinates_on_the_globe():
    assert len(CATALOG) >= 80
    for (provider, region), p in CATALOG.items():
        assert (p.provider, p.region) == (provider, region)
        assert provider in ("aws", "azure", "gcp")
        assert p.location and p.metro == p.metro.lower() and " " not in p.metro
        assert -90 <= p.lat <= 90 and -180 <= p.lon <= 180


def test_the_demo_fleet_and_the_emulators_table_are_placed():
    table = json.loads((REPO / "agents/testbed/wanem/rtt_table.json").read_text())
    keys = {tuple(r["key"].split("/")) for r in table["regions"]}
    keys |= {(a.provider, a.region) for a in FLEET}
    assert keys <= CATALOG.keys(), keys - CATALOG.keys()


@pytest.mark.parametrize(("a", "b"), [
    (("aws", "eu-west-1"), ("azure", "northeurope")),  # Dublin
    (("aws", "us-east-1"), ("gcp", "us-east4")),  # Northern Virginia
    (("aws", "ap-southeast-1"), ("gcp", "asia-southeast1")),  # Singapore
    (("aws", "eu-west-2"), ("azure", "uksouth")),  # London
])
def test_regions_of_different_providers_in_one_city_share_its_metro(a, b):
    pa, pb = CATALOG[a], CATALOG[b]
    assert pa.metro == pb.metro
    assert great_circle_km((pa.lat, pa.lon), (pb.lat, pb.lon)) < 50


@pytest.mark.parametrize(("a", "b", "km"), [
    # Independent figures: London-New York 5,570 km, Sydney-Singapore 6,300 km,
    # Paris-Frankfurt 480 km (great-circle, city centres).
    ((51.51, -0.13), (40.71, -74.01), 5570),
    ((-33.87, 151.21), (1.35, 103.82), 6300),
    ((48.86, 2.35), (50.11, 8.68), 480),
])
def test_great_circle_distances_match_known_figures(a, b, km):
    assert great_circle_km(a, b) == pytest.approx(km, rel=0.01)


def test_the_floor_is_a_millisecond_of_round_trip_per_100_km():
    assert floor_rtt_us(100) == pytest.approx(1000)
    dublin, virginia = CATALOG[("aws", "eu-west-1")], CATALOG[("aws", "us-east-1")]
    floor = floor_rtt_us(great_circle_km((dublin.lat, dublin.lon), (virginia.lat, virginia.lon)))
    # Every RTT measured between them is above it: the demo's table has 80.5 ms.
    assert 50_000 < floor < 56_000


@given(points, points, points)
@example((0.0, 0.0), (0.0, 180.0), (45.0, 90.0))  # antipodes: the largest distance there is
def test_distance_is_symmetric_non_negative_bounded_and_obeys_the_triangle(a, b, c):
    ab, ba = great_circle_km(a, b), great_circle_km(b, a)
    assert ab == pytest.approx(ba, abs=1e-6)
    # At most half the mean circumference, pi * 6371.0088 = 20015.114 km (antipodes; a bound
    # of 20015.1 failed on them in a clean-clone run).
    assert 0 <= ab <= math.pi * EARTH_RADIUS_KM + 1e-6
    assert great_circle_km(a, a) == pytest.approx(0, abs=1e-6)
    assert great_circle_km(a, c) <= ab + great_circle_km(b, c) + 1e-6


def test_an_orgs_place_adds_to_the_catalog_or_takes_the_place_of_its_entry():
    office = Place("onprem", "fra-office", "Frankfurt office", "frankfurt", 50.1, 8.7, "org")
    moved = Place("aws", "eu-west-1", "Ireland, our figure", "dublin", 53.4, -6.3, "org")
    merged = places_of([office, moved])
    assert merged[("onprem", "fra-office")] == office
    assert merged[("aws", "eu-west-1")] == moved
    assert CATALOG[("aws", "eu-west-1")].source == "catalog"
    assert len(merged) == len(CATALOG) + 1
