import { describe, expect, it } from "vitest";
import type { AgentVM } from "../api/models";
import { groupsContaining, quorumGroupsOf } from "./quorum";

const agent = (name: string, region: string, zone: string, mesh = true): AgentVM => ({
  id: `id-${name}`,
  name,
  status: "online",
  last_seen_ms: null,
  version: null,
  provider: "aws",
  region,
  zone,
  subnet: null,
  mesh_address: mesh ? "10.0.0.1:7300" : null,
  metadata: {},
});

// Two agents in zone a, one in b and two in c of us-east-1, one in eu-west-1, one not meshing.
const fleet = [
  agent("use1-a-2", "us-east-1", "a"),
  agent("use1-a-1", "us-east-1", "a"),
  agent("use1-b-1", "us-east-1", "b"),
  agent("use1-c-2", "us-east-1", "c"),
  agent("use1-c-1", "us-east-1", "c"),
  agent("euw1-a-1", "eu-west-1", "a"),
  agent("use1-a-3", "us-east-1", "a", false),
];

describe("quorum groups", () => {
  it("rebuilds the zone majority and the one-per-zone region majority of a sender", () => {
    const groups = quorumGroupsOf(fleet[1]!, fleet);
    expect(groups).toEqual([
      { name: "zone-majority", k: 2, members: ["id-use1-a-1", "id-use1-a-2"] },
      { name: "region-majority", k: 2, members: ["id-use1-a-1", "id-use1-b-1", "id-use1-c-1"] },
    ]);
  });
  it("names only the groups of the source that contain the destination", () => {
    const reported = new Map([
      ["zone-majority", 2],
      ["region-majority", 3],
    ]);
    expect([...groupsContaining("id-use1-a-1", "id-use1-a-2", fleet, reported)]).toEqual(["zone-majority"]);
    expect([...groupsContaining("id-use1-a-1", "id-use1-c-1", fleet, reported)]).toEqual(["region-majority"]);
    expect(groupsContaining("id-use1-a-1", "id-use1-c-2", fleet, reported).size).toBe(0);
    expect(groupsContaining("id-use1-a-1", "id-euw1-a-1", fleet, reported).size).toBe(0);
  });
  it("leaves out a group whose reported size differs from the rebuilt one", () => {
    expect(groupsContaining("id-use1-a-1", "id-use1-a-2", fleet, new Map([["zone-majority", 3]])).size).toBe(0);
  });
});
