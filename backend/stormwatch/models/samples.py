"""Raw sample tables. They are time-partitioned (hypertables or native partitions) and
have no primary key, so they are Core tables rather than ORM classes."""

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Double,
    ForeignKey,
    Integer,
    SmallInteger,
    String,
    Table,
    Uuid,
)
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col

metadata = Base.metadata

# Sample status codes (docs/api.md): every section's, and the mesh's own 5, an echo signed by
# another agent than the peer dialled (its address leads elsewhere).
SAMPLE_STATUSES = {0: "ok", 1: "timeout", 2: "refused", 3: "error", 4: "corrupt"}
MESH_STATUSES = {**SAMPLE_STATUSES, 5: "wrong_peer"}

# A mesh series (org, source, destination, payload size) by a small integer id, so a raw
# mesh row carries 4 bytes of key instead of three uuids and a size (migration 0014).
mesh_series = Table(
    "mesh_series",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("org_id", Uuid, nullable=False),
    Column("src_agent_id", Uuid, nullable=False),
    Column("dst_agent_id", Uuid, nullable=False),
    Column("payload_bytes", Integer, nullable=False),
)

# The stored raw mesh rows; column order keeps a row free of alignment padding.
mesh_raw = Table(
    "mesh_raw",
    metadata,
    Column("time", DateTime(timezone=True), nullable=False),
    Column("series_id", Integer, nullable=False),
    Column("rtt_us", Integer),  # NULL for a loss, timeout or error
    Column("round", BigInteger, nullable=False),
    Column("status", SmallInteger, nullable=False),  # MESH_STATUSES
)

# A view: mesh_raw joined to mesh_series, with the columns every reader uses. It takes
# INSERTs and COPY (a trigger files each row under its series); ingest writes mesh_raw.
mesh_samples = Table(
    "mesh_samples",
    metadata,
    Column("time", DateTime(timezone=True), nullable=False),
    Column("org_id", Uuid, nullable=False),
    Column("src_agent_id", Uuid, nullable=False),
    Column("dst_agent_id", Uuid, nullable=False),
    Column("round", BigInteger, nullable=False),
    Column("payload_bytes", Integer, nullable=False),
    Column("rtt_us", Integer),
    Column("status", SmallInteger, nullable=False),
    info={"is_view": True},
)

quorum_samples = Table(
    "quorum_samples",
    metadata,
    Column("time", DateTime(timezone=True), nullable=False),
    Column("org_id", Uuid, nullable=False),
    Column("agent_id", Uuid, nullable=False),
    Column("group_name", String(100), nullable=False),
    Column("round", BigInteger, nullable=False),
    Column("k", SmallInteger, nullable=False),
    Column("n", SmallInteger, nullable=False),
    Column("latency_us", Integer),  # NULL when fewer than k replies arrived in time
    Column("status", SmallInteger, nullable=False),
)

storage_samples = Table(
    "storage_samples",
    metadata,
    Column("time", DateTime(timezone=True), nullable=False),
    Column("org_id", Uuid, nullable=False),
    Column("agent_id", Uuid, nullable=False),
    Column("target_id", Uuid, nullable=False),
    Column("op", String(20), nullable=False),
    Column("variant", String(20), nullable=False),
    Column("content", String(10), nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("stored_bytes", BigInteger),
    Column("copies", SmallInteger, nullable=False),
    Column("concurrency", SmallInteger, nullable=False),
    Column("attempt", SmallInteger, nullable=False),
    Column("latency_us", BigInteger),
    Column("ttfb_us", BigInteger),
    Column("rtt_us", BigInteger),
    Column("bytes_per_s", Double),
    Column("status", SmallInteger, nullable=False),
    Column("error_class", String(20)),
)

throughput_samples = Table(
    "throughput_samples",
    metadata,
    Column("time", DateTime(timezone=True), nullable=False),
    Column("org_id", Uuid, nullable=False),
    Column("src_agent_id", Uuid, nullable=False),
    Column("dst_agent_id", Uuid, nullable=False),
    Column("proto", String(5), nullable=False),
    Column("experiment_id", Uuid, nullable=False),
    Column("direction", String(10), nullable=False),
    Column("bytes_per_s", Double, nullable=False),
    Column("loss_ratio", Double),
    Column("jitter_us", BigInteger),
)

# What a storage sample measured and how: the ingest API accepts these, the UI offers them.
STORAGE_OPS = ("put", "get", "get_first", "read_after_write", "list_after_write", "rtt")
STORAGE_VARIANTS = ("plain", "gzip9", "replicated", "concurrent")

# The stored (partitioned) raw tables: partitions, retention and per-org deletes go by these.
RAW_TABLES = ("mesh_raw", "quorum_samples", "storage_samples", "throughput_samples")
# How a raw table's rows are matched to an org (:o); mesh rows know theirs by series.
RAW_ORG_FILTER = {"mesh_raw": "series_id IN (SELECT id FROM mesh_series WHERE org_id = :o)"}


class IngestBatch(Base):
    """One row per accepted batch: makes retried batches idempotent."""

    __tablename__ = "ingest_batches"

    agent_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    batch_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(index=True)
    received_at: Mapped[datetime] = created_at_col()
    # The batch's oldest sample (NULL for batches stored before it was kept, or empty ones):
    # against received_at, how late its samples arrived.
    oldest_sample_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    mesh_rows: Mapped[int] = mapped_column(Integer)
    quorum_rows: Mapped[int] = mapped_column(Integer)
    storage_rows: Mapped[int] = mapped_column(Integer)
    throughput_rows: Mapped[int] = mapped_column(Integer)
