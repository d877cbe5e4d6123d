"""Reading an agent's own Prometheus series (its /metrics page), for the soak run and the
end-to-end tests that count what an agent measured, shipped, spooled and dropped."""

from __future__ import annotations

import re

_SERIES = re.compile(r'^(\w+)(\{kind="(\w+)"\})? ([0-9.e+-]+)$')


def parse_metrics(body: str) -> dict[str, float]:
    """An agent's /metrics as {name or name:kind: value} (the agent's own series only)."""
    out: dict[str, float] = {}
    for line in body.splitlines():
        m = _SERIES.match(line)
        if m:
            out[m.group(1) + (f":{m.group(3)}" if m.group(3) else "")] = float(m.group(4))
    return out
