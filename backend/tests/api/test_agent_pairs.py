"""The pair table under a fleet rollout: many agents enrolling, re-enrolling, updating and
being deleted at once, over real HTTP against the real API and database."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from sqlalchemy import Engine, text

from stormwatch.services import agents as agent_service
from tests.conftest import ApiServer
from tests.helpers import EnrolledAgent, enroll

PLACEMENT = ("provider", "region", "zone", "subnet")


def placement(i: int, variant: int = 0) -> dict[str, str]:
    """A mixed fleet: two providers, two regions each, two zones per region, two subnets
    per zone, so every topology class occurs many times among 50 agents."""
    i += variant * 7
    provider = "gcp" if i % 9 == 8 else "aws"
    region = f"{provider}-{'eu' if i % 5 < 3 else 'us'}-1"
    zone = f"{region}{'ab'[(i // 5) % 2]}"
    return {"provider": provider, "region": region, "zone": zone,
            "subnet": f"{zone}-s{(i // 2) % 2}"}


def expected_class(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The rules of seed 003 §4.3, spelled out independently of the service: the widest
    difference between the two agents names the class; a field missing on either side is
    never a match."""
    if a["id"] == b["id"]:
        return "self"
    for field, cls in (("provider", "cross_provider"), ("region", "cross_region"),
                       ("zone", "cross_az"), ("subnet", "cross_subnet")):
        if not a[field] or not b[field] or a[field] != b[field]:
            return cls
    return "same_subnet"


def enroll_body(token: str, name: str, meta: dict[str, str]) -> dict[str, Any]:
    return {"enrollment_token": token, "name": name, "agent_version": "test",
            "mesh_address": "127.0.0.1:7000", "metadata": meta}


async def burst(api_server: ApiServer, calls: list[Callable[[httpx.AsyncClient],
                                                          Awaitable[httpx.Response]]]
                ) -> list[httpx.Response]:
    """Sends every call at once, each on its own connection, and waits for all answers."""
    limits = httpx.Limits(max_connections=len(calls), max_keepalive_connections=len(calls))
    async with httpx.AsyncClient(base_url=api_server.base_url, timeout=120,
                                 limits=limits) as client:
        return list(await asyncio.gather(*(call(client) for call in calls)))


def post_enroll(body: dict[str, Any]) -> Callable[[httpx.AsyncClient],
                                                  Awaitable[httpx.Response]]:
    return lambda c: c.post("/api/v1/agents/enroll", json=body)


def fleet_and_pairs(api: httpx.Client, api_key: str
                    ) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], str]]:
    key = {"Authorization": f"Bearer {api_key}"}
    agents = api.get("/api/v1/agents", headers=key)
    pairs = api.get("/api/v1/agents/pairs", headers=key)
    assert agents.status_code == 200 and pairs.status_code == 200
    listed = [(p["src_agent_id"], p["dst_agent_id"]) for p in pairs.json()]
    assert len(listed) == len(set(listed)), "a pair is listed twice"
    return ({a["id"]: a for a in agents.json()},
            {(p["src_agent_id"], p["dst_agent_id"]): p["topology_class"] for p in pairs.json()})


def assert_complete_and_classified(agents: dict[str, dict[str, Any]],
                                   pairs: dict[tuple[str, str], str]) -> None:
    want = {(a, b): expected_class(agents[a], agents[b]) for a in agents for b in agents}
    assert set(pairs) == set(want), (
        f"{len(set(want) - set(pairs))} pairs missing, {len(set(pairs) - set(want))} extra")
    wrong = {k: (pairs[k], v) for k, v in want.items() if pairs[k] != v}
    assert not wrong, f"{len(wrong)} pairs misclassified, e.g. {next(iter(wrong.items()))}"


def pair_versions(db: Engine, org_id: str) -> dict[tuple[str, str], str]:
    """Each pair row's xmin: the transaction that last wrote it."""
    with db.connect() as conn:
        rows = conn.execute(text(
            "SELECT src_agent_id::text, dst_agent_id::text, xmin::text FROM agent_pairs "
            "WHERE org_id = :o"), {"o": org_id}).all()
    return {(s, d): x for s, d, x in rows}


