// Throughput experiments (THROUGHPUT_CONTRACT.md): settings, budget, experiments with their
// per-second samples and transitions, and the analyses over them. Maps the API's answers onto
// the view models the throughput components draw, so a change in the API touches this file only.
// Rates stay in bytes per second here; the components show Mbit/s.
import { ApiError, errorMessage, readCookie } from "./http";

export type Proto = "tcp" | "udp";
export const PROTOS: Proto[] = ["tcp", "udp"];
export type ProtoSetting = Proto | "both";
export type Direction = "forward" | "reverse";

export interface SettingsVM {
  enabled: boolean;
  monthly_budget_bytes: number;
  /** null: from the pricing catalog per provider/region pair */
  price_per_gb_usd: number | null;
  default_duration_s: number;
  default_proto: ProtoSetting;
  streams: number;
  udp_rate_bits_per_s: number;
  udp_datagram_bytes: number;
  experiments_per_pair_per_day: number;
  /** null: every cross-region pair */
  pairs: { src_agent_id: string; dst_agent_id: string }[] | null;
}

export interface RefusedVM {
  pair: string;
  reason: string;
}

export interface BudgetVM {
  month: string;
  budgetBytes: number;
  usedBytes: number;
  scheduledBytes: number;
  remainingBytes: number;
  estimatedCostUsd: number | null;
  budgetCostUsd: number | null;
  refused: RefusedVM[];
}

export interface DirStatsVM {
  direction: Direction;
  meanBps: number | null;
  maxBps: number | null;
  minBps: number | null;
  cov: number | null;
  bytes: number | null;
  samples: number | null;
  lossRatio: number | null;
  jitterUs: number | null;
}

export interface TransitionVM {
  direction: Direction;
  atMs: number;
  offsetS: number;
  beforeBps: number;
  afterBps: number;
  bytesBefore: number;
}

export interface ExperimentVM {
  id: string;
  srcId: string;
  dstId: string;
  srcName: string;
  dstName: string;
  proto: Proto;
  startMs: number;
  durationS: number;
  status: string;
  stats: DirStatsVM[];
  transitions: TransitionVM[];
}

export interface SamplePoint {
  t: number;
  bps: number | null;
  loss: number | null;
  jitterUs: number | null;
}

export interface SamplesVM {
  forward: SamplePoint[];
  reverse: SamplePoint[];
}

export interface RegionPairVM {
  srcRegion: string;
  dstRegion: string;
  proto: Proto;
  meanBps: number | null;
  stdBps: number | null;
  cov: number | null;
  experiments: number;
  /** mean of the forward direction over the mean of the reverse one */
  asymmetry: number | null;
  forwardBps: number | null;
  reverseBps: number | null;
}

export interface AgentPairVM extends RegionPairVM {
  srcId: string;
  dstId: string;
  srcName: string;
  dstName: string;
}

export interface PairsVM {
  regions: RegionPairVM[];
  agents: AgentPairVM[];
}

export interface AzMeanVM {
  srcZone: string;
  dstZone: string;
  meanBps: number | null;
  experiments: number;
}

export interface AzPairsVM {
  srcRegion: string;
  dstRegion: string;
  proto: Proto;
  cvRmse: number | null;
  azPairs: AzMeanVM[];
}

export interface DegradationVM {
  srcName: string;
  dstName: string;
  proto: Proto | null;
  startMs: number;
  endMs: number | null;
  levelBps: number | null;
  normBps: number | null;
}

// ---- defensive readers (the analyses carry optional parts) ----

type Obj = Record<string, unknown>;
export const obj = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
export const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown, d = ""): string => (typeof v === "string" ? v : typeof v === "number" ? String(v) : d);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v)) ? Number(v) : null);
const ms = (v: unknown): number | null => {
  if (typeof v !== "string") return null;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : null;
};
const first = (o: Obj, ...keys: string[]): unknown => {
  for (const k of keys) if (o[k] !== undefined && o[k] !== null) return o[k];
  return undefined;
};
const asProto = (v: unknown): Proto => (v === "udp" ? "udp" : "tcp");
const asDirection = (v: unknown): Direction => (v === "reverse" ? "reverse" : "forward");

