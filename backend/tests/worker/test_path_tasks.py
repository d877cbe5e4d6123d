"""The worker's path-trace pass as beat runs it: a pair of an active org whose RTT level
shifted a couple of minutes ago gets a trace request its agent finds in its config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from tests.alert_helpers import aligned_now, insert_mesh, make_agents


def test_the_pass_asks_a_trace_of_a_pair_whose_level_shifted(on_test_db: None, db: Engine,
                                                            make_org: Any) -> None:
    from stormwatch.worker.tasks.paths import request_path_traces

    org = make_org()
    heard = {"last_seen": datetime.now(UTC)}
    a, b = make_agents(db, org.org_id, [{"name": "a", **heard}, {"name": "b", **heard}])
    # Ten windows of 30 s up to the newest complete one, the last five 7 ms higher.
    insert_mesh(db, org.org_id, a, b, aligned_now() - timedelta(minutes=3),
                [2000.0] * 5 + [9000.0] * 5, rate_hz=2)
    request_path_traces()
    request_path_traces()  # a second pass (or worker) asks nothing more
    with db.connect() as c:
        rows = c.execute(text(
            "SELECT src_agent_id, dst_agent_id, trigger, served_at FROM path_trace_requests "
            "WHERE org_id = :o"), {"o": org.org_id}).all()
    assert [tuple(r) for r in rows] == [(a, b, "level_shift", None)]
