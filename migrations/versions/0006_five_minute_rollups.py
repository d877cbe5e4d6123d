"""A 5-minute rollup level (bucket_s = 300) between minutes and hours, for every kind.

A pair's week in 10-, 15- or 30-minute windows (the Pair page asks 15 minutes over 7 days)
merged 10 080 minute rows; from 5-minute rows it is 2016. Those rows are rolled from the
minutes like the hours (services/rollups.py), so they hold the same samples and sketches.

- bucket_s checks accept 300. The new check is added NOT VALID and validated after commit,
  so the scan of existing rows holds no lock that stops rollup writes.
- Mesh and quorum 5-minute rows get covering per-series indexes like the minute ones of
  0005: rollup passes write every series' bucket at once, so one series' 2016 rows of a
  week lie on ~2016 heap pages, while these indexes keep them on a few adjacent index
  pages. On the query bench's fleet (576 pairs, 7 days, rows written time-major as the
  worker writes them) a pair's week of 5-minute rows is ~135 page reads through the index
  (9-24 ms of I/O) against ~2055 without it (54-271 ms); the index is 585 MB next to the
  table's 2.3 GB.
- The minute covering indexes of 0005 stay, although they are the largest (2.8 GB on that
  fleet). Windows that are multiples of 300 s now read 5-minute rows, but answers without
  windows still take the finest level within the row budget: a pair's summary and
  distribution over up to ~5 weeks (the Pair page asks both for its whole range) read up
  to 50 000 minute rows of one series, and so do windows of 1-4 minutes. A pair's week of
  minute rows is ~610 page reads through the index (21-165 ms of I/O) against ~10 280
  without it (67-735 ms): dropping it would move that read back to the table.
- A database that already holds minute rows gets, per kind, a fill mark at the first
  5-minute bucket after now and a 5-minute watermark 5 minutes back: the worker rolls new
  changes from there and fills the history from the newest bucket back (a few seconds per
  pass); until the mark is gone, queries read minutes for ranges that start before it.
  A fresh database gets neither. Rollup retention applies to the new rows as to the others.
  On the bench's database (5.9 M minute, hour and day rows) this migration took 7 s and the
  worker filled the week's 1.16 M five-minute rows in 41 passes (230 s of its time).

Revision ID: 0006_five_minute_rollups
Revises: 0005_rollup_series_index
Create Date: 2026-11-22
"""

from alembic import op

revision = "0006_five_minute_rollups"
down_revision = "0005_rollup_series_index"
branch_labels = None
depends_on = None

KINDS = {"mesh": "mesh_rollups", "quorum": "quorum_rollups", "storage": "storage_rollups",
         "throughput": "throughput_rollups"}
# Series keys and value prefix of the kinds whose series are read over long ranges one by
# one (as in 0005), and the longest sketch a B-tree entry holds with room to spare.
SERIES_INDEXED = {
    "mesh_rollups": ("src_agent_id, dst_agent_id, payload_bytes", "rtt_us"),
    "quorum_rollups": ("agent_id, group_name, k, n", "latency_us"),
}
SKETCH_MAX_BYTES = 1500


def _set_check(table: str, levels: str) -> None:
    op.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_bucket_s_check")
    op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_bucket_s_check "
               f"CHECK (bucket_s IN ({levels})) NOT VALID")


def upgrade() -> None:
    for kind, table in KINDS.items():
        _set_check(table, "60, 300, 3600, 86400")
        op.execute(f"""
            INSERT INTO rollup_watermarks (kind, rolled_until)
            SELECT '{kind}:300:fill', to_timestamp(ceil(extract(epoch FROM now()) / 300) * 300)
            WHERE EXISTS (SELECT 1 FROM {table} WHERE bucket_s = 60)
            ON CONFLICT (kind) DO NOTHING""")
        op.execute(f"""
            INSERT INTO rollup_watermarks (kind, rolled_until)
            SELECT '{kind}:300', now() - interval '5 minutes'
            WHERE EXISTS (SELECT 1 FROM {table} WHERE bucket_s = 60)
            ON CONFLICT (kind) DO NOTHING""")
    with op.get_context().autocommit_block():
        for table in KINDS.values():
            op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {table}_bucket_s_check")
        for table, (keys, p) in SERIES_INDEXED.items():
            op.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_{table}_5m_series ON {table} "
                f"(org_id, {keys}, bucket_start) INCLUDE (sample_count, failure_count, "
                f"{p}_count, {p}_min, {p}_max, {p}_sum, {p}_sum_sq, {p}_sketch) "
                f"WHERE bucket_s = 300 AND length({p}_sketch) <= {SKETCH_MAX_BYTES}")
            op.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_{table}_5m_large ON {table} "
                f"(org_id, {keys}, bucket_start) "
                f"WHERE bucket_s = 300 AND length({p}_sketch) > {SKETCH_MAX_BYTES}")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for table in SERIES_INDEXED:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_5m_series")
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_5m_large")
    for kind, table in KINDS.items():
        op.execute(f"DELETE FROM {table} WHERE bucket_s = 300")
        op.execute(f"DELETE FROM rollup_watermarks WHERE kind IN ('{kind}:300', "
                   f"'{kind}:300:fill')")
        _set_check(table, "60, 3600, 86400")
        op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {table}_bucket_s_check")