export function toSettings(v: unknown): SettingsVM {
  const o = obj(v);
  const pairs = o.pairs === null || o.pairs === undefined ? null : arr(o.pairs).map((p) => ({ src_agent_id: str(obj(p).src_agent_id), dst_agent_id: str(obj(p).dst_agent_id) }));
  const dp = o.default_proto;
  return {
    enabled: o.enabled === true,
    monthly_budget_bytes: num(o.monthly_budget_bytes) ?? 0,
    price_per_gb_usd: num(o.price_per_gb_usd),
    default_duration_s: num(o.default_duration_s) ?? 300,
    default_proto: dp === "udp" || dp === "both" ? dp : "tcp",
    streams: num(o.streams) ?? 1,
    udp_rate_bits_per_s: num(o.udp_rate_bits_per_s) ?? 0,
    udp_datagram_bytes: num(o.udp_datagram_bytes) ?? 1400,
    experiments_per_pair_per_day: num(o.experiments_per_pair_per_day) ?? 1,
    pairs,
  };
}

function pairName(p: unknown): string {
  if (typeof p === "string") return p;
  const o = obj(p);
  const s = str(first(o, "src_agent_name", "src_name", "src_region", "src_agent_id", "src"));
  const d = str(first(o, "dst_agent_name", "dst_name", "dst_region", "dst_agent_id", "dst"));
  return s || d ? `${s} → ${d}` : JSON.stringify(p);
}

export function toBudget(v: unknown): BudgetVM {
  const o = obj(v);
  return {
    month: str(o.month),
    budgetBytes: num(o.budget_bytes) ?? 0,
    usedBytes: num(o.used_bytes) ?? 0,
    scheduledBytes: num(o.scheduled_bytes) ?? 0,
    remainingBytes: num(o.remaining_bytes) ?? 0,
    estimatedCostUsd: num(o.estimated_cost_usd),
    budgetCostUsd: num(o.budget_cost_usd),
    refused: arr(o.refused).map((r) => ({ pair: pairName(obj(r).pair ?? r), reason: str(obj(r).reason) })),
  };
}

function toDirStats(direction: Direction, v: unknown): DirStatsVM {
  const o = obj(v);
  return {
    direction,
    meanBps: num(first(o, "mean_bytes_per_s", "mean")),
    maxBps: num(first(o, "max_bytes_per_s", "max")),
    minBps: num(first(o, "min_bytes_per_s", "min")),
    cov: num(o.cov),
    bytes: num(first(o, "bytes", "bytes_transferred", "total_bytes")),
    samples: num(first(o, "samples", "count", "seconds")),
    lossRatio: num(first(o, "loss_ratio", "mean_loss_ratio")),
    jitterUs: num(first(o, "jitter_us", "mean_jitter_us")),
  };
}

function toTransition(v: unknown, fallbackDir: Direction): TransitionVM | null {
  const o = obj(v);
  const atMs = ms(o.at);
  const before = num(o.level_before_bytes_per_s);
  const after = num(o.level_after_bytes_per_s);
  if (atMs === null || before === null || after === null) return null;
  return { direction: o.direction ? asDirection(o.direction) : fallbackDir, atMs, offsetS: num(o.offset_s) ?? 0, beforeBps: before, afterBps: after, bytesBefore: num(o.bytes_before) ?? 0 };
}

/** Per-direction parts arrive either as a list with a `direction` or keyed by direction. */
function byDirection(v: unknown): [Direction, unknown][] {
  if (Array.isArray(v)) return v.map((x) => [asDirection(obj(x).direction), x]);
  const o = obj(v);
  return (["forward", "reverse"] as const).filter((d) => o[d] !== undefined && o[d] !== null).map((d) => [d, o[d]]);
}

