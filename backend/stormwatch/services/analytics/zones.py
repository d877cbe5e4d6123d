"""Zone keys. Zone names repeat across regions and providers (Azure's "1" in every region), so a
zone is named by all three, "provider/region/zone" ("?" for an unknown part): the zone heatmap's
cells, the analysis filters and alert rule scopes all use this one key."""

from __future__ import annotations

from collections.abc import Collection, Iterable


def zone_key(provider: str, region: str, zone: str) -> str:
    return f"{provider or '?'}/{region or '?'}/{zone or '?'}"


def zone_key_problem(value: str, known: Collection[str]) -> str | None:
    """Why value names none of the known zones (a message for a 422), or None."""
    parts = value.split("/")
    if len(parts) < 3 or not all(parts):
        return (f"a zone is named provider/region/zone, as the zone heatmap shows it "
                f"(e.g. 'azure/westeurope/1'), not {value!r}")
    if value not in known:
        return f"no agent of this org is in zone {value!r}"
    return None


def first_zone_problem(values: Iterable[str], known: Collection[str]) -> str | None:
    for v in values:
        if (problem := zone_key_problem(v, known)) is not None:
            return problem
    return None
