"""TimescaleDB: raw retention policies drop chunks only past the longest retention an org
may set (90 days), not at the default 14.

0001 gave every raw hypertable a 14-day retention policy, so an org that set a longer raw
retention lost its samples at 14 days anyway. Per-org retention is enforced by the
`enforce_raw_retention` task (whole chunks past the longest org setting, then each org's
older rows); the policy stays only as a backstop that can never take data an org may keep.
Plain PostgreSQL has no policies: nothing to do there.

Revision ID: 0004_raw_retention_backstop
Revises: 0003_storage_targets
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_raw_retention_backstop"
down_revision = "0003_storage_targets"
branch_labels = None
depends_on = None

RAW_TABLES = ("mesh_samples", "quorum_samples", "storage_samples", "throughput_samples")
# The settings API's upper bound for orgs.raw_retention_days (schemas/accounts.py).
BACKSTOP_DAYS = 90
ORIGINAL_DAYS = 14


def _timescale() -> bool:
    engine = op.get_bind().execute(sa.text(
        "SELECT value FROM sw_meta WHERE key = 'storage_engine'")).scalar()
    return engine == "timescaledb"


def _set_policy(days: int) -> None:
    for table in RAW_TABLES:
        op.execute(f"SELECT remove_retention_policy('{table}', if_exists => true)")
        op.execute(f"SELECT add_retention_policy('{table}', drop_after => interval "
                   f"'{days} days')")


def upgrade() -> None:
    if _timescale():
        _set_policy(BACKSTOP_DAYS)


def downgrade() -> None:
    if _timescale():
        _set_policy(ORIGINAL_DAYS)
