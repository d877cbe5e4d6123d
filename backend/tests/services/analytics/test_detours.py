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
