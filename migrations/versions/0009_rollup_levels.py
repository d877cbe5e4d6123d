"""Exact window levels in the rollups: each minute row keeps the median of its values, the
median absolute deviation around it and the medians of its two half-minutes, all computed
from the raw samples; coarser rows keep the count-weighted median of their finer rows'
medians (and of their deviations).

Window medians read from sketches fall on 2%-wide bins, which hides a 1% step and makes the
noise estimate 0 (docs/analysis.md, "Window levels"). Level shifts and cycles read these
columns instead; percentiles still come from the sketches. The half-minute medians give a
week of 30 s windows (seed 003's window) from 10 080 minute rows instead of millions of raw
samples.

Mesh and quorum series get a covering per-series index over the new columns for their
minute and 5-minute rows (as 0005 and 0006 did for the statistics), built CONCURRENTLY so
rollup writes go on. The indexes hold only rows with a level (a predicate the statistics
queries do not carry, so they keep using the covering indexes of 0005 and 0006). Rows rolled
before this migration have NULL levels until re-rolled; level queries skip their windows.

Revision ID: 0009_rollup_levels
Revises: 0008_advisors
Create Date: 2026-11-23
"""

from alembic import op

revision = "0009_rollup_levels"
down_revision = "0008_advisors"
branch_labels = None
depends_on = None

PREFIXES = {
    "mesh_rollups": ["rtt_us"],
    "quorum_rollups": ["latency_us"],
    "storage_rollups": ["latency_us", "adj_latency_us"],
    "throughput_rollups": ["bytes_per_s"],
}
SERIES_INDEXED = {
    "mesh_rollups": ("src_agent_id, dst_agent_id, payload_bytes", "rtt_us"),
    "quorum_rollups": ("agent_id, group_name, k, n", "latency_us"),
}
LEVELS = {"1m": 60, "5m": 300}


def upgrade() -> None:
    for table, prefixes in PREFIXES.items():
        for p in prefixes:
            op.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {p}_median float8, "
                       f"ADD COLUMN IF NOT EXISTS {p}_mad float8, "
                       f"ADD COLUMN IF NOT EXISTS {p}_half_medians float8[]")
    with op.get_context().autocommit_block():
        for table, (keys, p) in SERIES_INDEXED.items():
            for name, bucket_s in LEVELS.items():
                op.execute(
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_{table}_levels_{name} ON "
                    f"{table} (org_id, {keys}, bucket_start) INCLUDE ({p}_count, {p}_median, "
                    f"{p}_mad, {p}_half_medians) WHERE bucket_s = {bucket_s} "
                    f"AND {p}_median IS NOT NULL")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for table in SERIES_INDEXED:
            for name in LEVELS:
                op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_levels_{name}")
    for table, prefixes in PREFIXES.items():
        for p in prefixes:
            op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {p}_median, "
                       f"DROP COLUMN IF EXISTS {p}_mad, DROP COLUMN IF EXISTS {p}_half_medians")
