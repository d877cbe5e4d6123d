// Analytics (/api/v1/analytics/...): heatmap, pair, distributions, quorum and storage views,
// over the generated client; maps API types onto view models.
import { fleet, idsFor } from "./agents";
import { api, unwrap } from "./http";
import { keyLabel } from "../lib/zones";
import type { components } from "./schema";
import type {
  BoxVM,
  CdfPoint,
  CdfSeries,
  DailyMedian,
  HeatStat,
  HeatmapVM,
  HistBin,
  LevelSegment,
  ShiftMark,
  Level,
  NamedSeries,
  StorageRow,
  SummaryVM,
  TimelinePoint,
  XYRow,
} from "./models";
import { formatBytes, isoInstant as iso } from "../lib/format";
import { niceStep } from "../lib/shape";

type S = components["schemas"];

export interface RangeQuery {
  fromMs: number;
  toMs: number;
}

export interface PairQuery extends RangeQuery {
  level: Level;
  src: string;
  dst: string;
}

const list = (xs: readonly (string | number)[] | null | undefined): string[] | undefined => (xs && xs.length ? [xs.join(",")] : undefined);
const range = (q: RangeQuery) => ({ start: iso(q.fromMs), end: iso(q.toMs) });

async function pairFilter(q: PairQuery): Promise<{ src: string[] | undefined; dst: string[] | undefined; start: string; end: string }> {
  const agents = await fleet();
  const src = idsFor(agents, q.level, q.src);
  const dst = idsFor(agents, q.level, q.dst);
  if (!src.length || !dst.length) throw new Error(`no agents behind ${src.length ? q.dst : q.src}`);
  return { ...range(q), src: list(src), dst: list(dst) };
}

const HEAT_STAT: Record<HeatStat, string> = { p50: "p50", p99: "p99", p99_99: "p99.99", jitter: "std", loss: "loss_rate" };

export async function getHeatmap(q: RangeQuery & { level: Level; stat: HeatStat }, signal?: AbortSignal): Promise<HeatmapVM> {
  const r = unwrap(
    await api.GET("/api/v1/analytics/{kind}/heatmap", {
      params: { path: { kind: "mesh" }, query: { ...range(q), level: q.level, stat: HEAT_STAT[q.stat] } },
      signal,
    }),
  );
  const keys = [...new Set([...r.rows, ...r.columns])];
  return {
    level: q.level,
    stat: q.stat,
    keys,
    labels: Object.fromEntries(keys.map((k) => [k, keyLabel(k, q.level)])),
    cells: r.cells.map((c) => ({ src: c.src, dst: c.dst, value: c.value, count: c.samples, beyond: c.beyond ?? null })),
  };
}

function toSummary(g: S["Summary"]): SummaryVM {
  const order = ["p1", "p5", "p25", "p50", "p75", "p90", "p95", "p99", "p99_9", "p99_99", "p99_999"];
  const pct = g.percentiles;
  const beyond = g.beyond ?? {};
  return {
    count: g.samples,
    loss_rate: g.loss_rate,
    mean_us: g.mean,
    std_us: g.std,
    cov: g.cov,
    min_us: g.min,
    max_us: g.max,
    percentiles: order.filter((k) => k in pct).map((k) => [k.replace("_", "."), pct[k] ?? null]),
    beyond: Object.fromEntries(Object.entries(beyond).map(([k, n]) => [k.replace("_", "."), n])),
    tail_mean_ratio: g.p99_99_over_mean,
    max_mean_ratio: g.max_over_mean,
  };
}

export async function getPairSummary(q: PairQuery, signal?: AbortSignal): Promise<SummaryVM | null> {
  const f = await pairFilter(q);
  // p1 and p99.9 bound the body of the distribution: the timeline's default y-range.
  const r = unwrap(
    await api.GET("/api/v1/analytics/{kind}/summary", { params: { path: { kind: "mesh" }, query: { ...f, percentiles: "1,5,25,50,75,90,95,99,99.9,99.99,99.999" } }, signal }),
  );
  const g = r.groups[0];
  return g ? toSummary(g) : null;
}

