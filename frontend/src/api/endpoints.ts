// Every call the pages make, over the generated client; maps API types onto view models.
import { api, unwrap } from "./http";
import type { components } from "./schema";
import type {
  AgentVM,
  BoxVM,
  CdfPoint,
  DailyMedian,
  HeatStat,
  HeatmapVM,
  HistBin,
  LevelSegment,
  Level,
  Me,
  NamedSeries,
  StorageRow,
  SummaryVM,
  TimelinePoint,
  XYRow,
} from "./models";
import type { CdfSeries } from "../components/pair/CdfChart";

export type { Me } from "./models";
type S = components["schemas"];
export type EnrollmentToken = S["EnrollmentTokenPublic"];

// ---- session ----

export async function getMe(): Promise<Me | null> {
  const r = await api.GET("/api/v1/auth/me");
  if (r.response.status === 401) return null;
  const me = unwrap(r);
  return { email: me.email ?? "", org_name: me.org_name };
}

export async function login(email: string, password: string): Promise<Me> {
  const me = unwrap(await api.POST("/api/v1/auth/login", { body: { email, password } }));
  return { email: me.email ?? email, org_name: me.org_name };
}

export async function logout(): Promise<void> {
  await api.POST("/api/v1/auth/logout");
}

// ---- fleet and settings ----

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

export async function listApiKeys(signal?: AbortSignal): Promise<S["ApiKeyPublic"][]> {
  return unwrap(await api.GET("/api/v1/api-keys", { signal }));
}

export async function createApiKey(name: string): Promise<S["ApiKeyCreated"]> {
  return unwrap(await api.POST("/api/v1/api-keys", { body: { name } }));
}

export async function revokeApiKey(id: string): Promise<void> {
  unwrap(await api.DELETE("/api/v1/api-keys/{key_id}", { params: { path: { key_id: id } } }));
}

export async function listUsers(signal?: AbortSignal): Promise<S["UserPublic"][]> {
  return unwrap(await api.GET("/api/v1/users", { signal }));
}

export async function createUser(email: string, password: string, role: string): Promise<void> {
  unwrap(await api.POST("/api/v1/users", { body: { email, password, role } }));
}

export async function deleteUser(id: string): Promise<void> {
  unwrap(await api.DELETE("/api/v1/users/{user_id}", { params: { path: { user_id: id } } }));
}

// ---- analytics ----

export interface RangeQuery {
  fromMs: number;
  toMs: number;
}

export interface PairQuery extends RangeQuery {
  level: Level;
  src: string;
  dst: string;
}

const iso = (ms: number) => new Date(ms).toISOString();

export async function getHeatmap(q: RangeQuery & { level: Level; stat: HeatStat }, signal?: AbortSignal): Promise<HeatmapVM> {
  void q;
  void signal;
  throw new Error("heatmap endpoint not available");
}

export async function getPairSummary(q: PairQuery, signal?: AbortSignal): Promise<SummaryVM | null> {
  void q;
  void signal;
  throw new Error("summary endpoint not available");
}

export async function getPairTimeline(q: PairQuery, windowS: number, signal?: AbortSignal): Promise<TimelinePoint[]> {
  void [q, windowS, signal, iso];
  throw new Error("timeline endpoint not available");
}

export async function getPairLevelShifts(q: PairQuery, windowS: number, signal?: AbortSignal): Promise<LevelSegment[]> {
  void [q, windowS, signal];
  throw new Error("level-shift endpoint not available");
}

export async function getPairHistogram(q: PairQuery, bucketUs: number | null, signal?: AbortSignal): Promise<HistBin[]> {
  void [q, bucketUs, signal];
  throw new Error("histogram endpoint not available");
}

export async function getPairCdf(q: PairQuery, signal?: AbortSignal): Promise<CdfPoint[]> {
  void [q, signal];
  throw new Error("CDF endpoint not available");
}

export interface QuorumVM {
  name: string;
  k: number;
  n: number;
  summary: SummaryVM;
  cdf: CdfPoint[];
}

export async function getQuorum(q: PairQuery, signal?: AbortSignal): Promise<QuorumVM[]> {
  void [q, signal];
  throw new Error("quorum endpoint not available");
}

export async function getBoxes(q: RangeQuery & { groupBy: "topology_class" | "payload_bytes" }, signal?: AbortSignal): Promise<BoxVM[]> {
  void [q, signal];
  throw new Error("box-plot endpoint not available");
}

export async function getPairLines(q: RangeQuery & { topologyClass: string; windowS: number }, signal?: AbortSignal): Promise<NamedSeries[]> {
  void [q, signal];
  throw new Error("pair series endpoint not available");
}

export async function getStorageComparison(q: RangeQuery, signal?: AbortSignal): Promise<StorageRow[]> {
  void [q, signal];
  throw new Error("storage comparison endpoint not available");
}

export async function getStorageCdf(q: RangeQuery & { op: string; sizeBytes: number }, signal?: AbortSignal): Promise<CdfSeries[]> {
  void [q, signal];
  throw new Error("storage CDF endpoint not available");
}

export async function getDailyMedians(q: RangeQuery & { op: string; sizeBytes: number }, signal?: AbortSignal): Promise<DailyMedian[]> {
  void [q, signal];
  throw new Error("daily medians endpoint not available");
}

export async function getReplication(q: RangeQuery, signal?: AbortSignal): Promise<XYRow[]> {
  void [q, signal];
  throw new Error("replication endpoint not available");
}

export async function getConsistency(q: RangeQuery, signal?: AbortSignal): Promise<CdfSeries[]> {
  void [q, signal];
  throw new Error("consistency endpoint not available");
}

export async function getConcurrency(q: RangeQuery, signal?: AbortSignal): Promise<XYRow[]> {
  void [q, signal];
  throw new Error("concurrency endpoint not available");
}
