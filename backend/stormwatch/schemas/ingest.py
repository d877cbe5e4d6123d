"""Documentation models for the columnar batch (validated by services.ingest.parse for speed)."""

import uuid

from pydantic import BaseModel, Field


class MeshSection(BaseModel):
    peers: list[uuid.UUID]
    time_us: list[int]
    peer_idx: list[int]
    round: list[int]
    payload_bytes: list[int]
    rtt_us: list[int | None]
    status: list[int] = Field(description=(
        "0 ok, 1 timeout (loss), 2 refused, 3 error, 4 corrupt, 5 wrong_peer (the echo "
        "came from another agent than the peer: a loss)"))


class QuorumSection(BaseModel):
    groups: list[str]
    time_us: list[int]
    group_idx: list[int]
    round: list[int]
    k: list[int]
    n: list[int]
    latency_us: list[int | None]
    status: list[int]


class StorageSection(BaseModel):
    targets: list[uuid.UUID]
    time_us: list[int]
    target_idx: list[int]
    op: list[str]
    variant: list[str]
    content: list[str]
    size_bytes: list[int]
    stored_bytes: list[int | None]
    copies: list[int]
    concurrency: list[int]
    attempt: list[int]
    latency_us: list[int | None]
    ttfb_us: list[int | None]
    rtt_us: list[int | None]
    bytes_per_s: list[float | None]
    status: list[int]
    error_class: list[str | None]


class ThroughputSection(BaseModel):
    peers: list[uuid.UUID]
    time_us: list[int]
    peer_idx: list[int]
    proto: list[str]
    experiment_id: list[uuid.UUID]
    direction: list[str]
    bytes_per_s: list[float]
    loss_ratio: list[float | None]
    jitter_us: list[int | None]


class IngestBatch(BaseModel):
    batch_id: uuid.UUID
    agent_id: uuid.UUID
    mesh: MeshSection | None = None
    quorum: QuorumSection | None = None
    storage: StorageSection | None = None
    throughput: ThroughputSection | None = None


class AcceptedCounts(BaseModel):
    mesh: int
    quorum: int
    storage: int
    throughput: int


class IngestAccepted(BaseModel):
    batch_id: uuid.UUID
    accepted: AcceptedCounts
    duplicate: bool
    # reason -> section -> rows left out of an otherwise stored batch; "deleted_peer": rows
    # about a peer the org deleted. Empty when every row was stored.
    set_aside: dict[str, dict[str, int]] = Field(default_factory=dict)