export interface LossReasonsVM {
  lost: number;
  /** Whether the counts cover the whole range (raw samples of its beginning may be gone). */
  complete: boolean;
  startMs: number;
  reasons: { reason: string; count: number }[];
}

/** Why the pair's lost rounds were lost (timeout, refused, error, corrupt), from raw samples. */
export async function getPairLossReasons(q: PairQuery, signal?: AbortSignal): Promise<LossReasonsVM> {
  const f = await pairFilter(q);
  const r = unwrap(await api.GET("/api/v1/analytics/mesh/loss-reasons", { params: { query: f }, signal }));
  return { lost: r.lost, complete: r.complete, startMs: Date.parse(r.start), reasons: r.reasons.filter((x) => x.count > 0).map(({ reason, count }) => ({ reason, count })) };
}

/** Address of the CSV export of the pair's windowed series (same-origin, so the session cookie applies). */
export async function pairCsvUrl(q: PairQuery, windowS: number): Promise<string> {
  const f = await pairFilter(q);
  const qs = new URLSearchParams({ start: f.start, end: f.end, window_s: String(windowS), percentiles: "5,25,50,75,90,95,99,99.9,99.99" });
  if (f.src) qs.set("src", f.src.join(","));
  if (f.dst) qs.set("dst", f.dst.join(","));
  return `/api/v1/analytics/mesh/series.csv?${qs.toString()}`;
}

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

export async function getPairTimeline(q: PairQuery, windowS: number, signal?: AbortSignal): Promise<TimelinePoint[]> {
  const f = await pairFilter(q);
  const r = unwrap(
    await api.GET("/api/v1/analytics/{kind}/series", {
      params: { path: { kind: "mesh" }, query: { ...f, window_s: windowS, percentiles: "50,99,99.99" } },
      signal,
    }),
  );
  const windows = r.groups[0]?.windows ?? [];
  return windows.map((w) => {
    const extra = w as Record<string, unknown>;
    return { t: Date.parse(w.start), p50: num(extra.p50), p99: num(extra.p99), p9999: num(extra.p99_99), count: w.samples, loss: w.loss_rate };
  });
}

export interface PairLevels {
  segments: LevelSegment[];
  /** Each level shift, with the pair's path change beside it (node level only). */
  shifts: ShiftMark[];
}

export async function getPairLevelShifts(q: PairQuery, windowS: number, signal?: AbortSignal): Promise<PairLevels> {
  const f = await pairFilter(q);
  const r = unwrap(await api.GET("/api/v1/analytics/{kind}/level-shifts", { params: { path: { kind: "mesh" }, query: { ...f, window_s: windowS } }, signal }));
  return {
    segments: r.segments.map((s) => ({ startMs: Date.parse(s.start), endMs: Date.parse(s.end) + windowS * 1000, level_us: s.level })),
    shifts: r.shifts.map((s) => ({
      tMs: Date.parse(s.time),
      pathChange: s.path_change
        ? { atMs: Date.parse(s.path_change.at), diffTtl: s.path_change.diff_ttl, partingAfter: s.path_change.parting_after, addedRttUs: s.path_change.added_rtt_us ?? null }
        : null,
    })),
  };
}

export interface DistributionVM {
  bins: HistBin[];
  cdf: CdfPoint[];
  tail: CdfPoint[];
  bucketUs: number;
}

