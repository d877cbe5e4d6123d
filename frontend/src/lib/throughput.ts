// Shaping of throughput answers for the Throughput page: Mbit/s, decimal bytes and money as
// links and bills quote them, the region-pair grid and the per-second timeline rows.
import type { ExperimentVM, Proto, RegionPairVM, SamplePoint, SamplesVM, TransitionVM } from "../api/throughput";

/** Bytes per second to Mbit/s (links are quoted in SI bits). */
export const toMbps = (bytesPerS: number): number => (bytesPerS * 8) / 1e6;

function digits(x: number): number {
  const a = Math.abs(x);
  return a >= 100 ? 0 : a >= 10 ? 1 : 2;
}

/** A rate in Mbit/s whatever its size, so a matrix reads in one unit. */
export function formatMbps(bytesPerS: number | null | undefined): string {
  if (bytesPerS === null || bytesPerS === undefined || !Number.isFinite(bytesPerS)) return "–";
  const v = toMbps(bytesPerS);
  return `${v.toFixed(digits(v))} Mbit/s`;
}

/** Decimal byte sizes (1 GB = 10^9 B), the unit clouds bill egress in. */
export function formatBytesSI(b: number | null | undefined): string {
  if (b === null || b === undefined || !Number.isFinite(b)) return "–";
  const units = ["B", "kB", "MB", "GB", "TB", "PB"];
  let v = b;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? Math.round(v) : v.toFixed(digits(v))} ${units[i]}`;
}

export function formatUsd(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  return `$${x.toFixed(Math.abs(x) >= 100 ? 0 : 2)}`;
}


export interface PairGrid {
  regions: string[];
  at: (src: string, dst: string) => RegionPairVM | undefined;
  lo: number;
  hi: number;
}

/** Rows send, columns receive; one protocol at a time; the colour domain spans its means. */
export function pairGrid(rows: RegionPairVM[], proto: Proto): PairGrid {
  const mine = rows.filter((r) => r.proto === proto);
  const map = new Map(mine.map((r) => [`${r.srcRegion}\u0000${r.dstRegion}`, r]));
  const regions = [...new Set(mine.flatMap((r) => [r.srcRegion, r.dstRegion]))].sort();
  const means = mine.map((r) => r.meanBps).filter((v): v is number => v !== null && v > 0);
  return { regions, at: (s, d) => map.get(`${s}\u0000${d}`), lo: means.length ? Math.min(...means) : 0, hi: means.length ? Math.max(...means) : 1 };
}

export interface TimelineRow {
  t: number;
  forward: number | null;
  reverse: number | null;
  forwardLoss: number | null;
  reverseLoss: number | null;
}

/** Both directions on one time axis (they run one after the other), in Mbit/s. */
export function timelineRows(s: SamplesVM): TimelineRow[] {
  const rows = new Map<number, TimelineRow>();
  const put = (pts: SamplePoint[], dir: "forward" | "reverse") => {
    for (const p of pts) {
      const r = rows.get(p.t) ?? { t: p.t, forward: null, reverse: null, forwardLoss: null, reverseLoss: null };
      r[dir] = p.bps === null ? null : toMbps(p.bps);
      r[dir === "forward" ? "forwardLoss" : "reverseLoss"] = p.loss;
      rows.set(p.t, r);
    }
  };
  put(s.forward, "forward");
  put(s.reverse, "reverse");
  return [...rows.values()].sort((a, b) => a.t - b.t);
}

export interface LevelMarks {
  transition: TransitionVM;
  /** where the direction's first second began and its last one ended (ms) */
  fromMs: number;
  toMs: number;
}

/** The span each transition's two levels are drawn over: its own direction's samples, first to
 * last (the chart's x axis runs over the samples; a segment reaching past it would be dropped). */
export function levelMarks(exp: ExperimentVM, s: SamplesVM): LevelMarks[] {
  return exp.transitions.map((tr) => {
    const pts = s[tr.direction];
    const dirStart = exp.startMs + (tr.direction === "reverse" ? exp.durationS * 1000 : 0);
    const fromMs = pts.length ? pts[0]!.t : dirStart;
    const toMs = pts.length ? pts[pts.length - 1]!.t : dirStart + exp.durationS * 1000;
    return { transition: tr, fromMs, toMs };
  });
}

/** "us-east-1 → eu-west-1" with the direction's roles spelled out for an experiment. */
export function directionLabel(exp: ExperimentVM, d: "forward" | "reverse"): string {
  return d === "forward" ? `forward ${exp.srcName} → ${exp.dstName}` : `reverse ${exp.dstName} → ${exp.srcName}`;
}
