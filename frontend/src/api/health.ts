// The service's own health (GET /api/v1/health): 200 when every part is ok, 503 with the same
// body naming what is not.
import { api } from "./http";
import type { components } from "./schema";

export type Health = components["schemas"]["Health"];

export async function getHealth(signal?: AbortSignal): Promise<Health> {
  const r = await api.GET("/api/v1/health", { signal });
  const body = (r.data ?? r.error) as Health | undefined;
  if (!body || typeof body !== "object" || !("ok" in body)) throw new Error(`health answered ${r.response.status}`);
  return body;
}

/** Each part that is not ok, as "part: why". */
export function problems(h: Health): string[] {
  const out: string[] = [];
  for (const [name, c] of [["database", h.database], ["redis", h.redis], ["worker", h.worker], ["beat", h.beat]] as const) {
    if (!c.ok) out.push(`${name}: ${c.detail}`);
  }
  if (!h.worker_metrics.ok) out.push(`worker metrics: ${h.worker_metrics.detail}`);
  for (const r of h.alerts.failing) out.push(`alert rule ${r.rule_id}: failed its last ${r.failures_in_a_row} evaluations: ${r.last_error ?? "unknown error"}`);
  if (!h.alerts.ok && h.alerts.failing.length === 0) out.push(`alert evaluation: ${h.alerts.detail}`);
  for (const j of h.jobs.jobs) if (!j.ok) out.push(`job ${j.job}: ${j.detail}`);
  if (!h.jobs.ok && !h.jobs.jobs.some((j) => !j.ok)) out.push(`jobs: ${h.jobs.detail}`);
  return out;
}
