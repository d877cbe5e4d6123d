"""Path traces as an agent sends them (POST /ingest/paths items), for tests."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any


def hop(ttl: int, addr: str | None, med_us: int, reached: bool = False) -> dict[str, Any]:
    if addr is None:
        return {"ttl": ttl, "addrs": [], "sent": 3, "lost": 3}
    return {"ttl": ttl, "addrs": [addr], "sent": 3, "lost": 0, "rtt_min_us": med_us - 50,
            "rtt_med_us": med_us, "rtt_max_us": med_us + 80, "reached": reached}


def trace(dst: str, at: datetime, routers: list[str | None], dst_addr: str = "203.0.113.9",
          step_us: int = 2000) -> dict[str, Any]:
    """A trace that reaches dst_addr through `routers` (None: a silent hop), each hop
    step_us further than the one before."""
    hops = [hop(i, a, i * step_us) for i, a in enumerate(routers, start=1)]
    hops.append(hop(len(routers) + 1, dst_addr, (len(routers) + 1) * step_us, reached=True))
    return {"id": str(uuid.uuid4()), "dst_agent_id": dst, "dst_address": dst_addr,
            "started_at": at.isoformat(), "proto": "tcp", "trigger": "schedule",
            "reached": True, "elapsed_ms": 40, "hops": hops}