def org_id_of(db: Engine, agent: EnrolledAgent) -> str:
    with db.connect() as conn:
        return str(conn.execute(text("SELECT org_id FROM agents WHERE id = :a"),
                                {"a": agent.agent_id}).scalar_one())


def test_fifty_agents_enrolling_at_once_all_get_in_with_every_pair_classified(
        api, api_server, make_org):
    org = make_org()
    bodies = [enroll_body(org.enrollment_token, f"tf-vm-{i:02d}", placement(i))
              for i in range(50)]
    answers = asyncio.run(burst(api_server, [post_enroll(b) for b in bodies]))
    failed = [(r.status_code, r.text[:80]) for r in answers if not r.is_success]
    assert not failed, f"{len(failed)} of 50 enrollments failed: {failed[:5]}"
    assert len({r.json()["agent_id"] for r in answers}) == 50

    agents, pairs = fleet_and_pairs(api, org.api_key)
    assert len(agents) == 50
    assert len(pairs) == 50 * 50
    assert_complete_and_classified(agents, pairs)
    classes = set(pairs.values())
    assert classes == {"self", "same_subnet", "cross_subnet", "cross_az", "cross_region",
                       "cross_provider"}, classes


def test_a_rollout_leaves_the_connection_pool_to_the_rest_of_the_api(
        api, api_server, make_org, db):
    """Enrollments queue in the API process, not on the org's database lock: at most one
    pooled connection waits there at any time, so ingest and the UI keep their pool."""
    org = make_org()
    done = threading.Event()
    waiting: list[int] = []

    def watch() -> None:
        with db.connect() as conn:
            while not done.is_set():
                waiting.append(conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND wait_event = 'advisory'")).scalar_one())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        answers = asyncio.run(burst(api_server, [
            post_enroll(enroll_body(org.enrollment_token, f"vm-{i:02d}", placement(i)))
            for i in range(50)]))
    finally:
        done.set()
        watcher.join()
    assert all(r.status_code == 201 for r in answers), [r.status_code for r in answers]
    assert waiting, "the watcher took no sample"
    assert max(waiting) <= 1, f"up to {max(waiting)} connections waited on the fleet lock"


def test_an_enrollment_writes_only_the_pairs_of_the_enrolling_agent(api, make_org, db):
    org = make_org()
    fleet = [enroll(api, org.enrollment_token, f"vm-{i}", **placement(i)) for i in range(7)]
    org_id = org_id_of(db, fleet[0])
    before = pair_versions(db, org_id)
    assert len(before) == 7 * 7

    newcomer = enroll(api, org.enrollment_token, "vm-7", **placement(7))
    after = pair_versions(db, org_id)
    assert len(after) == 8 * 8
    rewritten = sorted(k for k in before if after[k] != before[k])
    assert not rewritten, f"{len(rewritten)} pairs between other agents were rewritten"
    ids = {a.agent_id for a in [*fleet, newcomer]}
    assert set(after) - set(before) == ({(newcomer.agent_id, a) for a in ids}
                                        | {(a, newcomer.agent_id) for a in ids})

    # vm-1 is reinstalled in another zone: the pairs whose class changes are rewritten,
    # nobody else's.
    moved = fleet[1]
    _, classes_before = fleet_and_pairs(api, org.api_key)
    again = api.post("/api/v1/agents/enroll", json=enroll_body(
        org.enrollment_token, moved.name, {**placement(1), "zone": "aws-eu-1c",
                                           "subnet": "aws-eu-1c-s0"}))
    assert again.status_code == 201 and again.json()["agent_id"] == moved.agent_id
    agents, pairs = fleet_and_pairs(api, org.api_key)
    assert_complete_and_classified(agents, pairs)
    reclassified = {k for k in pairs if pairs[k] != classes_before[k]}
    assert reclassified and all(moved.agent_id in k for k in reclassified)
    final = pair_versions(db, org_id)
    touched = {k for k in final if final[k] != after[k]}
    assert touched == reclassified, (
        f"{len(touched - reclassified)} pairs rewritten whose class did not change")

    # vm-3 moves into vm-4's subnet and reports it itself: the same holds.
    mover = fleet[3]
    r = api.patch("/api/v1/agent/self", headers=mover.headers,
                  json={"metadata": {"subnet": placement(4)["subnet"]}})
    assert r.status_code == 204
    agents, pairs_now = fleet_and_pairs(api, org.api_key)
    assert_complete_and_classified(agents, pairs_now)
    reclassified = {k for k in pairs_now if pairs_now[k] != pairs[k]}
    assert reclassified and all(mover.agent_id in k for k in reclassified)
    patched = pair_versions(db, org_id)
    assert {k for k in patched if patched[k] != final[k]} == reclassified
    final = patched

    # Deleting vm-2 drops its pairs only.
    gone = fleet[2]
    r = api.delete(f"/api/v1/agents/{gone.agent_id}",
                   headers={"Authorization": f"Bearer {org.api_key}"})
    assert r.status_code == 204
    last = pair_versions(db, org_id)
    assert set(last) == {k for k in final if gone.agent_id not in k}
    assert all(last[k] == final[k] for k in last)


