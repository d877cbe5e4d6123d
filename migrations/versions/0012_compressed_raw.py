"""TimescaleDB: raw samples compress per series within hours of their last write.

0001 segmented compression by org only, on day chunks compressed after 2 days: a day of raw
rows (about 333 bytes each uncompressed) waited up to three days before shrinking, and one
org's series were interleaved inside each compressed batch. Now:
- each raw table is segmented by org and series (what the analyses and rollups select by), so
  one series' samples sit together and compress against each other, ordered by time DESC;
- chunks are an hour (mesh, the one high-rate table: StormCloud's base workload writes
  6,400 samples/s) or six hours (the other kinds), and a policy compresses every chunk that
  ended more than an hour ago, checking every 30 minutes.
TimescaleDB keeps settings per chunk, so chunks compressed under 0001's settings stay readable
and keep theirs; chunks compressed from now on take these. Plain PostgreSQL: nothing to do.

Revision ID: 0012_compressed_raw
Revises: 0011_notifications
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_compressed_raw"
down_revision = "0011_notifications"
branch_labels = None
depends_on = None

# table: (segment-by columns, chunk interval)
LAYOUT = {
    "mesh_samples": ("org_id, src_agent_id, dst_agent_id", "1 hour"),
    "quorum_samples": ("org_id, agent_id, group_name", "6 hours"),
    "storage_samples": ("org_id, target_id, agent_id", "6 hours"),
    "throughput_samples": ("org_id, src_agent_id, dst_agent_id", "6 hours"),
}
COMPRESS_AFTER = "1 hour"
SCHEDULE_INTERVAL = "30 minutes"


def _timescale() -> bool:
    engine = op.get_bind().execute(sa.text(
        "SELECT value FROM sw_meta WHERE key = 'storage_engine'")).scalar()
    return engine == "timescaledb"


def upgrade() -> None:
    if not _timescale():
        return
    for table, (segmentby, chunk) in LAYOUT.items():
        op.execute(f"ALTER TABLE {table} SET (timescaledb.compress, "
                   f"timescaledb.compress_segmentby = '{segmentby}', "
                   "timescaledb.compress_orderby = 'time DESC')")
        op.execute(f"SELECT set_chunk_time_interval('{table}', interval '{chunk}')")
        op.execute(f"SELECT remove_compression_policy('{table}', if_exists => true)")
        op.execute(f"SELECT add_compression_policy('{table}', "
                   f"compress_after => interval '{COMPRESS_AFTER}', "
                   f"schedule_interval => interval '{SCHEDULE_INTERVAL}')")


def downgrade() -> None:
    if not _timescale():
        return
    for table in LAYOUT:
        op.execute(f"ALTER TABLE {table} SET (timescaledb.compress, "
                   "timescaledb.compress_segmentby = 'org_id', "
                   "timescaledb.compress_orderby = 'time DESC')")
        op.execute(f"SELECT set_chunk_time_interval('{table}', interval '1 day')")
        op.execute(f"SELECT remove_compression_policy('{table}', if_exists => true)")
        op.execute(f"SELECT add_compression_policy('{table}', interval '2 days')")
