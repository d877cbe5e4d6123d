// Throughput experiments (THROUGHPUT_CONTRACT.md): settings, budget, experiments with their
// per-second samples and transitions, and the analyses over them. Maps the API's answers onto
// the view models the throughput components draw, so a change in the API touches this file only.
// Rates stay in bytes per second here; the components show Mbit/s.
import { fleet } from "./agents";
import { api, unwrap } from "./http";
import { isoInstant as iso } from "../lib/format";

export type Proto = "tcp" | "udp";
export const PROTOS: Proto[] = ["tcp", "udp"];
export type ProtoSetting = Proto | "both";
export type Direction = "forward" | "reverse";
export type Status = "scheduled" | "running" | "done" | "missed";

export interface SettingsVM {
  enabled: boolean;
  monthly_budget_bytes: number;
  /** optional cap on the estimated egress cost per month; null: bytes only */
  monthly_budget_usd: number | null;
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
  proto: Proto | null;
  reason: string;
  experiments: number | null;
}

export interface BudgetVM {
  month: string;
  budgetBytes: number;
  usedBytes: number;
  scheduledBytes: number;
  remainingBytes: number;
  usedCostUsd: number | null;
  scheduledCostUsd: number | null;
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
  /** why a missed experiment stored nothing, as far as the server can tell */
  missedReason: string | null;
  estBytes: number | null;
  estCostUsd: number | null;
  /** "scheduler" or "manual" */
  origin: string;
  /** forward mean / reverse mean (detail only) */
  asymmetry: number | null;
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

export interface AzComparisonVM {
  a: string;
  b: string;
  /** hours both AZ pairs measured */
  slots: number;
  cvRmse: number | null;
}

export interface AzPairsVM {
  srcRegion: string;
  dstRegion: string;
  proto: Proto;
  azPairs: AzMeanVM[];
  comparisons: AzComparisonVM[];
}

export interface DegradationVM {
  srcName: string;
  dstName: string;
  srcRegion: string;
  dstRegion: string;
  proto: Proto;
  startMs: number;
  endMs: number | null;
  levelBps: number | null;
  normBps: number | null;
  experiments: number;
}

// ---- readers: nullable statistics stay null, never 0 ----

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
const asProto = (v: unknown): Proto => (v === "udp" ? "udp" : "tcp");
const asDirection = (v: unknown): Direction => (v === "reverse" ? "reverse" : "forward");

export function toSettings(v: unknown): SettingsVM {
  const o = obj(v);
  const pairs = o.pairs === null || o.pairs === undefined ? null : arr(o.pairs).map((p) => ({ src_agent_id: str(obj(p).src_agent_id), dst_agent_id: str(obj(p).dst_agent_id) }));
  const dp = o.default_proto;
  return {
    enabled: o.enabled === true,
    monthly_budget_bytes: num(o.monthly_budget_bytes) ?? 0,
    monthly_budget_usd: num(o.monthly_budget_usd),
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

/** The fleet by agent id, so rows that carry ids read as the fleet names them. */
export type Names = ReadonlyMap<string, { name: string; region: string | null }>;
const NO_NAMES: Names = new Map();
const nameOf = (names: Names, id: string) => names.get(id)?.name ?? id;

function pairName(p: unknown, names: Names): string {
  if (typeof p === "string") return p;
  const o = obj(p);
  const s = str(o.src_agent_id);
  const d = str(o.dst_agent_id);
  return s || d ? `${nameOf(names, s)} → ${nameOf(names, d)}` : JSON.stringify(p);
}

export function toBudget(v: unknown, names: Names = NO_NAMES): BudgetVM {
  const o = obj(v);
  return {
    month: str(o.month),
    budgetBytes: num(o.budget_bytes) ?? 0,
    usedBytes: num(o.used_bytes) ?? 0,
    scheduledBytes: num(o.scheduled_bytes) ?? 0,
    remainingBytes: num(o.remaining_bytes) ?? 0,
    usedCostUsd: num(o.used_cost_usd),
    scheduledCostUsd: num(o.scheduled_cost_usd),
    estimatedCostUsd: num(o.estimated_cost_usd),
    budgetCostUsd: num(o.budget_cost_usd),
    refused: arr(o.refused).map((r) => {
      const q = obj(r);
      return { pair: pairName(q.pair, names), proto: q.proto === undefined || q.proto === null ? null : asProto(q.proto), reason: str(q.reason), experiments: num(q.experiments) };
    }),
  };
}

function toDirStats(direction: Direction, v: unknown): DirStatsVM {
  const o = obj(v);
  return {
    direction,
    meanBps: num(o.mean_bytes_per_s),
    maxBps: num(o.max_bytes_per_s),
    minBps: num(o.min_bytes_per_s),
    cov: num(o.cov),
    bytes: num(o.bytes),
    samples: num(o.seconds),
    lossRatio: num(o.loss_ratio_mean),
    jitterUs: num(o.jitter_us_mean),
  };
}

function toTransition(v: unknown, direction: Direction): TransitionVM | null {
  const o = obj(v);
  const atMs = ms(o.at);
  const before = num(o.level_before_bytes_per_s);
  const after = num(o.level_after_bytes_per_s);
  if (atMs === null || before === null || after === null) return null;
  return { direction, atMs, offsetS: num(o.offset_s) ?? 0, beforeBps: before, afterBps: after, bytesBefore: num(o.bytes_before) ?? 0 };
}

/** Per-direction parts: a list, each with its `direction` (the detail omits them before any sample). */
function byDirection(v: unknown): [Direction, unknown][] {
  return arr(v).map((x) => [asDirection(obj(x).direction), x]);
}

export function toExperiment(v: unknown, names: Names = NO_NAMES): ExperimentVM {
  const o = obj(v);
  const srcId = str(o.initiator_agent_id);
  const dstId = str(o.responder_agent_id);
  const stats = byDirection(o.directions).map(([d, x]) => toDirStats(d, x));
  const transitions: TransitionVM[] = [];
  for (const [d, x] of byDirection(o.directions)) {
    for (const t of arr(obj(x).transitions)) {
      const tv = toTransition(t, d);
      if (tv) transitions.push(tv);
    }
  }
  return {
    id: str(o.id),
    srcId,
    dstId,
    srcName: nameOf(names, srcId),
    dstName: nameOf(names, dstId),
    proto: asProto(o.proto),
    startMs: ms(o.start_at) ?? 0,
    durationS: num(o.duration_s) ?? 0,
    status: str(o.status),
    missedReason: typeof o.missed_reason === "string" ? o.missed_reason : null,
    estBytes: num(o.est_bytes),
    estCostUsd: num(o.est_cost_usd),
    origin: str(o.origin),
    asymmetry: num(o.asymmetry),
    stats,
    transitions,
  };
}

export function toSamples(v: unknown): SamplesVM {
  const out: SamplesVM = { forward: [], reverse: [] };
  for (const [d, x] of byDirection(obj(v).directions)) {
    out[d] = arr(obj(x).samples)
      .map((p) => {
        const q = obj(p);
        return { t: ms(q.time) ?? NaN, bps: num(q.bytes_per_s), loss: num(q.loss_ratio), jitterUs: num(q.jitter_us) };
      })
      .filter((p) => Number.isFinite(p.t))
      .sort((a, b) => a.t - b.t);
  }
  return out;
}

function flow(o: Obj): Omit<RegionPairVM, "srcRegion" | "dstRegion"> {
  const mean = num(o.mean_bytes_per_s);
  return {
    proto: asProto(o.proto),
    meanBps: mean,
    stdBps: num(o.std_bytes_per_s),
    cov: num(o.cov),
    experiments: num(o.experiments) ?? 0,
    asymmetry: num(o.asymmetry),
    forwardBps: mean,
    reverseBps: num(o.reverse_mean_bytes_per_s),
  };
}

export function toPairs(v: unknown, names: Names = NO_NAMES): PairsVM {
  const o = obj(v);
  return {
    regions: arr(o.region_pairs).map((x) => {
      const r = obj(x);
      return { ...flow(r), srcRegion: str(r.src_region), dstRegion: str(r.dst_region) };
    }),
    agents: arr(o.agent_pairs).map((x) => {
      const a = obj(x);
      const srcId = str(a.src_agent_id);
      const dstId = str(a.dst_agent_id);
      return { ...flow(a), srcId, dstId, srcName: nameOf(names, srcId), dstName: nameOf(names, dstId), srcRegion: names.get(srcId)?.region ?? "", dstRegion: names.get(dstId)?.region ?? "" };
    }),
  };
}

export function toAzPairs(v: unknown): AzPairsVM[] {
  return arr(obj(v).region_pairs).map((x) => {
    const o = obj(x);
    const zp = (z: unknown) => `${str(obj(z).src_zone)} → ${str(obj(z).dst_zone)}`;
    return {
      srcRegion: str(o.src_region),
      dstRegion: str(o.dst_region),
      proto: asProto(o.proto),
      azPairs: arr(o.az_pairs).map((z) => {
        const q = obj(z);
        return { srcZone: str(q.src_zone), dstZone: str(q.dst_zone), meanBps: num(q.mean_bytes_per_s), experiments: num(q.experiments) ?? 0 };
      }),
      comparisons: arr(o.comparisons).map((c) => {
        const q = obj(c);
        return { a: zp(q.a), b: zp(q.b), slots: num(q.slots) ?? 0, cvRmse: num(q.cv_rmse) };
      }),
    };
  });
}

export function toDegradations(v: unknown, names: Names = NO_NAMES): DegradationVM[] {
  return arr(obj(v).degradations).map((x) => {
    const o = obj(x);
    return {
      srcName: nameOf(names, str(o.src_agent_id)),
      dstName: nameOf(names, str(o.dst_agent_id)),
      srcRegion: str(o.src_region),
      dstRegion: str(o.dst_region),
      proto: asProto(o.proto),
      startMs: ms(o.start) ?? 0,
      endMs: ms(o.end),
      levelBps: num(o.level_bytes_per_s),
      normBps: num(o.norm_bytes_per_s),
      experiments: num(o.experiments) ?? 0,
    };
  });
}

// ---- calls ----


async function names(): Promise<Names> {
  try {
    return new Map((await fleet()).map((a) => [a.id, { name: a.name, region: a.region }]));
  } catch {
    // Ids still identify the agents when the fleet cannot be read.
    return NO_NAMES;
  }
}

export interface Range {
  fromMs: number;
  toMs: number;
}

export async function getSettings(signal?: AbortSignal): Promise<SettingsVM> {
  return toSettings(unwrap(await api.GET("/api/v1/throughput/settings", { signal })));
}

export async function putSettings(s: SettingsVM): Promise<SettingsVM> {
  return toSettings(unwrap(await api.PUT("/api/v1/throughput/settings", { body: s })));
}

export async function getBudget(signal?: AbortSignal): Promise<BudgetVM> {
  const [b, n] = await Promise.all([api.GET("/api/v1/throughput/budget", { signal }), names()]);
  return toBudget(unwrap(b), n);
}

export async function listExperiments(q: Range & { status?: Status }, signal?: AbortSignal): Promise<ExperimentVM[]> {
  const [r, n] = await Promise.all([api.GET("/api/v1/throughput/experiments", { signal, params: { query: { from: iso(q.fromMs), to: iso(q.toMs), status: q.status } } }), names()]);
  return unwrap(r).map((e) => toExperiment(e, n));
}

export interface NewExperiment {
  initiator_agent_id: string;
  responder_agent_id: string;
  proto: Proto;
  /** null: as soon as both agents can have polled their config */
  start_at: string | null;
}

export async function createExperiment(body: NewExperiment): Promise<ExperimentVM> {
  const [r, n] = await Promise.all([api.POST("/api/v1/throughput/experiments", { body }), names()]);
  return toExperiment(unwrap(r), n);
}

export async function getExperiment(id: string, signal?: AbortSignal): Promise<ExperimentVM> {
  const [r, n] = await Promise.all([api.GET("/api/v1/throughput/experiments/{experiment_id}", { signal, params: { path: { experiment_id: id } } }), names()]);
  return toExperiment(unwrap(r), n);
}

export async function getExperimentSamples(id: string, signal?: AbortSignal): Promise<SamplesVM> {
  return toSamples(unwrap(await api.GET("/api/v1/throughput/experiments/{experiment_id}/samples", { signal, params: { path: { experiment_id: id } } })));
}

export async function getPairs(q: Range, signal?: AbortSignal): Promise<PairsVM> {
  const [r, n] = await Promise.all([api.GET("/api/v1/throughput/pairs", { signal, params: { query: { from: iso(q.fromMs), to: iso(q.toMs) } } }), names()]);
  return toPairs(unwrap(r), n);
}

export async function getAzPairs(q: Range, signal?: AbortSignal): Promise<AzPairsVM[]> {
  return toAzPairs(unwrap(await api.GET("/api/v1/throughput/az-pairs", { signal, params: { query: { from: iso(q.fromMs), to: iso(q.toMs) } } })));
}

export async function getDegradations(q: Range, signal?: AbortSignal): Promise<DegradationVM[]> {
  const [r, n] = await Promise.all([api.GET("/api/v1/throughput/degradations", { signal, params: { query: { from: iso(q.fromMs), to: iso(q.toMs) } } }), names()]);
  return toDegradations(unwrap(r), n);
}