/** Histogram, CDF and the top-5% CDF; with no bucket width, one is picked from the summary. */
export async function getPairDistribution(q: PairQuery, bucketUs: number | null, signal?: AbortSignal): Promise<DistributionVM> {
  const f = await pairFilter(q);
  let width = bucketUs;
  if (!width) {
    // About 80 buckets across the body (p1 to p99.9); spikes beyond land in the overflow bar.
    const s = unwrap(await api.GET("/api/v1/analytics/{kind}/summary", { params: { path: { kind: "mesh" }, query: { ...f, percentiles: "1,50,99.9" } }, signal })).groups[0];
    const lo = s?.percentiles["p1"] ?? s?.min ?? 0;
    const hi = s?.percentiles["p99_9"] ?? s?.max ?? lo + 1000;
    // Rollup sketches keep values to 1%: narrower buckets than that would show the sketch's bins.
    const sketchRes = s && !s.exact ? 0.02 * (s.percentiles["p50"] ?? lo) : 0;
    width = niceStep(Math.max((hi - lo) / 80, sketchRes, 1));
  }
  // Only non-empty buckets are limited (10 000): a tail spread over many of them asks for wider ones.
  let r: S["DistributionResponse"];
  for (let attempt = 0; ; attempt++) {
    const res = await api.GET("/api/v1/analytics/{kind}/distribution", { params: { path: { kind: "mesh" }, query: { ...f, bucket_width: width, tail_fraction: 0.05 } }, signal });
    if (res.response.status !== 422 || bucketUs || attempt >= 3) {
      r = unwrap(res);
      break;
    }
    width = niceStep(width * 10);
  }
  return {
    bins: r.histogram.map((b) => ({ lo_us: b.lower, hi_us: b.upper, count: b.count })),
    cdf: r.cdf.map((p) => ({ x_us: p.value, p: p.fraction })),
    tail: (r.tail_cdf ?? []).map((p) => ({ x_us: p.value, p: p.fraction })),
    bucketUs: r.bucket_width,
  };
}

export interface QuorumVM {
  name: string;
  k: number;
  n: number;
  summary: SummaryVM;
  cdf: CdfPoint[];
  tail: CdfPoint[];
}

/** Quorum groups of the source node that the destination belongs to, each with its latency summary and CDF. */
export async function getQuorum(q: PairQuery, signal?: AbortSignal): Promise<QuorumVM[]> {
  if (q.level !== "node") return [];
  const agents = await fleet();
  const [srcId] = idsFor(agents, "node", q.src);
  const [dstId] = idsFor(agents, "node", q.dst);
  if (!srcId || !dstId) return [];
  const [r, groups] = await Promise.all([
    api.GET("/api/v1/analytics/quorum/compare", { params: { query: { ...range(q), src: [srcId] } }, signal }).then(unwrap),
    api.GET("/api/v1/agents/{agent_id}/quorum-groups", { params: { path: { agent_id: srcId } }, signal }).then(unwrap),
  ]);
  // Groups as the server hands them to the agent now: only those holding the destination count.
  const member = new Set(groups.filter((g) => g.members.includes(dstId)).map((g) => g.name));
  const parsed = r.quorums
    .filter((row) => row.agent_id === srcId && row.group_name)
    .map((row) => {
      const [k, n] = row.quorum.replace("Q", "").split("/").map(Number);
      return { row, name: row.group_name!, k: k ?? 0, n: n ?? 0 };
    });
  return Promise.all(
    parsed
      .filter((p) => member.has(p.name))
      .map(async ({ row, name, k, n }) => {
        const d = unwrap(
          await api.GET("/api/v1/analytics/{kind}/distribution", {
            params: { path: { kind: "quorum" }, query: { ...range(q), src: [srcId], group_name: [name], bucket_width: 1000, tail_fraction: 0.05 } },
            signal,
          }),
        );
        return {
          name,
          k,
          n,
          summary: toSummary(row),
          cdf: d.cdf.map((p) => ({ x_us: p.value, p: p.fraction })),
          tail: (d.tail_cdf ?? []).map((p) => ({ x_us: p.value, p: p.fraction })),
        };
      }),
  );
}

