"""Minute rollups of mesh pairs and quorum groups, indexed by series with their statistics.

A series' minute rows are written a minute at a time with every other series', so a pair's
week (10 080 rows) sits on as many heap pages: a 7-day timeline read ~700-10 000 pages from
disk when they were not cached. These covering indexes keep each series' minute rows
together with their counts, moments and sketch, so the same timeline is an index-only scan
of a few hundred adjacent pages. A B-tree entry must stay under ~2.7 kB: rows whose sketch is
longer than SKETCH_MAX_BYTES (dense sketches of very high-rate series) are left to a second,
key-only index and read from the table. Built CONCURRENTLY so rollup writes go on.

Revision ID: 0005_rollup_series_index
Revises: 0004_raw_retention_backstop
Create Date: 2026-11-22
"""

from alembic import op

revision = "0005_rollup_series_index"
down_revision = "0004_raw_retention_backstop"
branch_labels = None
depends_on = None

SKETCH_MAX_BYTES = 1500
TABLES = {
    "mesh_rollups": ("src_agent_id, dst_agent_id, payload_bytes", "rtt_us"),
    "quorum_rollups": ("agent_id, group_name, k, n", "latency_us"),
}


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for table, (keys, p) in TABLES.items():
            op.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_{table}_minute_series ON {table} "
                f"(org_id, {keys}, bucket_start) INCLUDE (sample_count, failure_count, "
                f"{p}_count, {p}_min, {p}_max, {p}_sum, {p}_sum_sq, {p}_sketch) "
                f"WHERE bucket_s = 60 AND length({p}_sketch) <= {SKETCH_MAX_BYTES}")
            op.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_{table}_minute_large ON {table} "
                f"(org_id, {keys}, bucket_start) "
                f"WHERE bucket_s = 60 AND length({p}_sketch) > {SKETCH_MAX_BYTES}")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for table in TABLES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_minute_series")
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_minute_large")
