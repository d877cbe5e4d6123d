// What the overview's panels read beside the heatmap: the fleet's largest level shifts (each
// pair analysed on its own) over the existing analytics API.
import { api, unwrap } from "./http";
import { isoInstant } from "../lib/format";

export interface ShiftVM {
  src: string;
  dst: string;
  atMs: number;
  /** level after minus level before, microseconds */
  stepUs: number;
  beforeUs: number;
  afterUs: number;
}

/** Every pair's level shifts over the range, largest step first, with the window of the medians
 * they were found in: the server fits it to the span that holds data (10 s windows on a young
 * install's minutes, 5-minute ones over a day), so a new fleet's first step shows at once. */
export async function getFleetShifts(q: { fromMs: number; toMs: number }, signal?: AbortSignal): Promise<{ windowS: number; shifts: ShiftVM[]; names: Record<string, string> }> {
  const r = unwrap(
    await api.GET("/api/v1/analytics/{kind}/level-shifts", {
      params: { path: { kind: "mesh" }, query: { start: isoInstant(q.fromMs), end: isoInstant(q.toMs), fit_window: true, group_by: "pair" } },
      signal,
    }),
  );
  const out: ShiftVM[] = [];
  for (const g of r.groups ?? []) {
    const key = g.group as unknown;
    if (!Array.isArray(key) || key.length < 2 || key[0] === key[1]) continue; // self-loops measure the host
    for (const s of g.shifts) {
      out.push({ src: String(key[0]), dst: String(key[1]), atMs: Date.parse(s.time), stepUs: s.step, beforeUs: s.level_before, afterUs: s.level_after });
    }
  }
  // names: each agent id's name from the answer, deleted agents as "<name> (deleted)".
  return { windowS: r.window_s, names: r.names ?? {}, shifts: out.sort((a, b) => Math.abs(b.stepUs) - Math.abs(a.stepUs)) };
}
