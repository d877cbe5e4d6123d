"""The throughput API over a real server and database: settings, the agents' address and
config, scheduling (manual and by the worker task) against overlap and the budget, one
experiment's statistics, transition and samples from ingested seconds, and the analyses
over many experiments (pairs and asymmetry, CV_RMSE between AZ pairs, degradations)."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from tests.helpers import EnrolledAgent, enroll, post_batch

GB = 10**9


def admin(org: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {org.api_key}"}


def set_address(api: httpx.Client, agent: EnrolledAgent, address: str) -> httpx.Response:
    return api.patch("/api/v1/agent/self", headers=agent.headers,
                     json={"throughput_address": address})


def settings_body(**over: Any) -> dict[str, Any]:
    return {"enabled": True, "monthly_budget_bytes": 1000 * GB, "default_duration_s": 20,
            "default_proto": "tcp", "experiments_per_pair_per_day": 4, **over}


def insert_experiment(db: Engine, org_id: Any, initiator: str, responder: str, proto: str,
                      start: datetime, duration_s: int, est_bytes: int = GB) -> str:
    exp_id = str(uuid.uuid4())
    with db.begin() as c:
        c.execute(text("""
            INSERT INTO throughput_experiments (id, org_id, initiator_agent_id,
              responder_agent_id, proto, start_at, duration_s, streams, udp_rate_bits_per_s,
              udp_datagram_bytes, token, est_bytes, est_cost_usd, origin)
            VALUES (:id, :org, :i, :r, :p, :s, :d, 4, 500000000, 1400, 'x', :est, 0.02,
                    'manual')"""), {"id": exp_id, "org": org_id, "i": initiator,
                                    "r": responder, "p": proto, "s": start, "d": duration_s,
                                    "est": est_bytes})
    return exp_id


def ship(api: httpx.Client, receiver: EnrolledAgent, sender: EnrolledAgent, exp_id: str,
         proto: str, first_end: datetime, values: list[float],
         loss: list[float | None] | None = None) -> None:
    """The receiver ships one sample per second, stamped at the end of each second."""
    n = len(values)
    t0 = int(first_end.timestamp() * 1e6)
    r = post_batch(api, receiver, {
        "batch_id": str(uuid.uuid4()), "agent_id": receiver.agent_id,
        "throughput": {"peers": [sender.agent_id],
                       "time_us": [t0 + i * 1_000_000 for i in range(n)],
                       "peer_idx": [0] * n, "proto": [proto] * n,
                       "experiment_id": [exp_id] * n, "direction": ["receive"] * n,
                       "bytes_per_s": values, "loss_ratio": loss or [None] * n,
                       "jitter_us": [None if proto == "tcp" else 150] * n}})
    assert r.status_code == 202, r.text


def run_experiment(api: httpx.Client, db: Engine, org: Any, a: EnrolledAgent,
                   b: EnrolledAgent, start: datetime, fwd: list[float], rev: list[float],
                   proto: str = "tcp") -> str:
    d = len(fwd)
    exp = insert_experiment(db, org.org_id, a.agent_id, b.agent_id, proto, start, d)
    ship(api, b, a, exp, proto, start + timedelta(seconds=1), fwd)
    ship(api, a, b, exp, proto, start + timedelta(seconds=d + 1), rev)
    return exp


@pytest.fixture
def pair(api, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "tp-a", provider="aws", region="eu-west-1",
               zone="eu-west-1a")
    b = enroll(api, org.enrollment_token, "tp-b", provider="aws", region="us-east-1",
               zone="us-east-1a")
    for agent, port in ((a, 7710), (b, 7711)):
        assert set_address(api, agent, f"127.0.0.1:{port}").status_code == 204
    return org, a, b


@pytest.mark.parametrize("bad", ["127.0.0.1", "host:0", "host:70000", ":7710", "a b:1",
                                 "[not-v6]:1", "::1:7710"])
def test_a_bad_throughput_address_is_a_422_naming_the_field(api, make_org, bad):
    org = make_org()
    a = enroll(api, org.enrollment_token, "tp-bad")
    r = set_address(api, a, bad)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "throughput_address"]


def test_an_agent_reports_its_throughput_address_and_people_see_it(api, pair):
    org, a, _ = pair
    assert set_address(api, a, "[::1]:7710").status_code == 204
    r = api.get(f"/api/v1/agents/{a.agent_id}", headers=admin(org))
    assert r.json()["throughput_address"] == "[::1]:7710"


def test_settings_start_at_the_defaults_and_an_admin_replaces_them(api, pair):
    org, a, b = pair
    r = api.get("/api/v1/throughput/settings", headers=admin(org))
    assert r.status_code == 200
    assert r.json()["enabled"] is False and r.json()["updated_at"] is None
    body = settings_body(pairs=[{"src_agent_id": a.agent_id, "dst_agent_id": b.agent_id}],
                         price_per_gb_usd=0.05, default_proto="both")
    r = api.put("/api/v1/throughput/settings", headers=admin(org), json=body)
    assert r.status_code == 200, r.text
    got = api.get("/api/v1/throughput/settings", headers=admin(org)).json()
    assert got["pairs"] == body["pairs"] and got["default_proto"] == "both"
    assert got["price_per_gb_usd"] == 0.05 and got["updated_at"] is not None


def test_settings_naming_an_unknown_agent_or_a_self_pair_are_422s(api, pair, make_org):
    org, a, _ = pair
    stranger = enroll(api, make_org().enrollment_token, "tp-stranger")
    r = api.put("/api/v1/throughput/settings", headers=admin(org), json=settings_body(
        pairs=[{"src_agent_id": a.agent_id, "dst_agent_id": stranger.agent_id}]))
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "pairs", 0, "dst_agent_id"]
    r = api.put("/api/v1/throughput/settings", headers=admin(org), json=settings_body(
        pairs=[{"src_agent_id": a.agent_id, "dst_agent_id": a.agent_id}]))
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][:3] == ["body", "pairs", 0]


def config(api: httpx.Client, agent: EnrolledAgent) -> dict[str, Any]:
    r = api.get("/api/v1/agent/config", headers=agent.headers)
    assert r.status_code == 200
    return r.json()


def test_an_experiment_reaches_both_agents_configs_with_its_token_and_no_one_else(
        api, pair):
    org, a, b = pair
    c = enroll(api, org.enrollment_token, "tp-c", provider="aws", region="us-east-1")
    assert config(api, a)["throughput"] == {"experiments": []}
    api.put("/api/v1/throughput/settings", headers=admin(org), json=settings_body())
    r = api.post("/api/v1/throughput/experiments", headers=admin(org),
                 json={"initiator_agent_id": a.agent_id, "responder_agent_id": b.agent_id,
                       "proto": "udp", "udp_rate_bits_per_s": 80_000_000})
    assert r.status_code == 201, r.text
    exp = r.json()
    assert "token" not in exp and exp["status"] == "scheduled"
    assert exp["est_bytes"] == 2 * 20 * 10_000_000  # both directions at the offered rate
    (ea,) = config(api, a)["throughput"]["experiments"]
    (eb,) = config(api, b)["throughput"]["experiments"]
    assert ea["id"] == eb["id"] == exp["id"]
    assert (ea["role"], eb["role"]) == ("initiator", "responder")
    assert ea["peer_agent_id"] == b.agent_id and eb["peer_agent_id"] == a.agent_id
    assert ea["peer_address"] == "127.0.0.1:7711" and "peer_address" not in eb
    assert ea["token"] == eb["token"] and len(ea["token"]) == 43  # 32 bytes, base64url
    assert ea["proto"] == "udp" and ea["udp_rate_bits_per_s"] == 80_000_000
    assert ea["duration_s"] == 20 and ea["start_at"].endswith("Z")
    assert config(api, c)["throughput"] == {"experiments": []}
    listed = api.get("/api/v1/throughput/experiments", headers=admin(org)).json()
    assert [e["id"] for e in listed] == [exp["id"]]
    assert all("token" not in e for e in listed)


def test_an_overlapping_or_over_budget_experiment_is_a_422_saying_why(api, pair):
    org, a, b = pair
    api.put("/api/v1/throughput/settings", headers=admin(org),
            json=settings_body(monthly_budget_bytes=5 * GB))
    start = datetime.now(UTC) + timedelta(hours=1)
    body = {"initiator_agent_id": a.agent_id, "responder_agent_id": b.agent_id,
            "proto": "udp", "udp_rate_bits_per_s": 8 * 10**8, "start_at": start.isoformat()}
    r = api.post("/api/v1/throughput/experiments", headers=admin(org), json=body)
    assert r.status_code == 201, r.text  # 2 x 20 s x 100 MB/s = 4 GB
    # The reverse pair 30 s after the first ends, inside the 60 s guard: an overlap.
    later = start + timedelta(seconds=40 + 30)
    r = api.post("/api/v1/throughput/experiments", headers=admin(org), json={
        **body, "initiator_agent_id": b.agent_id, "responder_agent_id": a.agent_id,
        "start_at": later.isoformat()})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "start_at"]
    assert "overlaps" in r.json()["detail"][0]["msg"]
    # Far enough apart, but another 4 GB would pass the 5 GB budget.
    r = api.post("/api/v1/throughput/experiments", headers=admin(org), json={
        **body, "start_at": (start + timedelta(hours=1)).isoformat()})
    assert r.status_code == 422
    assert "budget" in r.json()["detail"][0]["msg"]
    budget = api.get("/api/v1/throughput/budget", headers=admin(org)).json()
    assert budget["scheduled_bytes"] == 4 * GB and budget["remaining_bytes"] == 1 * GB


def test_a_responder_without_a_listener_cannot_be_scheduled(api, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "tp-a")
    b = enroll(api, org.enrollment_token, "tp-b")
    assert set_address(api, a, "127.0.0.1:7710").status_code == 204
    r = api.post("/api/v1/throughput/experiments", headers=admin(org),
                 json={"initiator_agent_id": a.agent_id, "responder_agent_id": b.agent_id})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "responder_agent_id"]
    assert "tp-b" in r.json()["detail"][0]["msg"]


def test_an_initiator_with_its_probe_off_is_a_422_naming_it(api, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "tp-off")
    b = enroll(api, org.enrollment_token, "tp-on")
    assert set_address(api, b, "127.0.0.1:7711").status_code == 204
    r = api.post("/api/v1/throughput/experiments", headers=admin(org),
                 json={"initiator_agent_id": a.agent_id, "responder_agent_id": b.agent_id})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "initiator_agent_id"]
    assert "tp-off" in r.json()["detail"][0]["msg"]


def test_a_manual_experiment_fits_the_default_budget(api, pair):
    org, a, b = pair
    r = api.post("/api/v1/throughput/experiments", headers=admin(org),
                 json={"initiator_agent_id": a.agent_id, "responder_agent_id": b.agent_id})
    assert r.status_code == 201, r.text


def test_a_missed_experiment_says_why(api, db, pair):
    org, a, b = pair
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(microsecond=0)
    exp = insert_experiment(db, org.org_id, a.agent_id, b.agent_id, "tcp", start, 20)
    with db.begin() as c:  # the initiator turned its probe off since
        c.execute(text("UPDATE agents SET throughput_address = '' WHERE id = :i"),
                  {"i": a.agent_id})
    body = api.get(f"/api/v1/throughput/experiments/{exp}", headers=admin(org)).json()
    assert body["status"] == "missed"
    assert "initiator tp-a has its throughput probe off" in body["missed_reason"]
    (listed,) = api.get("/api/v1/throughput/experiments", headers=admin(org),
                        params={"status": "missed"}).json()
    assert listed["missed_reason"] == body["missed_reason"]
    with db.begin() as c:  # both listening, but the responder went quiet before the start
        c.execute(text("UPDATE agents SET throughput_address = '127.0.0.1:7710', "
                       "last_seen = :t WHERE id = :a"), {"a": a.agent_id, "t": start})
        c.execute(text("UPDATE agents SET last_seen = :t WHERE id = :b"),
                  {"b": b.agent_id, "t": start - timedelta(minutes=5)})
    body = api.get(f"/api/v1/throughput/experiments/{exp}", headers=admin(org)).json()
    assert "responder tp-b was not heard from during the experiment" in body["missed_reason"]
    assert "tp-a" not in body["missed_reason"]
    done = run_experiment(api, db, org, a, b, start + timedelta(minutes=2), [1e6] * 5,
                          [1e6] * 5)
    assert api.get(f"/api/v1/throughput/experiments/{done}",
                   headers=admin(org)).json()["missed_reason"] is None


def test_an_experiment_shows_its_statistics_transition_and_per_second_samples(
        api, db, pair):
    org, a, b = pair
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(microsecond=0)
    high, low = 100e6, 50e6
    # Forward: high for 12.5 s, then low (the 13th second is half and half); reverse flat.
    fwd = [high] * 12 + [(high + low) / 2] + [low] * 27
    rev = [80e6] * 40
    exp = run_experiment(api, db, org, a, b, start, fwd, rev)
    r = api.get(f"/api/v1/throughput/experiments/{exp}", headers=admin(org))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done"
    f, v = body["directions"]
    assert (f["direction"], f["src_agent_id"], f["dst_agent_id"]) == (
        "forward", a.agent_id, b.agent_id)
    assert f["seconds"] == 40 and f["bytes"] == sum(fwd)
    assert f["mean_bytes_per_s"] == pytest.approx(sum(fwd) / 40)
    assert f["max_bytes_per_s"] == high and f["min_bytes_per_s"] == low
    (t,) = f["transitions"]
    assert t["offset_s"] == pytest.approx(12.5)
    assert datetime.fromisoformat(t["at"]) == start + timedelta(seconds=12.5)
    assert t["level_before_bytes_per_s"] == high and t["level_after_bytes_per_s"] == low
    assert t["bytes_before"] == pytest.approx(12.5 * high)
    assert v["cov"] == 0.0 and v["transitions"] == []
    assert body["asymmetry"] == pytest.approx(sum(fwd) / 40 / 80e6)
    s = api.get(f"/api/v1/throughput/experiments/{exp}/samples", headers=admin(org)).json()
    fs = s["directions"][0]["samples"]
    assert [p["bytes_per_s"] for p in fs] == fwd
    assert fs[0]["offset_s"] == 1.0 and fs[-1]["offset_s"] == 40.0
    assert s["directions"][1]["direction"] == "reverse"


def test_another_orgs_experiment_is_a_404(api, db, pair, make_org):
    org, a, b = pair
    exp = insert_experiment(db, org.org_id, a.agent_id, b.agent_id, "tcp",
                            datetime.now(UTC), 20)
    other = make_org()
    for path in (f"/api/v1/throughput/experiments/{exp}",
                 f"/api/v1/throughput/experiments/{exp}/samples"):
        assert api.get(path, headers=admin(other)).status_code == 404
    assert api.get("/api/v1/throughput/experiments", headers=admin(other)).json() == []


def test_measured_bytes_count_against_the_budget(api, db, pair):
    org, a, b = pair
    api.put("/api/v1/throughput/settings", headers=admin(org),
            json=settings_body(monthly_budget_bytes=100 * GB, price_per_gb_usd=0.1))
    start = (datetime.now(UTC) - timedelta(minutes=20)).replace(microsecond=0)
    if start.month != datetime.now(UTC).month:
        pytest.skip("the first minutes of a month")
    # UDP: 1e8 received at 50% loss means 2e8 were sent, and sending is what is billed.
    exp = insert_experiment(db, org.org_id, a.agent_id, b.agent_id, "udp", start, 10)
    ship(api, b, a, exp, "udp", start + timedelta(seconds=1), [1e8] * 10, [0.5] * 10)
    budget = api.get("/api/v1/throughput/budget", headers=admin(org)).json()
    assert budget["used_bytes"] == pytest.approx(2e9)
    assert budget["used_cost_usd"] == pytest.approx(0.2)
    assert budget["remaining_bytes"] == pytest.approx(98e9)


def test_pairs_give_mean_sigma_and_asymmetry_per_region_and_agent_pair(api, db, pair):
    org, a, b = pair
    base = (datetime.now(UTC) - timedelta(hours=6)).replace(minute=0, second=0,
                                                             microsecond=0)
    for k, (f, r) in enumerate([(100e6, 50e6), (120e6, 50e6), (140e6, 50e6)]):
        run_experiment(api, db, org, a, b, base + timedelta(hours=k), [f] * 10, [r] * 10)
    body = api.get("/api/v1/throughput/pairs", headers=admin(org),
                   params={"proto": "tcp"}).json()
    fwd = next(p for p in body["region_pairs"] if p["src_region"] == "eu-west-1")
    assert fwd["experiments"] == 3
    assert fwd["mean_bytes_per_s"] == pytest.approx(120e6)
    assert fwd["std_bytes_per_s"] == pytest.approx(20e6)  # sample sigma of 100, 120, 140
    assert fwd["cov"] == pytest.approx(20 / 120)
    assert fwd["asymmetry"] == pytest.approx(120 / 50)
    rev = next(p for p in body["agent_pairs"] if p["src_agent_id"] == b.agent_id)
    assert rev["mean_bytes_per_s"] == pytest.approx(50e6) and rev["asymmetry"] == \
        pytest.approx(50 / 120)


def test_az_pairs_compare_the_zones_of_a_region_pair_hour_by_hour(api, db, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "az-a", provider="aws", region="eu-west-1",
               zone="eu-west-1a")
    b = enroll(api, org.enrollment_token, "az-b", provider="aws", region="us-east-1",
               zone="us-east-1a")
    c = enroll(api, org.enrollment_token, "az-c", provider="aws", region="us-east-1",
               zone="us-east-1b")
    base = (datetime.now(UTC) - timedelta(hours=8)).replace(minute=0, second=0,
                                                             microsecond=0)
    x, y = [10e6, 20e6, 30e6], [12e6, 18e6, 33e6]
    for k in range(3):
        run_experiment(api, db, org, a, b, base + timedelta(hours=k), [x[k]] * 10, [1e6] * 10)
        run_experiment(api, db, org, a, c, base + timedelta(hours=k, minutes=5),
                       [y[k]] * 10, [1e6] * 10)
    body = api.get("/api/v1/throughput/az-pairs", headers=admin(org),
                   params={"src_region": "eu-west-1", "dst_region": "us-east-1"}).json()
    (rp,) = body["region_pairs"]
    assert [(z["src_zone"], z["dst_zone"], z["experiments"]) for z in rp["az_pairs"]] == [
        ("eu-west-1a", "us-east-1a", 3), ("eu-west-1a", "us-east-1b", 3)]
    (cmp,) = rp["comparisons"]
    assert cmp["slots"] == 3
    assert cmp["cv_rmse"] == pytest.approx(math.sqrt(17 / 3) / 20.5)


def test_degradations_report_hours_below_the_fraction_of_the_norm(api, db, pair):
    org, a, b = pair
    base = (datetime.now(UTC) - timedelta(hours=12)).replace(minute=0, second=0,
                                                              microsecond=0)
    levels = [100e6, 100e6, 100e6, 4e6, 5e6, 3e6, 100e6, 100e6]
    for k, level in enumerate(levels):
        run_experiment(api, db, org, a, b, base + timedelta(hours=k), [level] * 10,
                       [100e6] * 10)
    body = api.get("/api/v1/throughput/degradations", headers=admin(org),
                   params={"fraction": 0.5, "min_hours": 1}).json()
    (d,) = body["degradations"]
    assert (d["src_agent_id"], d["dst_agent_id"]) == (a.agent_id, b.agent_id)
    assert datetime.fromisoformat(d["start"]) == base + timedelta(hours=3)
    assert datetime.fromisoformat(d["end"]) == base + timedelta(hours=5, seconds=10)
    assert d["level_bytes_per_s"] == pytest.approx(4e6)
    assert d["norm_bytes_per_s"] == pytest.approx(100e6) and d["experiments"] == 3


def test_the_worker_plans_the_day_once_without_overlaps_and_within_budget(api, db, make_org,
                                                                          services):
    from stormwatch.core.config import get_settings
    from stormwatch.worker.tasks.throughput import schedule_throughput_experiments

    # Settings read while collecting (before the test database existed) name another URL;
    # the task must read the test database's, which the services fixture put in the env.
    get_settings.cache_clear()
    org = make_org()
    agents = []
    for i, region in enumerate(("eu-west-1", "us-east-1", "ap-southeast-1")):
        ag = enroll(api, org.enrollment_token, f"sch-{i}", provider="aws", region=region)
        assert set_address(api, ag, f"127.0.0.1:{7720 + i}").status_code == 204
        agents.append(ag)
    now = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)  # a whole month ahead: nothing measured
    # 3 cross-region pairs x 4 a day of 2 x 20 s at the assumed 125 MB/s = 5 GB each; the
    # month's 31 days get 930 GB / 31 = 30 GB a day: 6 of the 12 per day.
    r = api.put("/api/v1/throughput/settings", headers=admin(org), json=settings_body(
        monthly_budget_bytes=930 * GB))
    assert r.status_code == 200
    out = schedule_throughput_experiments(now=now.isoformat())
    assert out["planned"] >= 6
    again = schedule_throughput_experiments(now=now.isoformat())
    assert again["planned"] == 0
    with db.connect() as c:
        rows = c.execute(text("""
            SELECT initiator_agent_id, responder_agent_id, start_at, duration_s, est_bytes
            FROM throughput_experiments WHERE org_id = :o ORDER BY start_at"""),
                         {"o": org.org_id}).all()
    day1 = [r for r in rows if r.start_at < now + timedelta(days=1)]
    assert sum(r.est_bytes for r in day1) <= 30 * GB and len(day1) == 6
    for ag in agents:
        mine = sorted((r.start_at, r.start_at + timedelta(seconds=2 * r.duration_s))
                      for r in rows if str(ag.agent_id) in (str(r.initiator_agent_id),
                                                            str(r.responder_agent_id)))
        for (_, e1), (s2, _) in zip(mine, mine[1:], strict=False):
            assert s2 >= e1 + timedelta(seconds=60)
    budget = api.get("/api/v1/throughput/budget", headers=admin(org)).json()
    assert budget["month"] == datetime.now(UTC).strftime("%Y-%m")
    with db.connect() as c:
        refused = c.execute(text("SELECT refused FROM throughput_budget_ledger "
                                 "WHERE org_id = :o AND month = '2026-12-01'"),
                            {"o": org.org_id}).scalar()
    assert refused and {r["code"] for r in refused} == {"budget_bytes"}
