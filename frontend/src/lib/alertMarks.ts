// Which heatmap cells and pairs carry a firing alert: each alert's series name a source and
// destination agent; the heatmap keys agents by name, zone or region depending on its level.
import type { AgentRef, AlertVM } from "../api/alerts";
import type { AgentVM, Level } from "../api/models";
import { keyAt } from "./zones";

function resolve(ref: AgentRef | null, agents: AgentVM[]): AgentVM | undefined {
  if (!ref) return undefined;
  return agents.find((a) => a.id === ref.id) ?? agents.find((a) => a.name === ref.name);
}

/** "src|dst" heatmap cell → firing alerts whose series run between agents behind that cell. */
export function firingCells(alerts: AlertVM[], agents: AgentVM[], level: Level): Map<string, AlertVM[]> {
  const out = new Map<string, AlertVM[]>();
  for (const al of alerts) {
    if (al.state !== "firing") continue;
    const seen = new Set<string>();
    for (const s of al.series) {
      const src = resolve(s.src, agents);
      const dst = resolve(s.dst, agents);
      if (!src || !dst) continue;
      const cell = `${keyAt(src, level)}|${keyAt(dst, level)}`;
      if (seen.has(cell)) continue;
      seen.add(cell);
      out.set(cell, [...(out.get(cell) ?? []), al]);
    }
  }
  return out;
}

/** Firing alerts with a series between agents behind the pair's keys (names or ids at the level). */
export function alertsOnPair(alerts: AlertVM[], agents: AgentVM[], level: Level, srcKey: string, dstKey: string): AlertVM[] {
  const behind = (key: string) => new Set(agents.filter((a) => a.id === key || keyAt(a, level) === key).map((a) => a.id));
  const src = behind(srcKey);
  const dst = behind(dstKey);
  return alerts.filter(
    (al) =>
      al.state === "firing" &&
      al.series.some((s) => {
        const a = resolve(s.src, agents);
        const b = resolve(s.dst, agents);
        return Boolean(a && b && src.has(a.id) && dst.has(b.id));
      }),
  );
}

/** A dashboard path with from/to shows that absolute range (the picker needs range=custom). */
export function withCustomRange(path: string): string {
  const q = path.indexOf("?");
  if (q < 0) return path;
  const params = new URLSearchParams(path.slice(q + 1));
  if (params.get("from") && params.get("to") && !params.get("range")) params.set("range", "custom");
  return `${path.slice(0, q)}?${params.toString()}`;
}