export function toExperiment(v: unknown): ExperimentVM {
  const o = obj(v);
  const srcId = str(first(o, "src_agent_id", "initiator_agent_id", "initiator_id"));
  const dstId = str(first(o, "dst_agent_id", "responder_agent_id", "responder_id"));
  const stats = byDirection(first(o, "directions", "stats")).map(([d, x]) => toDirStats(d, x));
  const transitions: TransitionVM[] = [];
  for (const t of arr(o.transitions)) {
    const tv = toTransition(t, "forward");
    if (tv) transitions.push(tv);
  }
  // Transitions may also sit inside each direction's stats.
  for (const [d, x] of byDirection(first(o, "directions", "stats"))) {
    for (const t of arr(obj(x).transitions)) {
      const tv = toTransition(t, d);
      if (tv) transitions.push(tv);
    }
  }
  return {
    id: str(o.id),
    srcId,
    dstId,
    srcName: str(first(o, "src_agent_name", "initiator_name", "src_name"), srcId),
    dstName: str(first(o, "dst_agent_name", "responder_name", "dst_name"), dstId),
    proto: asProto(o.proto),
    startMs: ms(o.start_at) ?? 0,
    durationS: num(o.duration_s) ?? 0,
    status: str(o.status),
    stats,
    transitions,
  };
}

export function toSamples(v: unknown): SamplesVM {
  const out: SamplesVM = { forward: [], reverse: [] };
  for (const [d, x] of byDirection(first(obj(v), "directions") ?? v)) {
    const o = obj(x);
    const pts = arr(first(o, "samples", "points") ?? x);
    out[d] = pts
      .map((p) => {
        const q = obj(p);
        return { t: ms(first(q, "time", "t", "at")) ?? NaN, bps: num(q.bytes_per_s), loss: num(q.loss_ratio), jitterUs: num(q.jitter_us) };
      })
      .filter((p) => Number.isFinite(p.t))
      .sort((a, b) => a.t - b.t);
  }
  return out;
}

function toRegionPair(o: Obj): RegionPairVM {
  return {
    srcRegion: str(o.src_region),
    dstRegion: str(o.dst_region),
    proto: asProto(o.proto),
    meanBps: num(first(o, "mean_bytes_per_s", "mean")),
    stdBps: num(first(o, "std_bytes_per_s", "sigma_bytes_per_s", "std")),
    cov: num(o.cov),
    experiments: num(first(o, "experiments", "experiment_count", "count")) ?? 0,
    asymmetry: num(first(o, "asymmetry", "asymmetry_ratio")),
    forwardBps: num(first(o, "forward_mean_bytes_per_s", "forward_bytes_per_s")),
    reverseBps: num(first(o, "reverse_mean_bytes_per_s", "reverse_bytes_per_s")),
  };
}

export function toPairs(v: unknown): PairsVM {
  const o = obj(v);
  return {
    regions: arr(first(o, "region_pairs", "regions")).map((x) => toRegionPair(obj(x))),
    agents: arr(first(o, "agent_pairs", "agents")).map((x) => {
      const a = obj(x);
      const srcId = str(a.src_agent_id);
      const dstId = str(a.dst_agent_id);
      return { ...toRegionPair(a), srcId, dstId, srcName: str(first(a, "src_agent_name", "src_name"), srcId), dstName: str(first(a, "dst_agent_name", "dst_name"), dstId) };
    }),
  };
}

export function toAzPairs(v: unknown): AzPairsVM[] {
  const rows = Array.isArray(v) ? v : arr(first(obj(v), "region_pairs", "items", "pairs"));
  return rows.map((x) => {
    const o = obj(x);
    return {
      srcRegion: str(o.src_region),
      dstRegion: str(o.dst_region),
      proto: asProto(o.proto),
      cvRmse: num(first(o, "cv_rmse", "max_cv_rmse")),
      azPairs: arr(first(o, "az_pairs", "zone_pairs")).map((z) => {
        const q = obj(z);
        return { srcZone: str(first(q, "src_zone", "src_az")), dstZone: str(first(q, "dst_zone", "dst_az")), meanBps: num(first(q, "mean_bytes_per_s", "mean")), experiments: num(first(q, "experiments", "count")) ?? 0 };
      }),
    };
  });
}

