// Heatmap keys of agents at a level (node, zone, region): the heatmap, the pair view, the
// alert marks and the rule editor's zone scope all name zones the same way.
import type { AgentVM, Level } from "../api/models";

/** The heatmap key of an agent at a level (the same keys idsFor reads back). */
export function keyAt(a: AgentVM, level: Level): string {
  // Zone names repeat across regions and providers (Azure's "1"): the API keys zones by all three.
  if (level === "zone") return `${a.provider || "?"}/${a.region || "?"}/${a.zone || "?"}`;
  return level === "node" ? a.name : a.region || "?";
}

/** How a heatmap key reads: a zone key "provider/region/zone" as "provider zone" when the zone
 * names its region (AWS, GCP), else "provider region zone". */
export function keyLabel(key: string, level: Level): string {
  if (level !== "zone") return key;
  const [provider, region, ...rest] = key.split("/");
  const zone = rest.join("/");
  if (zone === undefined || region === undefined) return key;
  return zone.startsWith(region) && zone !== region ? `${provider} ${zone}` : `${provider} ${region} ${zone}`;
}