def test_enrollments_reenrollments_updates_and_deletions_at_once_keep_the_table_exact(
        api, api_server, make_org, db):
    org = make_org()
    key = {"Authorization": f"Bearer {org.api_key}"}
    first = asyncio.run(burst(api_server, [
        post_enroll(enroll_body(org.enrollment_token, f"vm-{i:02d}", placement(i)))
        for i in range(24)]))
    failed = [(r.status_code, r.text[:80]) for r in first if r.status_code != 201]
    assert not failed, f"{len(failed)} of 24 enrollments failed: {failed[:3]}"
    fleet = [EnrolledAgent(agent_id=r.json()["agent_id"], token=r.json()["agent_token"],
                           name=f"vm-{i:02d}") for i, r in enumerate(first)]
    org_id = first[0].json()["org_id"]
    before = pair_versions(db, org_id)
    assert len(before) == 24 * 24

    reenrolled, updated, deleted = fleet[0:4], fleet[4:8], fleet[8:12]
    untouched = {a.agent_id for a in fleet[12:]}
    calls = [post_enroll(enroll_body(org.enrollment_token, f"new-{i:02d}", placement(i, 1)))
             for i in range(26)]
    calls += [post_enroll(enroll_body(org.enrollment_token, a.name, placement(i, 2)))
              for i, a in enumerate(reenrolled)]

    def patch(a: EnrolledAgent, meta: dict[str, str]) -> Callable[
            [httpx.AsyncClient], Awaitable[httpx.Response]]:
        return lambda c: c.patch("/api/v1/agent/self", headers=a.headers,
                                 json={"metadata": meta})

    def delete(a: EnrolledAgent) -> Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]:
        return lambda c: c.delete(f"/api/v1/agents/{a.agent_id}", headers=key)

    calls += [patch(a, placement(i, 3)) for i, a in enumerate(updated)]
    calls += [delete(a) for a in deleted]
    answers = asyncio.run(burst(api_server, calls))
    refused = [(r.request.method, r.status_code, r.text[:80]) for r in answers
               if not r.is_success]
    assert not refused, f"{len(refused)} of {len(calls)} calls failed: {refused[:5]}"
    assert [r.json()["agent_id"] for r in answers[26:30]] == [a.agent_id for a in reenrolled]

    agents, pairs = fleet_and_pairs(api, org.api_key)
    assert set(agents) >= untouched | {a.agent_id for a in reenrolled + updated}
    assert not set(agents) & {a.agent_id for a in deleted}
    assert len(agents) == 24 - 4 + 26 and len(pairs) == 46 * 46
    assert_complete_and_classified(agents, pairs)
    for i, a in enumerate(reenrolled):
        assert {f: agents[a.agent_id][f] for f in PLACEMENT} == placement(i, 2)
    for i, a in enumerate(updated):
        assert {f: agents[a.agent_id][f] for f in PLACEMENT} == placement(i, 3)

    after = pair_versions(db, org_id)
    between_untouched = [k for k in before if k[0] in untouched and k[1] in untouched]
    rewritten = [k for k in between_untouched if after[k] != before[k]]
    assert not rewritten, (f"{len(rewritten)} of {len(between_untouched)} pairs between "
                           "agents nobody touched were rewritten")