export function toDegradations(v: unknown): DegradationVM[] {
  const rows = Array.isArray(v) ? v : arr(first(obj(v), "degradations", "items"));
  return rows.map((x) => {
    const o = obj(x);
    const src = str(first(o, "src_agent_name", "src_name", "src_region", "src_agent_id"));
    const dst = str(first(o, "dst_agent_name", "dst_name", "dst_region", "dst_agent_id"));
    return {
      srcName: src,
      dstName: dst,
      proto: o.proto === undefined || o.proto === null ? null : asProto(o.proto),
      startMs: ms(first(o, "start", "start_at", "from")) ?? 0,
      endMs: ms(first(o, "end", "end_at", "to")),
      levelBps: num(first(o, "level_bytes_per_s", "level")),
      normBps: num(first(o, "norm_bytes_per_s", "norm")),
    };
  });
}

// ---- calls ----
// Until the routes are in the generated schema these go through a plain fetch with the same
// CSRF and error handling as the typed client.

async function call(method: string, path: string, opts: { query?: Record<string, string | undefined>; body?: unknown; signal?: AbortSignal } = {}): Promise<unknown> {
  const u = new URL(`/api/v1${path}`, window.location.origin);
  for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== "") u.searchParams.set(k, v);
  const headers: Record<string, string> = {};
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET") {
    const t = readCookie("sw_csrf");
    if (t) headers["X-CSRF-Token"] = t;
  }
  const r = await fetch(u, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), credentials: "include", signal: opts.signal });
  const text = await r.text();
  const data: unknown = text ? JSON.parse(text) : undefined;
  if (!r.ok) throw new ApiError(r.status, errorMessage(r.status, data), data);
  return data;
}

export interface Range {
  fromMs: number;
  toMs: number;
}
const iso = (t: number) => new Date(t).toISOString();
const rq = (r: Range) => ({ from: iso(r.fromMs), to: iso(r.toMs) });

export async function getSettings(signal?: AbortSignal): Promise<SettingsVM> {
  return toSettings(await call("GET", "/throughput/settings", { signal }));
}

export async function putSettings(s: SettingsVM): Promise<SettingsVM> {
  return toSettings(await call("PUT", "/throughput/settings", { body: s }));
}

export async function getBudget(signal?: AbortSignal): Promise<BudgetVM> {
  return toBudget(await call("GET", "/throughput/budget", { signal }));
}

export async function listExperiments(q: Range & { srcAgentId?: string; dstAgentId?: string; proto?: Proto; status?: string }, signal?: AbortSignal): Promise<ExperimentVM[]> {
  const v = await call("GET", "/throughput/experiments", { signal, query: { ...rq(q), src_agent_id: q.srcAgentId, dst_agent_id: q.dstAgentId, proto: q.proto, status: q.status } });
  return (Array.isArray(v) ? v : arr(first(obj(v), "items", "experiments"))).map(toExperiment);
}

export interface NewExperiment {
  src_agent_id: string;
  dst_agent_id: string;
  proto: Proto;
  /** null: now */
  start_at: string | null;
}

export async function createExperiment(body: NewExperiment): Promise<ExperimentVM> {
  return toExperiment(await call("POST", "/throughput/experiments", { body }));
}

export async function getExperiment(id: string, signal?: AbortSignal): Promise<ExperimentVM> {
  return toExperiment(await call("GET", `/throughput/experiments/${encodeURIComponent(id)}`, { signal }));
}

export async function getExperimentSamples(id: string, signal?: AbortSignal): Promise<SamplesVM> {
  return toSamples(await call("GET", `/throughput/experiments/${encodeURIComponent(id)}/samples`, { signal }));
}

export async function getPairs(q: Range & { proto?: Proto }, signal?: AbortSignal): Promise<PairsVM> {
  return toPairs(await call("GET", "/throughput/pairs", { signal, query: { ...rq(q), proto: q.proto } }));
}

export async function getAzPairs(q: Range & { proto?: Proto; srcRegion?: string; dstRegion?: string }, signal?: AbortSignal): Promise<AzPairsVM[]> {
  return toAzPairs(await call("GET", "/throughput/az-pairs", { signal, query: { ...rq(q), proto: q.proto, src_region: q.srcRegion, dst_region: q.dstRegion } }));
}

export async function getDegradations(q: Range, signal?: AbortSignal): Promise<DegradationVM[]> {
  return toDegradations(await call("GET", "/throughput/degradations", { signal, query: rq(q) }));
}
