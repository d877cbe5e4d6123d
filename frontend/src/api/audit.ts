// The org's audit log (admins only), over the generated client; used with TanStack Query.
import { api, unwrap } from "./http";
import type { components } from "./schema";

type S = components["schemas"];
export type AuditEvent = S["AuditEventPublic"];
export type AuditPage = S["AuditPage"];

export interface AuditFilters {
  actor?: string;
  action?: string;
  target_type?: string;
}

export async function listAuditEvents(filters: AuditFilters, cursor?: string, signal?: AbortSignal): Promise<AuditPage> {
  const query = Object.fromEntries(Object.entries({ ...filters, cursor }).filter(([, v]) => v));
  return unwrap(await api.GET("/api/v1/audit", { params: { query }, signal }));
}
