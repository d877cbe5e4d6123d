"""A rule's scope picks series by the places of their agents: a zone is a provider/region/zone
key, so zone "1" of one region never pulls in zone "1" of another region or provider."""

from __future__ import annotations

import uuid

from stormwatch.services.alerts.metrics import METRICS
from stormwatch.services.alerts.scope import matcher, to_filters
from stormwatch.services.analytics.filters import AgentInfo, Fleet

SITES = {"w": ("azure", "westeurope", "1"), "e": ("azure", "eastus", "1"),
         "o": ("onprem", "westeurope", "1")}


def _fleet() -> tuple[Fleet, dict[str, uuid.UUID]]:
    ids = {n: uuid.uuid4() for n in SITES}
    agents = {ids[n]: AgentInfo(ids[n], n, p, r, z) for n, (p, r, z) in SITES.items()}
    return Fleet(agents, {}), ids


def _matched(scope: dict[str, list[str]], metric: str) -> set[tuple[str, ...]]:
    fleet, ids = _fleet()
    names = {v: k for k, v in ids.items()}
    match = matcher(METRICS[metric], to_filters(scope), fleet)
    if METRICS[metric].spec is not None and METRICS[metric].spec.pair:
        return {(names[s], names[d]) for s in ids.values() for d in ids.values()
                if match((s, d, 1024))}
    return {(names[a],) for a in ids.values() if match((a,))}


def test_a_zone_scope_matches_the_agents_of_that_provider_region_and_zone_only() -> None:
    assert _matched({"zones": ["azure/westeurope/1"]}, "mesh_rtt") == {("w", "w")}
    assert _matched({"zones": ["azure/eastus/1"]}, "agent_silence") == {("e",)}
    both = {(s, d) for s in "wo" for d in "wo"}
    assert _matched({"zones": ["azure/westeurope/1", "onprem/westeurope/1"]},
                    "mesh_rtt") == both
    # With a region too, the zone still names one place.
    assert _matched({"zones": ["azure/westeurope/1"], "regions": ["westeurope"]},
                    "agent_silence") == {("w",)}
