"""Partition upkeep and raw-data retention (plain PostgreSQL and TimescaleDB alike).

Raw retention is per org (`orgs.raw_retention_days`, default 14, at most
MAX_RAW_RETENTION_DAYS through the settings API). Storage is shared, so retention works in
two steps, both idempotent:
1. whole day partitions (TimescaleDB chunks) older than the longest retention of any org are
   dropped: cheap, and no org keeps anything in them;
2. each org then loses, by DELETE, its rows older than its own setting in the partitions
   that remain, so an org keeping 3 days does not wait for the org keeping 90.
On TimescaleDB a retention policy also drops chunks, but only past MAX_RAW_RETENTION_DAYS
(migration 0004), as a backstop that can never take data an org is allowed to keep.
"""

from datetime import datetime, timedelta

from sqlalchemy import Connection, text

from stormwatch.models import RAW_ORG_FILTER, RAW_TABLES

# The settings API's upper bound for raw_retention_days (schemas/accounts.py OrgUpdate) and
# the TimescaleDB retention policy's interval (migration 0004): the three must agree.
MAX_RAW_RETENTION_DAYS = 90
DEFAULT_RAW_RETENTION_DAYS = 14


def storage_engine(conn: Connection) -> str:
    return str(conn.execute(text(
        "SELECT value FROM sw_meta WHERE key = 'storage_engine'")).scalar() or "postgres")


def ensure_partitions(conn: Connection, days_ahead: int = 3) -> int:
    created = 0
    for table in RAW_TABLES:
        created += int(conn.execute(text(
            "SELECT sw_ensure_partitions(:t, now() - interval '1 day', "
            "now() + make_interval(days => :d))"), {"t": table, "d": days_ahead}).scalar() or 0)
    return created


def enforce_raw_retention(conn: Connection) -> dict[str, int]:
    """Drops whole partitions (chunks) past the longest org retention, then deletes each
    org's rows older than its own retention. Returns partitions dropped plus rows deleted
    per table; a second run right after removes nothing."""
    now: datetime = conn.execute(text("SELECT now()")).scalar_one()
    orgs = [(r[0], int(r[1])) for r in conn.execute(text(
        "SELECT id, raw_retention_days FROM orgs")).all()]
    longest = max((days for _, days in orgs), default=DEFAULT_RAW_RETENTION_DAYS)
    drop_before = now - timedelta(days=longest)
    # What survives the drop is at most one partition (a day) older than its cutoff.
    floor = drop_before - timedelta(days=1)
    timescale = storage_engine(conn) == "timescaledb"
    out: dict[str, int] = {}
    for table in RAW_TABLES:
        removed = 0
        if timescale:
            removed += len(conn.execute(text(
                "SELECT drop_chunks(CAST(:t AS regclass), older_than => CAST(:c AS timestamptz))"),
                {"t": table, "c": drop_before}).all())
        else:
            removed += int(conn.execute(text(
                "SELECT sw_drop_partitions_before(:t, :c)"),
                {"t": table, "c": drop_before}).scalar() or 0)
        org_filter = RAW_ORG_FILTER.get(table, "org_id = :o")
        for org_id, days in orgs:
            # Bounded below, so only the partitions that can hold such rows are scanned.
            removed += int(conn.execute(text(
                f"DELETE FROM {table} WHERE {org_filter} AND time >= :f "  # noqa: S608
                "AND time < :c"),
                {"o": org_id, "f": floor, "c": now - timedelta(days=days)}).rowcount or 0)
        out[table] = removed
    conn.execute(text("DELETE FROM ingest_batches WHERE received_at < :c"), {"c": drop_before})
    return out
