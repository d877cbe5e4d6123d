"""Partition upkeep and raw-data retention (plain PostgreSQL and TimescaleDB alike)."""

from sqlalchemy import Connection, text

from stormwatch.models import RAW_TABLES


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
    """Drops whole partitions past the longest org retention, then deletes the rows of
    orgs that keep less. Returns what was removed per table."""
    longest = int(conn.execute(text("SELECT coalesce(max(raw_retention_days), 14) FROM orgs"))
                  .scalar() or 14)
    timescale = storage_engine(conn) == "timescaledb"
    out: dict[str, int] = {}
    for table in RAW_TABLES:
        removed = 0
        if timescale:
            conn.execute(text("SELECT drop_chunks(:t, older_than => now() - "
                              "make_interval(days => :d))"), {"t": table, "d": longest})
        else:
            removed += int(conn.execute(text(
                "SELECT sw_drop_partitions_before(:t, now() - make_interval(days => :d))"),
                {"t": table, "d": longest}).scalar() or 0)
        deleted = conn.execute(text(
            f"DELETE FROM {table} s USING orgs o WHERE s.org_id = o.id "  # noqa: S608
            "AND o.raw_retention_days < :d "
            "AND s.time < now() - make_interval(days => o.raw_retention_days)"),
            {"d": longest}).rowcount
        out[table] = removed + int(deleted or 0)
    conn.execute(text("DELETE FROM ingest_batches WHERE received_at < now() - "
                      "make_interval(days => :d)"), {"d": longest})
    return out
