"""Topology classes: a field empty on either agent is unknown, never equal. Pairs classified
before compared empty strings (off-cloud agents without overrides were all same_subnet); they
are classed again by the rule of services/agents.topology_class.

Revision ID: 0020_topology
Revises: 0019_accounts
Create Date: 2026-11-28
"""

from alembic import op

revision = "0020_topology"
down_revision = "0019_accounts"
branch_labels = None
depends_on = None


def _reclassify(differs: str) -> None:
    """differs(field) is the SQL saying two agents are not shown to share that field."""
    levels = [("provider", "cross_provider"), ("region", "cross_region"), ("zone", "cross_az"),
              ("subnet", "cross_subnet")]
    cases = " ".join(f"WHEN {differs.format(f=f)} THEN '{cls}'" for f, cls in levels)
    op.execute(f"""
        UPDATE agent_pairs p SET topology_class = c.cls
        FROM (SELECT s.id AS src, d.id AS dst,
                     CASE WHEN s.id = d.id THEN 'self' {cases} ELSE 'same_subnet' END AS cls
              FROM agents s JOIN agents d ON d.org_id = s.org_id) c
        WHERE p.src_agent_id = c.src AND p.dst_agent_id = c.dst
          AND p.topology_class IS DISTINCT FROM c.cls""")


def upgrade() -> None:
    _reclassify("(s.{f} = '' OR d.{f} = '' OR s.{f} <> d.{f})")


def downgrade() -> None:
    _reclassify("s.{f} <> d.{f}")
