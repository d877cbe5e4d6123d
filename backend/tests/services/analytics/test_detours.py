"""Detours by physics and comparison (seed 004 §IV-B) on an RTT matrix of two providers over
four regions: one provider routes Europe-Asia through the US, the other goes direct; South
America-Asia is far but direct for both; one provider's US-Europe path is slow but no middle
region explains it."""

from __future__ import annotations

import pytest

from stormwatch.services.analytics.detours import PathRtt, find_detours

# Best direct medians (ms) between regions, the same for both providers unless overridden.
DIRECT_MS = {("us", "eu"): 75, ("us", "ap"): 215, ("us", "sa"): 115, ("eu", "ap"): 160,
             ("eu", "sa"): 190, ("ap", "sa"): 320}


def matrix(overrides: dict[tuple[str, str, str], float]) -> list[PathRtt]:
    paths = []
    for (a, b), ms in DIRECT_MS.items():
        for provider in ("aws", "gcp"):
            for s, d in ((a, b), (b, a)):
                rtt = overrides.get((provider, s, d), overrides.get((provider, d, s), ms))
                paths.append(PathRtt(s, d, provider, provider, rtt * 1000.0))
    return paths


def test_only_the_path_routed_through_a_middle_region_is_a_detour() -> None:
    # aws Europe<->Asia goes through the US: 75 + 215 = 290 ms; gcp goes direct in 160 ms.
    # aws US<->Europe is slow (120 ms) but no region lies on a 120 ms route between them.
    paths = matrix({("aws", "eu", "ap"): 288, ("aws", "us", "eu"): 120})
    found = find_detours(paths)
    assert {(d["src"], d["dst"], d["src_provider"]) for d in found} == {
        ("eu", "ap", "aws"), ("ap", "eu", "aws")}
    for d in found:
        assert d["via"] == "us"
        assert d["direct_us"] == 288_000
        assert d["via_us"] == pytest.approx(290_000)
        assert d["best_alternative_us"] == 160_000
        assert d["alternative"]["src_provider"] == "gcp"
        assert d["excess"] == pytest.approx(1.8)


def test_far_but_direct_paths_are_not_detours() -> None:
    # South America -> Asia (320 ms) is about South America -> US -> Asia (330 ms) and far
    # above South America's other destinations, but every path between them is as slow.
    found = find_detours(matrix({}))
    assert found == []


def test_a_direct_path_much_faster_than_the_route_is_not_a_detour_through_it() -> None:
    # 250 ms is slower than gcp's 160 ms, but 14% faster than the 290 ms through the US.
    paths = matrix({("aws", "eu", "ap"): 250})
    assert find_detours(paths) == []


def test_without_another_path_between_the_regions_nothing_is_judged() -> None:
    paths = [PathRtt("eu", "us", "aws", "aws", 75_000.0),
             PathRtt("us", "ap", "aws", "aws", 215_000.0),
             PathRtt("eu", "ap", "aws", "aws", 288_000.0)]
    assert find_detours(paths) == []


# Great-circle floors (µs of round trip) between three metros: London, N. Virginia, Singapore.
FLOORS_US = {("london", "northern-virginia"): 59_200.0, ("london", "singapore"): 108_500.0,
             ("northern-virginia", "singapore"): 155_400.0}


def metros(provider: str, london_singapore_ms: float) -> list[PathRtt]:
    regions = {"aws": {"london": "eu-west-2", "northern-virginia": "us-east-1",
                       "singapore": "ap-southeast-1"},
               "gcp": {"london": "europe-west2", "northern-virginia": "us-east4",
                       "singapore": "asia-southeast1"}}[provider]
    ms = {("london", "northern-virginia"): 76, ("northern-virginia", "singapore"): 215,
          ("london", "singapore"): london_singapore_ms}
    return [PathRtt(regions[s], regions[d], provider, provider, v * 1000.0, s, d)
            for (a, b), v in ms.items() for s, d in ((a, b), (b, a))]


def test_with_one_provider_geography_alone_is_evidence_of_a_detour() -> None:
    # London-Singapore at 288 ms is 2.65 times its floor and matches 76 + 215 ms through
    # Virginia; the only other path between London and Singapore is the way back, as slow.
    found = find_detours(metros("aws", 288), floors_us=FLOORS_US)
    assert {(d["src"], d["dst"]) for d in found} == {("eu-west-2", "ap-southeast-1"),
                                                    ("ap-southeast-1", "eu-west-2")}
    for d in found:
        assert d["via"] == "northern-virginia" and d["via_regions"] == ["aws/us-east-1"]
        assert d["evidence"] == ["geography"]
        assert d["stretch"] == pytest.approx(288 / 108.5)
        assert (d["alternative"]["src"], d["excess"]) == (d["dst"], 1.0)
    # Without the floors there is no evidence either way.
    assert find_detours(metros("aws", 288)) == []


def test_a_direct_path_near_its_floor_is_no_detour_and_proves_the_other_providers_one() -> None:
    # gcp's 165 ms is 1.52 times the floor: direct. aws's 288 ms between the same metros
    # (other region names) is a detour by both comparison and geography.
    found = find_detours(metros("aws", 288) + metros("gcp", 165), floors_us=FLOORS_US)
    assert {(d["src_provider"], d["src_place"], d["dst_place"]) for d in found} == {
        ("aws", "london", "singapore"), ("aws", "singapore", "london")}
    for d in found:
        assert d["evidence"] == ["comparison", "geography"]
        assert d["best_alternative_us"] == 165_000
        assert d["alternative"]["src_provider"] == "gcp"
        assert d["via_regions"] == ["aws/us-east-1", "gcp/us-east4"]


def test_a_slow_path_no_middle_place_explains_is_not_a_detour_by_geography() -> None:
    # London-Singapore at 250 ms: 2.3 times its floor, but 14% faster than the route
    # through Virginia (291 ms), so it does not go there.
    assert find_detours(metros("aws", 250), floors_us=FLOORS_US) == []