export async function getBoxes(q: RangeQuery & { groupBy: "topology_class" | "payload_bytes"; topologyClass?: string }, signal?: AbortSignal): Promise<BoxVM[]> {
  const r = unwrap(
    await api.GET("/api/v1/analytics/{kind}/boxplots", {
      params: { path: { kind: "mesh" }, query: { ...range(q), group_by: q.groupBy, topology_class: q.topologyClass ? [q.topologyClass] : undefined } },
      signal,
    }),
  );
  return r.boxes
    .filter((b) => b.group !== null && b.p5 !== null && b.p25 !== null && b.p50 !== null && b.p75 !== null && b.p95 !== null)
    .map((b) => ({ group: String(b.group), p5: b.p5!, p25: b.p25!, p50: b.p50!, p75: b.p75!, p95: b.p95!, mean: b.mean ?? b.p50!, count: b.count }));
}

/** Windowed medians of node pairs of a topology class (seed 003 Fig. 8), at most `limit` pairs. */
export async function getPairLines(q: RangeQuery & { topologyClass: string; windowS: number; limit?: number }, signal?: AbortSignal): Promise<NamedSeries[]> {
  // One request: the pairs of the class with data, ranked by their p50 over the range (half
  // the highest, the rest the lowest).
  const [agents, r] = await Promise.all([
    fleet(),
    api
      .GET("/api/v1/analytics/{kind}/series", {
        params: {
          path: { kind: "mesh" },
          query: { ...range(q), topology_class: [q.topologyClass], group_by: "pair", window_s: q.windowS, percentiles: "50", rank_by: "p50", limit: q.limit ?? 8 },
        },
        signal,
      })
      .then(unwrap),
  ]);
  const name = new Map(agents.map((a) => [a.id, a.name]));
  return r.groups.map((g) => {
    const [src, dst] = g.group as [string, string];
    return {
      // The answer names its ids, deleted agents as "<name> (deleted)".
      name: `${r.names?.[src] ?? name.get(src) ?? src} → ${r.names?.[dst] ?? name.get(dst) ?? dst}`,
      points: g.windows.map((w) => ({ t: Date.parse(w.start), v: num((w as Record<string, unknown>).p50) })),
    };
  });
}

// ---- storage ----

const msToUs = (v: number | null | undefined) => (v === null || v === undefined ? null : v * 1000);

export async function getStorageComparison(q: RangeQuery, signal?: AbortSignal): Promise<StorageRow[]> {
  const variants = ["plain", "gzip9"];
  const answers = await Promise.all(
    variants.map((variant) =>
      api
        .GET("/api/v1/analytics/storage/comparison", { params: { query: { ...range(q), variant: [variant], op: ["put,get"], by: "provider" } }, signal })
        .then(unwrap)
        .then((r) => ({ variant, rows: r.rows })),
    ),
  );
  return answers.flatMap(({ variant, rows }) =>
    rows.map((r) => ({
      provider: r.provider ?? "?",
      target: r.provider ?? "?",
      op: r.op,
      variant,
      size_bytes: r.size_bytes,
      count: r.samples,
      failures: r.failures,
      p50_us: msToUs(r.median_latency_ms),
      p50_adjusted_us: msToUs(r.median_adj_latency_ms),
      p90_us: msToUs(r.p90_latency_ms),
      per_bit_ns: r.median_latency_per_bit_ns,
      per_bit_adjusted_ns: r.median_adj_latency_per_bit_ns,
    })),
  );
}

async function targetsByProvider(signal?: AbortSignal): Promise<Map<string, string[]>> {
  const targets = unwrap(await api.GET("/api/v1/storage-targets", { signal }));
  const m = new Map<string, string[]>();
  for (const t of targets) m.set(t.provider, [...(m.get(t.provider) ?? []), t.id]);
  return m;
}

