// Maintenance windows (/api/v1/maintenance-windows): one-off or recurring quiet periods.
import { api as client, unwrap } from "./http";
import { arr, ms, num, obj, str } from "./decode";
import { toMatchers, type Matcher } from "./silences";
import type { components } from "./schema";

type S = components["schemas"];

export interface MaintenanceVM {
  id: string;
  name: string;
  startsMs: number | null;
  endsMs: number | null;
  rrule: string | null;
  durationS: number | null;
  timezone: string;
  ruleIds: string[];
  matchers: Matcher[];
  comment: string;
  activeNow: boolean;
  nextStartMs: number | null;
}

function toMaintenance(v: unknown): MaintenanceVM {
  const m = obj(v);
  return {
    id: str(m.id),
    name: str(m.name),
    startsMs: ms(m.starts_at),
    endsMs: ms(m.ends_at),
    rrule: typeof m.rrule === "string" && m.rrule ? m.rrule : null,
    durationS: num(m.duration_s),
    timezone: str(m.timezone, "UTC"),
    ruleIds: arr(m.rule_ids).map((x) => str(x)),
    matchers: toMatchers(m.matchers),
    comment: str(m.comment),
    activeNow: m.active_now === true,
    nextStartMs: ms(m.next_start),
  };
}

export async function listMaintenance(signal?: AbortSignal): Promise<MaintenanceVM[]> {
  return arr(unwrap(await client.GET("/api/v1/maintenance-windows", { signal }))).map(toMaintenance);
}

export async function createMaintenance(body: S["MaintenanceWindowCreate"]): Promise<MaintenanceVM> {
  return toMaintenance(unwrap(await client.POST("/api/v1/maintenance-windows", { body })));
}

export async function deleteMaintenance(id: string): Promise<void> {
  unwrap(await client.DELETE("/api/v1/maintenance-windows/{window_id}", { params: { path: { window_id: id } } }));
}
