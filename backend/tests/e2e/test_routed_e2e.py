"""Real agents on a routed network (tests/e2e/routed.py): each in its own namespace on its own
subnet, the API on its own address behind two routers. One network, API and fleet for the
module; the tests run in order, each leaving the fleet measuring for the next.

a1 (10.<o>.1.0/24) and a2 (10.<o>.2.0/24) sit behind r1, a3 (10.<o>.3.0/24) behind r2, and
the API behind r1. Cutting r1-r2 separates a3 from everyone, the API included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import ApiServer, Services
from tests.e2e.agents import go_build, wait_until
from tests.e2e.routed import NetnsAgent, RoutedNet, api_on, routed_network

RATE_HZ = 20
CUT_S = 12
OUTAGE_S = 15
OK, TIMEOUT, REFUSED = 0, 1, 2


@pytest.fixture(scope="module")
def net() -> Iterator[RoutedNet]:
    yield from routed_network([("a1", "r1"), ("a2", "r1"), ("a3", "r2"), ("a4", "r2"),
                               ("ghost", "r1")])


@pytest.fixture(scope="module")
def routed_api(net: RoutedNet, services: Services) -> Iterator[ApiServer]:
    # Nothing set for mesh addresses: 10.x is accepted as any routable address, loopback
    # from a non-local agent stays refused.
    yield from api_on(net, services)


@dataclass
class Fleet:
    org: OrgCredentials
    agents: dict[str, NetnsAgent]
    binary: Path
    home: Path
    api: ApiServer

    def admin(self) -> httpx.Client:
        return self.api.client(headers={"Authorization": f"Bearer {self.org.api_key}"})

    def add(self, name: str, net: RoutedNet, advertise: str = "") -> NetnsAgent:
        agent = NetnsAgent(self.binary, self.home, name, self.api.base_url,
                           self.org.enrollment_token, net.hosts[name], advertise=advertise)
        self.agents[name] = agent
        return agent


@pytest.fixture(scope="module")
def fleet(net: RoutedNet, routed_api: ApiServer, make_org: Callable[..., OrgCredentials],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    binary = go_build(tmp_path_factory.mktemp("agent-bin") / "stormwatch-agent")
    org = make_org()
    f = Fleet(org, {}, binary, tmp_path_factory.mktemp("routed-agents"), routed_api)
    with f.admin() as admin:
        r = admin.patch("/api/v1/org", json={"mesh_settings": {
            "enabled": True, "rate_hz": RATE_HZ, "payload_bytes": 128, "timeout_ms": 2000}})
        assert r.status_code == 200, r.text
    for name in ("a1", "a2", "a3"):
        f.add(name, net)
    try:
        yield f
    finally:
        for a in f.agents.values():
            a.kill()
        if routed_api.proc is None:
            routed_api.start()


def pair_counts(db: Engine, org_id: str, since: datetime | None = None,
                until: datetime | None = None) -> dict[tuple[str, str, int], int]:
    """(src, dst, status) -> rows, for samples sent within [since, until)."""
    with db.connect() as c:
        rows = c.execute(text(
            "SELECT src_agent_id::text, dst_agent_id::text, status, count(*) FROM mesh_samples "
            "WHERE org_id = :o AND (CAST(:s AS timestamptz) IS NULL OR time >= :s) "
            "AND (CAST(:u AS timestamptz) IS NULL OR time < :u) GROUP BY 1, 2, 3"),
            {"o": org_id, "s": since, "u": until}).all()
    return {(s, d, st): n for s, d, st, n in rows}


def rows_by_src(db: Engine, org_id: str) -> dict[str, int]:
    with db.connect() as c:
        rows = c.execute(text("SELECT src_agent_id::text, count(*) FROM mesh_samples "
                              "WHERE org_id = :o GROUP BY 1"), {"o": org_id}).all()
    return {s: n for s, n in rows}


def metric(agent: NetnsAgent, name: str) -> float:
    try:
        return agent.metrics().get(name, 0.0)
    except httpx.HTTPError:
        return -1.0


def test_agents_enroll_mesh_across_the_routers_with_classes_from_their_interfaces(
        fleet: Fleet, net: RoutedNet, db: Engine) -> None:
    agents = [fleet.agents[n] for n in ("a1", "a2", "a3")]
    for a in agents:
        a.enroll()
    for a in agents:
        a.start()
    ids = {a.name: a.agent_id for a in agents}

    def every_pair_measured() -> bool:
        got = pair_counts(db, fleet.org.org_id)
        return all(got.get((s, d, OK), 0) >= 20 for s in ids.values() for d in ids.values())

    wait_until("every directed pair (self-loops too) with 20 RTTs", 120, every_pair_measured,
               every_s=1)

    with fleet.admin() as admin:
        listed = {a["name"]: a for a in admin.get("/api/v1/agents").json()}
        pairs = admin.get("/api/v1/agents/pairs").json()
    for a in agents:
        # The subnet is the prefix of the agent's own interface, which no config names.
        assert listed[a.name]["subnet"] == a.host.subnet, listed[a.name]
        assert listed[a.name]["mesh_address"] == f"{a.host.address}:7300"
        assert listed[a.name]["private_ip"] == a.host.address
    names = {v: k for k, v in ids.items()}
    classes = {(names[p["src_agent_id"]], names[p["dst_agent_id"]]): p["topology_class"]
               for p in pairs}
    # Same provider, region and zone; three networks: every pair but self-loops crosses one.
    assert classes == {(s, d): "self" if s == d else "cross_subnet"
                       for s in ids for d in ids}, classes


def test_a_cut_between_the_routers_loses_only_the_pairs_that_cross_it(
        fleet: Fleet, net: RoutedNet, db: Engine) -> None:
    a1, a2, a3 = (fleet.agents[n] for n in ("a1", "a2", "a3"))
    ids = {a.name: a.agent_id for a in (a1, a2, a3)}
    crossing = {(s, d) for s in ids for d in ids if (s == "a3") != (d == "a3")}
    cut_start = datetime.now(UTC)
    net.set_core_link(False)
    try:
        cut_end = time.monotonic() + CUT_S
        while time.monotonic() < cut_end:
            assert all(a.proc is not None and a.proc.poll() is None for a in (a1, a2, a3))
            time.sleep(0.5)
    finally:
        net.set_core_link(True)
    cut_stop = datetime.now(UTC)

    def measuring_again() -> bool:
        # a3 was cut from the API too: its spool has to reach it before its side shows.
        got = pair_counts(db, fleet.org.org_id, since=cut_stop)
        return all(got.get((ids[s], ids[d], OK), 0) >= 20 for s in ids for d in ids)

    wait_until("every pair measuring again after the cut", 120, measuring_again, every_s=1)
    during = pair_counts(db, fleet.org.org_id, since=cut_start, until=cut_stop)
    report = {}
    for s in ids:
        for d in ids:
            losses = {st: n for (src, dst, st), n in during.items()
                      if (src, dst) == (ids[s], ids[d]) and st != OK}
            report[f"{s}->{d}"] = losses
            if (s, d) in crossing:
                # Several seconds of rounds at RATE_HZ: timeouts (messages without an echo)
                # or refusals (no connection to send on), never silence.
                assert sum(losses.get(st, 0) for st in (TIMEOUT, REFUSED)) >= RATE_HZ * 5, \
                    (s, d, losses)
            else:
                assert losses == {}, (s, d, losses)
                # Still measuring all along (generously: a loaded host may skip rounds).
                assert during.get((ids[s], ids[d], OK), 0) >= RATE_HZ * CUT_S // 2, (s, d)
    print(f"\nlosses during the {CUT_S}s cut (status: rows): {report}")


def test_an_agent_advertising_loopback_from_its_routed_address_is_refused(
        fleet: Fleet, net: RoutedNet) -> None:
    ghost = fleet.add("ghost", net, advertise="127.0.0.1:7300")
    res = ghost.enroll_result()
    assert res.returncode != 0, res.stdout + res.stderr
    assert "422" in res.stderr + res.stdout, res.stderr
    assert "loopback" in res.stderr + res.stdout, res.stderr
    # The same request by hand, from the routed side of the API: the 422 names the field.
    with fleet.api.client() as api:
        r = api.post("/api/v1/agents/enroll", json={
            "enrollment_token": fleet.org.enrollment_token, "name": "ghost-by-hand",
            "agent_version": "t", "mesh_address": "127.0.0.1:7300"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "mesh_address"], r.text
    with fleet.admin() as admin:
        names = {a["name"] for a in admin.get("/api/v1/agents").json()}
    assert names == {"a1", "a2", "a3"}, names


def test_an_api_outage_is_spooled_and_every_measured_sample_is_stored_once(
        fleet: Fleet, db: Engine) -> None:
    agents = [fleet.agents[n] for n in ("a1", "a2", "a3")]
    spooled_before = {a.name: metric(a, "stormwatch_agent_samples_spooled_total:mesh")
                      for a in agents}
    fleet.api.stop()
    try:
        outage_end = time.monotonic() + OUTAGE_S
        while time.monotonic() < outage_end:
            assert all(a.proc is not None and a.proc.poll() is None for a in agents)
            time.sleep(0.5)
        spooled = {a.name: metric(a, "stormwatch_agent_samples_spooled_total:mesh")
                   - spooled_before[a.name] for a in agents}
    finally:
        fleet.api.start()
    assert all(v > 0 for v in spooled.values()), spooled

    wait_until("spools drained after the outage", 120, lambda: all(
        metric(a, "stormwatch_agent_spool_batches") == 0 for a in agents), every_s=0.5)
    finals = {a.name: a.stop() for a in agents}
    ids = {a.name: a.agent_id for a in agents}
    stored = rows_by_src(db, fleet.org.org_id)
    with db.connect() as c:
        distinct = {src: n for src, n in c.execute(text(
            "SELECT src_agent_id::text, count(DISTINCT (dst_agent_id, round)) "
            "FROM mesh_samples WHERE org_id = :o GROUP BY 1"), {"o": fleet.org.org_id}).all()}
    print("\naccounting after the API outage (mesh samples, whole run):")
    for name, final in finals.items():
        measured, shipped = final["mesh_measured"], final["mesh_shipped"]
        dropped = final["mesh_dropped"]
        print(f"  {name}: measured={measured} shipped={shipped} dropped={dropped} "
              f"stored={stored[ids[name]]} spooled_in_outage={spooled[name]:.0f}")
        assert final["spooled_batches_left"] == 0, final
        assert measured == shipped + dropped, final  # type: ignore[operator]
        assert dropped == 0, final
        assert stored[ids[name]] == shipped, (name, stored[ids[name]], final)
        assert distinct[ids[name]] == stored[ids[name]], f"{name}: duplicate rows"


def rounds_lost(db: Engine, org_id: str, since: datetime, src: str, dst: str) -> tuple[int, int]:
    """(rows, rounds without a row) of src's samples about dst sent since `since`: every
    round src ran from its first sample about dst to its last round but one (that one may be
    cut short by the stop), read from src's samples about any peer, itself included."""
    with db.connect() as c:
        got, lost = c.execute(text(
            "WITH mine AS (SELECT dst_agent_id, round FROM mesh_samples WHERE org_id = :o "
            "AND src_agent_id = :s AND time >= :t), "
            "span AS (SELECT min(round) FILTER (WHERE dst_agent_id = :d) AS lo, "
            "max(round) - 1 AS hi FROM mine), "
            "ran AS (SELECT DISTINCT round FROM mine, span WHERE round BETWEEN lo AND hi), "
            "have AS (SELECT DISTINCT round FROM mine, span WHERE dst_agent_id = :d "
            "AND round BETWEEN lo AND hi) "
            "SELECT (SELECT count(*) FROM mine WHERE dst_agent_id = :d), "
            "(SELECT count(*) FROM ran) - (SELECT count(*) FROM have)"),
            {"o": org_id, "s": src, "d": dst, "t": since}).one()
    return int(got), int(lost)


