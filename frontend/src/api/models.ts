// View models: what the pages draw. the api/ modules map the generated API types onto these,
// so a change in the API touches one file.

export interface Me {
  email: string;
  org_name?: string | null;
  role?: string | null;
}

export type Level = "region" | "zone" | "node";
export type HeatStat = "p50" | "p99" | "p99_99" | "jitter" | "loss";

export interface HeatCell {
  src: string;
  dst: string;
  /** microseconds for latency statistics, a ratio 0..1 for loss */
  value: number | null;
  count: number;
  /** for a percentile statistic: samples above it in the cell (null for the others) */
  beyond: number | null;
}

export interface HeatmapVM {
  level: Level;
  stat: HeatStat;
  /** row and column keys (ids for nodes, names for regions/zones) */
  keys: string[];
  /** display label per key */
  labels: Record<string, string>;
  cells: HeatCell[];
}

export interface SummaryVM {
  count: number;
  loss_rate: number | null;
  mean_us: number | null;
  std_us: number | null;
  cov: number | null;
  min_us: number | null;
  max_us: number | null;
  /** label ("p50", "p99.99") → microseconds */
  percentiles: [string, number | null][];
  /** label → samples above that percentile (what supports it; seed 003 Lesson 7) */
  beyond: Record<string, number>;
  tail_mean_ratio: number | null;
  max_mean_ratio: number | null;
}

export interface TimelinePoint {
  t: number;
  p50: number | null;
  p99: number | null;
  p9999: number | null;
  count: number;
  loss: number | null;
}

/** A level shift, and the path change the server found beside it. */
export interface ShiftMark {
  tMs: number;
  pathChange: { atMs: number; diffTtl: number; partingAfter: string[]; addedRttUs: number | null } | null;
}

export interface LevelSegment {
  startMs: number;
  endMs: number;
  level_us: number;
}

export interface HistBin {
  lo_us: number;
  hi_us: number;
  count: number;
}

export interface CdfPoint {
  x_us: number;
  p: number;
}

/** One named curve of a CDF chart. */
export interface CdfSeries {
  name: string;
  points: CdfPoint[];
}

export interface BoxVM {
  group: string;
  p5: number;
  p25: number;
  p50: number;
  p75: number;
  p95: number;
  mean: number;
  count: number;
}

export interface AgentVM {
  id: string;
  name: string;
  status: string;
  last_seen_ms: number | null;
  version: string | null;
  provider: string | null;
  region: string | null;
  zone: string | null;
  subnet: string | null;
  /** where peers reach its echo server; agents without one take no part in the mesh */
  mesh_address: string | null;
  metadata: Record<string, unknown>;
}

export interface NamedSeries {
  name: string;
  points: { t: number; v: number | null }[];
}

export type StorageOp = "put" | "get";

export interface StorageRow {
  provider: string;
  target: string;
  op: string;
  variant: string;
  size_bytes: number;
  count: number;
  failures: number;
  /** median latency, raw and RTT-adjusted, microseconds */
  p50_us: number | null;
  p50_adjusted_us: number | null;
  p90_us: number | null;
  /** nanoseconds per bit of the raw and of the RTT-adjusted median (seed 000 Figs. 3-4) */
  per_bit_ns: number | null;
  per_bit_adjusted_ns: number | null;
}

export interface DailyMedian {
  day: string;
  provider: string;
  p50_us: number | null;
}

export interface XYRow {
  series: string;
  x: number;
  y: number | null;
}
