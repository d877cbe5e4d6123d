// Which agents make up a sender's quorum groups. The API reports quorum latency per group
// name and k/n but not the members, so the pair view rebuilds them with the rule the server
// hands agents (backend services/agents.py default_groups) and checks n against the data.
import type { AgentVM } from "../api/models";

export interface QuorumGroup {
  name: string;
  k: number;
  members: string[];
}

const byName = (a: AgentVM, b: AgentVM) => a.name.localeCompare(b.name);

/** Seed 003 §3 quorums of `me` among meshing agents: majority of its zone, and majority across its region's zones. */
export function quorumGroupsOf(me: AgentVM, fleet: AgentVM[]): QuorumGroup[] {
  const agents = fleet.filter((a) => a.mesh_address);
  const groups: QuorumGroup[] = [];
  const same = (a: AgentVM) => (a.provider ?? "") === (me.provider ?? "") && (a.region ?? "") === (me.region ?? "");
  const zone = agents.filter((a) => same(a) && (a.zone ?? "") === (me.zone ?? "")).sort(byName);
  if (zone.length >= 2) groups.push({ name: "zone-majority", k: Math.floor(zone.length / 2) + 1, members: zone.map((a) => a.id) });
  const byZone = new Map<string, AgentVM>();
  for (const a of [...agents].sort(byName)) {
    if (same(a) && (a.zone ?? "") !== (me.zone ?? "") && !byZone.has(a.zone ?? "")) byZone.set(a.zone ?? "", a);
  }
  if (byZone.size) {
    const members = [me, ...byZone.values()];
    groups.push({ name: "region-majority", k: Math.floor(members.length / 2) + 1, members: members.map((a) => a.id) });
  }
  return groups;
}

/**
 * Names of the groups of `srcId` that `dstId` belongs to, among those reported in the data
 * (name → n); a group whose rebuilt size differs from the reported n is left out, since its
 * members cannot be known.
 */
export function groupsContaining(srcId: string, dstId: string, fleet: AgentVM[], reported: Map<string, number>): Set<string> {
  const me = fleet.find((a) => a.id === srcId);
  if (!me) return new Set();
  return new Set(
    quorumGroupsOf(me, fleet)
      .filter((g) => g.members.includes(dstId) && reported.get(g.name) === g.members.length)
      .map((g) => g.name),
  );
}