/** One CDF per provider for an op (and size), from the storage distribution endpoint. */
async function storageCdfs(q: RangeQuery, query: { op: string; size_bytes?: number; variant?: string; adjusted?: boolean }, signal?: AbortSignal): Promise<CdfSeries[]> {
  const byProvider = await targetsByProvider(signal);
  const out = await Promise.all(
    [...byProvider].sort().map(async ([provider, ids]) => {
      const r = unwrap(
        await api.GET("/api/v1/analytics/{kind}/distribution", {
          params: {
            path: { kind: "storage" },
            query: {
              ...range(q),
              target: list(ids),
              op: [query.op],
              size_bytes: query.size_bytes ? [String(query.size_bytes)] : undefined,
              variant: query.variant ? [query.variant] : undefined,
              adjusted: query.adjusted,
              bucket_width: 1000,
              tail_fraction: 0.05,
            },
          },
          signal,
        }),
      );
      return { name: provider, points: r.cdf.map((p) => ({ x_us: p.value, p: p.fraction })) };
    }),
  );
  return out.filter((s) => s.points.length > 0);
}

export async function getStorageCdf(q: RangeQuery & { op: string; sizeBytes: number; adjusted?: boolean }, signal?: AbortSignal): Promise<CdfSeries[]> {
  return storageCdfs(q, { op: q.op, size_bytes: q.sizeBytes, variant: "plain", adjusted: q.adjusted }, signal);
}

export async function getDailyMedians(q: RangeQuery & { op: string; sizeBytes: number; adjusted?: boolean }, signal?: AbortSignal): Promise<DailyMedian[]> {
  const r = unwrap(
    await api.GET("/api/v1/analytics/storage/daily-medians", {
      params: { query: { ...range(q), op: [q.op], size_bytes: [String(q.sizeBytes)], variant: ["plain"], by: "provider" } },
      signal,
    }),
  );
  return r.series.flatMap((s) => s.days.map((d) => ({ day: d.day, provider: s.provider ?? "?", p50_us: msToUs(q.adjusted ? d.median_adj_latency_ms : d.median_latency_ms) })));
}

export async function getReplication(q: RangeQuery, signal?: AbortSignal): Promise<XYRow[]> {
  const r = unwrap(await api.GET("/api/v1/analytics/storage/replication", { params: { query: range(q) }, signal }));
  return r.rows.flatMap((row) => {
    const label = `${row.op} ${formatBytes(row.size_bytes)}`;
    return [
      { series: `${label} std dev`, x: row.copies, y: msToUs(row.std_ms) },
      { series: `${label} p90`, x: row.copies, y: msToUs(row.p90_ms) },
    ];
  });
}

export async function getConsistency(q: RangeQuery, signal?: AbortSignal): Promise<CdfSeries[]> {
  const [raw, list] = await Promise.all([storageCdfs(q, { op: "read_after_write" }, signal), storageCdfs(q, { op: "list_after_write" }, signal)]);
  return [...raw.map((s) => ({ ...s, name: `${s.name} read-after-write` })), ...list.map((s) => ({ ...s, name: `${s.name} list-after-write` }))];
}

/** Aggregate throughput by concurrency: parallel operations × object size / median latency. */
export async function getConcurrency(q: RangeQuery, signal?: AbortSignal): Promise<XYRow[]> {
  const targets = unwrap(await api.GET("/api/v1/storage-targets", { signal }));
  const provider = new Map(targets.map((t) => [t.id, t.provider]));
  const levels = [...new Set(targets.flatMap((t) => (t.variants.concurrency?.enabled ? (t.variants.concurrency.levels ?? []) : [])))].sort((a, b) => a - b);
  const probe = levels.length ? levels : [1, 2, 4, 8, 16, 32];
  const rows = await Promise.all(
    probe.map(async (c) => {
      const s = unwrap(
        await api.GET("/api/v1/analytics/{kind}/summary", {
          params: { path: { kind: "storage" }, query: { ...range(q), variant: ["concurrent"], concurrency: [String(c)], group_by: "target_op_size", percentiles: "50" } },
          signal,
        }),
      );
      return s.groups.flatMap((g) => {
        const [target, op, size] = Array.isArray(g.group) ? (g.group as [string, string, number]) : ["", "", 0];
        const med = g.percentiles["p50"];
        if (!med || !size) return [];
        return [{ series: `${provider.get(target) ?? target} ${op}`, x: c, y: (c * size) / (med / 1e6) }];
      });
    }),
  );
  return rows.flat();
}
