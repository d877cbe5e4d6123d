"""Ingest parsing on its own, without HTTP or a database: what `parse_batch` accepts, what it
counts, and the field it names when it refuses (the HTTP tests in tests/api/test_ingest*.py
cover the same through the route)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormwatch.services.ingest.parse import BatchError, decode_json, make_limits, parse_batch

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
NOW_US = int(NOW.timestamp() * 1_000_000)
LIMITS = make_limits(NOW, retention_days=14, max_future_s=300, max_rtt_us=60_000_000)
AGENT, PEER = str(uuid.uuid4()), str(uuid.uuid4())


def mesh(rounds: int, peers: list[str], lost_every: int = 0) -> dict[str, Any]:
    cols: dict[str, list[Any]] = {"time_us": [], "peer_idx": [], "round": [],
                                  "payload_bytes": [], "rtt_us": [], "status": []}
    for r in range(rounds):
        for i in range(len(peers)):
            lost = lost_every and (r + i) % lost_every == 0
            cols["time_us"].append(NOW_US - 60_000_000 + r * 100_000)
            cols["peer_idx"].append(i)
            cols["round"].append(r)
            cols["payload_bytes"].append(64)
            cols["rtt_us"].append(None if lost else 400 + r)
            cols["status"].append(1 if lost else 0)
    return {"batch_id": str(uuid.uuid4()), "agent_id": AGENT, "mesh": {"peers": peers, **cols}}


def refusal(body: bytes) -> BatchError:
    with pytest.raises(BatchError) as info:
        parse_batch(decode_json(body), LIMITS)
    return info.value


def test_a_valid_mesh_batch_parses_with_its_count_its_peers_and_its_day() -> None:
    b = parse_batch(decode_json(orjson.dumps(mesh(3, [AGENT, PEER], lost_every=4))), LIMITS)
    assert b.count("mesh") == 6
    assert b.count("quorum") == 0
    assert b.referenced_agents == {uuid.UUID(AGENT), uuid.UUID(PEER)}
    assert b.days == {NOW_US // 86_400_000_000}


def test_a_key_written_twice_is_refused_naming_it() -> None:
    body = orjson.dumps(mesh(1, [PEER]))
    again = b'"batch_id":"' + str(uuid.uuid4()).encode() + b'","batch_id":'
    twice = body.replace(b'"batch_id":', again, 1)
    err = refusal(twice)
    assert err.loc == ["body", "batch_id"], err.detail()


def test_a_nan_rtt_is_refused_naming_its_column_and_index() -> None:
    body = orjson.dumps(mesh(2, [PEER])).replace(b'"rtt_us":[400,401]', b'"rtt_us":[400,NaN]')
    err = refusal(body)
    assert err.loc == ["body", "mesh", "rtt_us", 1], err.detail()


def test_a_sample_older_than_retention_is_refused_naming_its_index() -> None:
    batch = mesh(2, [PEER])
    batch["mesh"]["time_us"][1] = NOW_US - 15 * 86_400_000_000
    err = refusal(orjson.dumps(batch))
    assert err.loc == ["body", "mesh", "time_us", 1], err.detail()


def test_a_lost_sample_with_an_rtt_is_refused() -> None:
    batch = mesh(2, [PEER])
    batch["mesh"]["status"][0] = 1
    err = refusal(orjson.dumps(batch))
    assert err.loc == ["body", "mesh", "rtt_us", 0], err.detail()
    assert "null when status is not 0" in err.msg


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rounds=st.integers(1, 40), n_peers=st.integers(1, 6), lost_every=st.integers(0, 7))
def test_every_valid_mesh_batch_counts_every_row(rounds: int, n_peers: int,
                                                 lost_every: int) -> None:
    peers = [AGENT] + [str(uuid.UUID(int=i + 1)) for i in range(n_peers - 1)]
    b = parse_batch(decode_json(orjson.dumps(mesh(rounds, peers, lost_every))), LIMITS)
    assert b.count("mesh") == rounds * n_peers
    assert b.referenced_agents == {uuid.UUID(p) for p in peers}
