// The fleet (/api/v1/agents) and the enrollment tokens agents join it with; one cached agent list.
import { queryOptions, useQuery } from "@tanstack/react-query";
import { api, unwrap } from "./http";
import type { AgentVM, Level } from "./models";
import { queryClient } from "./queryClient";
import type { components } from "./schema";
import { keyAt } from "../lib/zones";

type S = components["schemas"];
export type EnrollmentToken = S["EnrollmentTokenPublic"];

export async function listAgents(signal?: AbortSignal): Promise<AgentVM[]> {
  const rows = unwrap(await api.GET("/api/v1/agents", { signal }));
  return rows.map((a) => ({
    id: a.id,
    name: a.name,
    status: a.status,
    last_seen_ms: a.last_seen ? Date.parse(a.last_seen) : null,
    version: a.agent_version || null,
    provider: a.provider || null,
    region: a.region || null,
    zone: a.zone || null,
    subnet: a.subnet || null,
    mesh_address: a.mesh_address || null,
    metadata: { instance_type: a.instance_type, private_ip: a.private_ip, public_ip: a.public_ip, mesh_address: a.mesh_address, token_prefix: a.token_prefix },
  }));
}

export async function listEnrollmentTokens(signal?: AbortSignal): Promise<EnrollmentToken[]> {
  return unwrap(await api.GET("/api/v1/enrollment-tokens", { signal }));
}

export async function createEnrollmentToken(name: string): Promise<S["EnrollmentTokenCreated"]> {
  return unwrap(await api.POST("/api/v1/enrollment-tokens", { body: { name } }));
}

export async function revokeEnrollmentToken(id: string): Promise<void> {
  unwrap(await api.DELETE("/api/v1/enrollment-tokens/{token_id}", { params: { path: { token_id: id } } }));
}

// The fleet under one key: the agent list changes rarely, so half a minute of staleness is fine.
export const agentsQuery = queryOptions({ queryKey: ["agents"], queryFn: ({ signal }) => listAgents(signal), staleTime: 30_000 });

/** The agent list for a component; `refetchInterval` for pages that watch the fleet. */
export function useAgents(opts: { enabled?: boolean; refetchInterval?: number } = {}) {
  return useQuery({ ...agentsQuery, ...opts });
}

/** The agent list for API helpers (to turn heatmap keys into agent ids), from the same cache. */
export function fleet(): Promise<AgentVM[]> {
  return queryClient.fetchQuery(agentsQuery);
}

/** Agent ids behind a heatmap key at a level (the API keys nodes by name). */
export function idsFor(agents: AgentVM[], level: Level, key: string): string[] {
  return agents
    .filter((a) => (level === "node" ? a.name === key || a.id === key : keyAt(a, level) === key))
    .map((a) => a.id);
}
