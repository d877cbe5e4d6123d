"""Rollups of every raw series into 1-minute, 5-minute, 1-hour and 1-day buckets.

Each row holds mergeable aggregates only: counts, min, max, sum, sum of squares and a
DDSketch (1% relative accuracy, protobuf bytes shared with Go `sketches-go`), so any range
or group is answered by adding rows and merging sketches, never by averaging percentiles.
Value statistics cover samples with a value (status 0); failures are counted apart.
Hourly rows also hold a day-to-date sketch: the merge of their UTC day's hours up to theirs.
"""

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    DateTime,
    Double,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, utcnow


class _Bucket:
    org_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    bucket_s: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    sample_count: Mapped[int] = mapped_column(BigInteger)
    failure_count: Mapped[int] = mapped_column(BigInteger)
    # Set on every (re)computation: coarser buckets re-roll when a finer one is newer.
    computed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MeshRollup(_Bucket, Base):
    __tablename__ = "mesh_rollups"
    __table_args__ = (Index("ix_mesh_rollups_time", "org_id", "bucket_s", "bucket_start"),)

    src_agent_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    dst_agent_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    payload_bytes: Mapped[int] = mapped_column(Integer, primary_key=True)
    rtt_us_count: Mapped[int] = mapped_column(BigInteger)
    rtt_us_min: Mapped[float | None] = mapped_column(Double)
    rtt_us_max: Mapped[float | None] = mapped_column(Double)
    rtt_us_sum: Mapped[float] = mapped_column(Double)
    rtt_us_sum_sq: Mapped[float] = mapped_column(Double)
    rtt_us_sketch: Mapped[bytes] = mapped_column(LargeBinary)
    rtt_us_dtd_sketch: Mapped[bytes | None] = mapped_column(LargeBinary)


class QuorumRollup(_Bucket, Base):
    __tablename__ = "quorum_rollups"
    __table_args__ = (Index("ix_quorum_rollups_time", "org_id", "bucket_s", "bucket_start"),)

    agent_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    group_name: Mapped[str] = mapped_column(String(100), primary_key=True)
    k: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    n: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    latency_us_count: Mapped[int] = mapped_column(BigInteger)
    latency_us_min: Mapped[float | None] = mapped_column(Double)
    latency_us_max: Mapped[float | None] = mapped_column(Double)
    latency_us_sum: Mapped[float] = mapped_column(Double)
    latency_us_sum_sq: Mapped[float] = mapped_column(Double)
    latency_us_sketch: Mapped[bytes] = mapped_column(LargeBinary)
    latency_us_dtd_sketch: Mapped[bytes | None] = mapped_column(LargeBinary)


class StorageRollup(_Bucket, Base):
    """Per target x op x size x variant x content (x copies x concurrency). `adj_latency_us`
    is latency minus the RTT measured with it (seed 000 Tables 1-2 are RTT-adjusted)."""

    __tablename__ = "storage_rollups"
    __table_args__ = (Index("ix_storage_rollups_time", "org_id", "bucket_s", "bucket_start"),)

    agent_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    target_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    op: Mapped[str] = mapped_column(String(20), primary_key=True)
    variant: Mapped[str] = mapped_column(String(20), primary_key=True)
    content: Mapped[str] = mapped_column(String(10), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    copies: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    concurrency: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    latency_us_count: Mapped[int] = mapped_column(BigInteger)
    latency_us_min: Mapped[float | None] = mapped_column(Double)
    latency_us_max: Mapped[float | None] = mapped_column(Double)
    latency_us_sum: Mapped[float] = mapped_column(Double)
    latency_us_sum_sq: Mapped[float] = mapped_column(Double)
    latency_us_sketch: Mapped[bytes] = mapped_column(LargeBinary)
    latency_us_dtd_sketch: Mapped[bytes | None] = mapped_column(LargeBinary)
    adj_latency_us_count: Mapped[int] = mapped_column(BigInteger)
    adj_latency_us_min: Mapped[float | None] = mapped_column(Double)
    adj_latency_us_max: Mapped[float | None] = mapped_column(Double)
    adj_latency_us_sum: Mapped[float] = mapped_column(Double)
    adj_latency_us_sum_sq: Mapped[float] = mapped_column(Double)
    adj_latency_us_sketch: Mapped[bytes] = mapped_column(LargeBinary)
    adj_latency_us_dtd_sketch: Mapped[bytes | None] = mapped_column(LargeBinary)


class ThroughputRollup(_Bucket, Base):
    __tablename__ = "throughput_rollups"
    __table_args__ = (Index("ix_throughput_rollups_time", "org_id", "bucket_s", "bucket_start"),)

    src_agent_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    dst_agent_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    proto: Mapped[str] = mapped_column(String(5), primary_key=True)
    direction: Mapped[str] = mapped_column(String(10), primary_key=True)
    bytes_per_s_count: Mapped[int] = mapped_column(BigInteger)
    bytes_per_s_min: Mapped[float | None] = mapped_column(Double)
    bytes_per_s_max: Mapped[float | None] = mapped_column(Double)
    bytes_per_s_sum: Mapped[float] = mapped_column(Double)
    bytes_per_s_sum_sq: Mapped[float] = mapped_column(Double)
    bytes_per_s_sketch: Mapped[bytes] = mapped_column(LargeBinary)
    bytes_per_s_dtd_sketch: Mapped[bytes | None] = mapped_column(LargeBinary)


class RollupDirtyMinute(Base):
    """A minute of raw samples that changed after (or before) it was rolled up; ingest of
    late samples marks it, the rollup task recomputes and deletes it."""

    __tablename__ = "rollup_dirty_minutes"

    kind: Mapped[str] = mapped_column(String(20), primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    minute: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    marked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RollupWatermark(Base):
    """Raw time up to which 1-minute rollups of a kind have been computed."""

    __tablename__ = "rollup_watermarks"

    kind: Mapped[str] = mapped_column(String(20), primary_key=True)
    rolled_until: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
