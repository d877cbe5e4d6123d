"""Alert rule scopes name zones by provider/region/zone. A zone name alone used to match that
name in every region and provider; each stored name becomes the keys of the org's agents it
matched, so every rule keeps watching the same agents. A name no agent has is left as it is
(it matched nothing and still matches nothing).

Revision ID: 0023_split
Revises: 0022_deletion
Create Date: 2026-11-28
"""

import json
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0023_split"
down_revision = "0022_deletion"
branch_labels = None
depends_on = None


def _key(provider: str, region: str, zone: str) -> str:
    return f"{provider or '?'}/{region or '?'}/{zone or '?'}"


def _rewrite(change: Callable[[list[str], list[tuple[str, str, str]]], list[str]]) -> None:
    conn = op.get_bind()
    rules = conn.execute(sa.text(
        "SELECT id, org_id, scope FROM alert_rules WHERE jsonb_typeof(scope->'zones') = 'array' "
        "AND jsonb_array_length(scope->'zones') > 0")).all()
    places: dict[object, list[tuple[str, str, str]]] = {}
    for rule_id, org_id, scope in rules:
        if org_id not in places:
            places[org_id] = [tuple(r) for r in conn.execute(sa.text(
                "SELECT DISTINCT provider, region, zone FROM agents WHERE org_id = :o "
                "ORDER BY provider, region, zone"), {"o": org_id}).all()]
        zones = change(list(scope["zones"]), places[org_id])
        if zones != scope["zones"]:
            conn.execute(sa.text("UPDATE alert_rules SET scope = CAST(:s AS jsonb) WHERE id = :id"),
                         {"s": json.dumps({**scope, "zones": zones}), "id": rule_id})


def _dedupe(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _to_keys(zones: list[str], places: list[tuple[str, str, str]]) -> list[str]:
    out: list[str] = []
    for name in zones:
        keys = [_key(*p) for p in places if p[2] == name]
        out += keys or [name]
    return _dedupe(out)


def _to_names(zones: list[str], places: list[tuple[str, str, str]]) -> list[str]:
    names = {_key(*p): p[2] for p in places}
    return _dedupe([names.get(z, z) for z in zones])


def upgrade() -> None:
    _rewrite(_to_keys)


def downgrade() -> None:
    _rewrite(_to_names)
