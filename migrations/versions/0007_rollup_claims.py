"""Rollup claims: every accepted sample reaches the rollups, whenever it arrives.

- A claim row per kind (`{kind}:60:claim` in rollup_watermarks): how far the minute pass has
  announced it will read. Ingest marks the minutes of a batch below the claim, under a share
  lock on the row, so no batch falls between a pass's read and the marks (services/rollups.py,
  `claim_minutes`). A database whose pass ran starts its claim at the watermark; a fresh one at
  -infinity, where ingest marks nothing and the first pass starts at the oldest raw sample.
- quorum_samples and throughput_samples get the (org_id, time DESC) index mesh and storage
  samples have, so the first pass and the health endpoint find the oldest raw sample at or
  after a time with one index probe per org instead of a scan. Built without blocking
  ingest: on plain PostgreSQL as an index on the parent only, then each partition's index
  CONCURRENTLY and attached (partitions created meanwhile get theirs on creation); on
  TimescaleDB with a transaction per chunk.

Revision ID: 0009
Revises: 0006_five_minute_rollups
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_rollup_claims"
down_revision = "0006_five_minute_rollups"
branch_labels = None
depends_on = None

KINDS = ("mesh", "quorum", "storage", "throughput")
NEW_INDEXES = {"quorum_samples": "ix_quorum_samples_1",
               "throughput_samples": "ix_throughput_samples_1"}


def _timescale() -> bool:
    engine = op.get_bind().execute(sa.text(
        "SELECT value FROM sw_meta WHERE key = 'storage_engine'")).scalar()
    return engine == "timescaledb"


def upgrade() -> None:
    for kind in KINDS:
        op.execute(f"""
            INSERT INTO rollup_watermarks (kind, rolled_until)
            SELECT '{kind}:60:claim', coalesce(
                (SELECT rolled_until FROM rollup_watermarks WHERE kind = '{kind}:60'),
                '-infinity')
            ON CONFLICT (kind) DO NOTHING""")
    timescale = _timescale()
    bind = op.get_bind()
    with op.get_context().autocommit_block():
        for table, name in NEW_INDEXES.items():
            if timescale:
                op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} (org_id, time DESC) "
                           "WITH (timescaledb.transaction_per_chunk)")
                continue
            op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON ONLY {table} (org_id, time DESC)")
            parts = bind.execute(sa.text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = CAST(:t AS regclass) AND NOT EXISTS ("
                " SELECT 1 FROM pg_inherits ii WHERE ii.inhparent = CAST(:n AS regclass)"
                " AND ii.inhrelid IN (SELECT indexrelid FROM pg_index WHERE indrelid = c.oid)) "
                "ORDER BY 1"), {"t": table, "n": name}).scalars().all()
            for part in parts:
                op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {part}_org_time "
                           f"ON {part} (org_id, time DESC)")
                op.execute(f"ALTER INDEX {name} ATTACH PARTITION {part}_org_time")


def downgrade() -> None:
    for name in NEW_INDEXES.values():
        op.execute(f"DROP INDEX IF EXISTS {name}")
    op.execute("DELETE FROM rollup_watermarks WHERE kind LIKE '%:60:claim'")
