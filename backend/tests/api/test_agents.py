from tests.helpers import enroll


def test_enrollment_needs_a_valid_token(api):
    r = api.post("/api/v1/agents/enroll",
                 json={"enrollment_token": "swe_doesnotexistdoesnotexist", "name": "x"})
    assert r.status_code == 401


def test_re_enrolling_a_name_rotates_its_token_and_keeps_its_id(api, make_org):
    org = make_org()
    first = enroll(api, org.enrollment_token, "vm-1")
    second = enroll(api, org.enrollment_token, "vm-1")
    assert first.agent_id == second.agent_id
    assert api.get("/api/v1/agent/config", headers=first.headers).status_code == 401
    assert api.get("/api/v1/agent/config", headers=second.headers).status_code == 200


def test_config_lists_every_peer_including_self_and_is_etag_versioned(api, make_org):
    org = make_org()
    agents = [enroll(api, org.enrollment_token, f"n{i}", provider="aws", region="r1",
                     zone="z1") for i in range(3)]
    r = api.get("/api/v1/agent/config", headers=agents[0].headers)
    assert r.status_code == 200
    cfg = r.json()
    assert {p["agent_id"] for p in cfg["mesh"]["peers"]} == {a.agent_id for a in agents}
    zone = next(g for g in cfg["mesh"]["groups"] if g["name"] == "zone-majority")
    assert zone["k"] == 2 and len(zone["members"]) == 3
    etag = r.headers["etag"]
    assert etag == f'"{cfg["version"]}"'
    assert api.get("/api/v1/agent/config", headers={**agents[0].headers,
                                                     "If-None-Match": etag}).status_code == 304
    enroll(api, org.enrollment_token, "n3", provider="aws", region="r1", zone="z2")
    changed = api.get("/api/v1/agent/config", headers={**agents[0].headers,
                                                        "If-None-Match": etag})
    assert changed.status_code == 200 and changed.json()["version"] != cfg["version"]
    region = next(g for g in changed.json()["mesh"]["groups"] if g["name"] == "region-majority")
    assert len(region["members"]) == 2


def test_quorum_groups_are_listed_with_their_members_for_the_org_only(api, make_org):
    org, other = make_org(), make_org()
    a, b, c = (enroll(api, org.enrollment_token, n, provider="aws", region="r1", zone=z)
               for n, z in (("a", "z1"), ("b", "z1"), ("c", "z2")))
    key = {"Authorization": f"Bearer {org.api_key}"}
    r = api.get(f"/api/v1/agents/{a.agent_id}/quorum-groups", headers=key)
    assert r.status_code == 200, r.text
    groups = {g["name"]: g for g in r.json()}
    assert groups["zone-majority"]["k"] == 2
    assert set(groups["zone-majority"]["members"]) == {a.agent_id, b.agent_id}
    assert set(groups["region-majority"]["members"]) == {a.agent_id, c.agent_id}
    cfg = api.get("/api/v1/agent/config", headers=a.headers).json()
    assert {g["name"]: set(g["members"]) for g in cfg["mesh"]["groups"]} == {
        n: set(g["members"]) for n, g in groups.items()}
    foreign = api.get(f"/api/v1/agents/{a.agent_id}/quorum-groups",
                      headers={"Authorization": f"Bearer {other.api_key}"})
    assert foreign.status_code == 404


def test_every_pair_gets_a_topology_class_from_metadata(api, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "a", provider="aws", region="r1", zone="z1", subnet="s1")
    b = enroll(api, org.enrollment_token, "b", provider="aws", region="r1", zone="z1", subnet="s1")
    c = enroll(api, org.enrollment_token, "c", provider="aws", region="r1", zone="z1", subnet="s2")
    d = enroll(api, org.enrollment_token, "d", provider="aws", region="r1", zone="z2", subnet="s3")
    e = enroll(api, org.enrollment_token, "e", provider="aws", region="r2", zone="z9", subnet="s9")
    f = enroll(api, org.enrollment_token, "f", provider="gcp", region="r1", zone="z1", subnet="s1")
    pairs = api.get("/api/v1/agents/pairs",
                    headers={"Authorization": f"Bearer {org.api_key}"}).json()
    cls = {(p["src_agent_id"], p["dst_agent_id"]): p["topology_class"] for p in pairs}
    assert len(cls) == 36
    assert cls[(a.agent_id, a.agent_id)] == "self"
    assert cls[(a.agent_id, b.agent_id)] == "same_subnet"
    assert cls[(a.agent_id, c.agent_id)] == "cross_subnet"
    assert cls[(a.agent_id, d.agent_id)] == "cross_az"
    assert cls[(a.agent_id, e.agent_id)] == "cross_region"
    assert cls[(a.agent_id, f.agent_id)] == "cross_provider"


def test_an_agent_updates_its_own_metadata_and_topology_follows(api, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "a", provider="aws", region="r1", zone="z1")
    b = enroll(api, org.enrollment_token, "b", provider="aws", region="r1", zone="z1")
    r = api.patch("/api/v1/agent/self", headers=a.headers,
                  json={"agent_version": "1.2.3", "metadata": {"zone": "z2"}})
    assert r.status_code == 204
    key = {"Authorization": f"Bearer {org.api_key}"}
    pairs = api.get("/api/v1/agents/pairs", headers=key).json()
    cls = {(p["src_agent_id"], p["dst_agent_id"]): p["topology_class"] for p in pairs}
    assert cls[(a.agent_id, b.agent_id)] == "cross_az"
    agent = api.get(f"/api/v1/agents/{a.agent_id}", headers=key).json()
    assert agent["agent_version"] == "1.2.3" and agent["status"] == "online"