def test_deleting_and_enrolling_agents_mid_run_loses_no_sample_of_the_other_pairs(
        fleet: Fleet, net: RoutedNet, db: Engine) -> None:
    a1, a2, a3 = (fleet.agents[n] for n in ("a1", "a2", "a3"))
    restart = datetime.now(UTC)
    stored_before = rows_by_src(db, fleet.org.org_id)
    for a in (a1, a2, a3):
        a.start()
    ids = {a.name: a.agent_id for a in (a1, a2, a3)}

    def measuring(names: list[str]) -> Callable[[], bool]:
        def check() -> bool:
            got = pair_counts(db, fleet.org.org_id, since=restart)
            return all(got.get((fleet.agents[s].agent_id, fleet.agents[d].agent_id, OK), 0)
                       >= 20 for s in names for d in names)
        return check

    wait_until("the restarted fleet measuring", 120, measuring(["a1", "a2", "a3"]), every_s=1)

    # Both at once, while everyone measures: a2 deleted, a4 (behind r2) joins.
    with fleet.admin() as admin:
        assert admin.delete(f"/api/v1/agents/{ids['a2']}").status_code == 204
    a4 = fleet.add("a4", net)
    a4.enroll()
    a4.start()
    ids["a4"] = a4.agent_id
    wait_until("a2 told it is deleted and gone", 120, lambda: a2.proc is not None
               and a2.proc.poll() is not None, every_s=0.5)
    assert a2.proc is not None and a2.proc.returncode == 3, a2.log.read_text()[-2000:]
    # a1 and a3 learn of a4, and forget a2, with the same config poll.
    wait_until("a1, a3 and a4 measuring each other", 120, measuring(["a1", "a3", "a4"]),
               every_s=1)
    live = [a1, a3, a4]
    finals = {a.name: a.stop() for a in live}
    deleted_final = a2.final_counts()

    stored = rows_by_src(db, fleet.org.org_id)
    print("\naccounting across the deletion of a2 and the enrollment of a4 (this run):")
    total_lost = 0
    for a in live:
        final = finals[a.name]
        measured, shipped = final["mesh_measured"], final["mesh_shipped"]
        dropped, set_aside = final["mesh_dropped"], final["mesh_set_aside"]
        stored_now = stored.get(ids[a.name], 0) - stored_before.get(ids[a.name], 0)
        assert final["spooled_batches_left"] == 0, final
        # What the API set aside (samples about the deleted a2) the agent counts apart.
        assert measured == shipped + set_aside + dropped, final  # type: ignore[operator]
        assert dropped == 0, final
        assert stored_now == shipped, (a.name, stored_now, final)
        lost = {}
        for d in live:
            got, missing = rounds_lost(db, fleet.org.org_id, restart, ids[a.name], ids[d.name])
            assert got > 0, (a.name, d.name)
            lost[d.name] = missing
        total_lost += sum(lost.values())
        print(f"  {a.name}: measured={measured} shipped={shipped} dropped={dropped} "
              f"stored={stored_now} set_aside_about_a2={set_aside} "
              f"rounds_lost_per_peer={lost}")
    print(f"  a2 (deleted): {deleted_final}")
    print(f"samples lost outside a2's pairs: {total_lost}")
    assert total_lost == 0