def test_calls_waiting_on_the_fleet_lock_for_an_agent_deleted_meanwhile_get_4xx(
        api_server, make_org, db):
    """While the test holds the org's fleet lock, the agent's own update and a second
    deletion queue behind it; the agent is deleted, the lock released: the update is
    told its token is gone (401), the late deletion that the agent is (404)."""
    org = make_org()
    with api_server.client() as api:
        a = enroll(api, org.enrollment_token, "a", provider="aws", region="r1", zone="z1")
        b = enroll(api, org.enrollment_token, "b", provider="aws", region="r1", zone="z1")
    org_id = org_id_of(db, a)
    answers: dict[str, int] = {}

    def call(what: str, method: str, url: str, **kwargs: Any) -> None:
        with api_server.client() as c:
            answers[what] = c.request(method, url, **kwargs).status_code

    calls = [threading.Thread(target=call, args=(
                 "update", "PATCH", "/api/v1/agent/self"),
                 kwargs={"headers": a.headers, "json": {"metadata": {"zone": "z2"}}}),
             threading.Thread(target=call, args=(
                 "delete", "DELETE", f"/api/v1/agents/{a.agent_id}"),
                 kwargs={"headers": {"Authorization": f"Bearer {org.api_key}"}})]
    with db.connect() as conn, conn.begin():
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:lock), hashtext(:org))"),
                     {"lock": agent_service.FLEET_LOCK, "org": org_id})
        for t in calls:
            t.start()
        deadline = time.monotonic() + 60
        while conn.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND wait_event = 'advisory'")).scalar_one() < 2:
            assert time.monotonic() < deadline, "the calls never reached the fleet lock"
            time.sleep(0.02)
        conn.execute(text("DELETE FROM agents WHERE id = :a"), {"a": a.agent_id})
    for t in calls:
        t.join(60)
    assert answers == {"update": 401, "delete": 404}
    assert set(pair_versions(db, org_id)) == {(b.agent_id, b.agent_id)}


def test_a_field_missing_on_either_side_is_unknown_never_a_match(api, make_org):
    """Agents off-cloud with no overrides used to compare empty strings and all land in
    same_subnet: a pair is same_subnet only when both subnets are known and equal, and a
    missing field classes the pair at the first level it is not shown to share."""
    org = make_org()
    site = {"provider": "onprem", "region": "lab", "zone": "rack1"}
    a = enroll(api, org.enrollment_token, "a", **site)
    b = enroll(api, org.enrollment_token, "b", **site)
    c = enroll(api, org.enrollment_token, "c", **site, subnet="10.1.0.0/24")
    d = enroll(api, org.enrollment_token, "d", **site, subnet="10.1.0.0/24")
    e = enroll(api, org.enrollment_token, "e", provider="onprem", region="lab")
    f = enroll(api, org.enrollment_token, "f", provider="onprem", region="lab2", zone="rack1")
    agents, pairs = fleet_and_pairs(api, org.api_key)
    assert len(agents) == 6
    assert pairs[(a.agent_id, b.agent_id)] == "cross_subnet"  # neither subnet known
    assert pairs[(a.agent_id, c.agent_id)] == "cross_subnet"  # one side unknown
    assert pairs[(c.agent_id, d.agent_id)] == "same_subnet"   # both known and equal
    assert pairs[(a.agent_id, e.agent_id)] == "cross_az"      # e's zone unknown
    assert pairs[(e.agent_id, e.agent_id)] == "self"
    assert pairs[(a.agent_id, f.agent_id)] == "cross_region"  # known regions differ
    assert_complete_and_classified(agents, pairs)
