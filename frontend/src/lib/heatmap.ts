// Shaping of a heatmap answer into a grid with a shared colour domain.
import type { HeatCell, HeatStat, HeatmapVM } from "../api/models";
import { formatPercent, formatUs } from "./format";
import { scalePosition } from "./color";
import { isWeak } from "./support";

export interface Grid {
  rows: string[];
  cols: string[];
  at: (src: string, dst: string) => HeatCell | undefined;
  lo: number;
  hi: number;
  log: boolean;
}

export function buildGrid(vm: HeatmapVM): Grid {
  const map = new Map<string, HeatCell>();
  const keys = new Set(vm.keys);
  for (const c of vm.cells) {
    map.set(`${c.src}\u0000${c.dst}`, c);
    keys.add(c.src);
    keys.add(c.dst);
  }
  const sorted = [...keys].sort((a, b) => (vm.labels[a] ?? a).localeCompare(vm.labels[b] ?? b));
  // The colour domain spans the supported cells: a greyed tail value must not stretch it.
  const supported = vm.cells.filter((c) => !isWeak(c.beyond));
  const values = (supported.length ? supported : vm.cells).map((c) => c.value).filter((v): v is number => v !== null && Number.isFinite(v));
  const log = vm.stat !== "loss";
  const positive = log ? values.filter((v) => v > 0) : values;
  const lo = positive.length ? Math.min(...positive) : 0;
  const hi = positive.length ? Math.max(...positive) : 1;
  return { rows: sorted, cols: sorted, at: (s, d) => map.get(`${s}\u0000${d}`), lo, hi, log };
}

export function formatStat(stat: HeatStat, v: number | null | undefined): string {
  return stat === "loss" ? formatPercent(v) : formatUs(v);
}

export function cellPosition(g: Grid, v: number | null): number | null {
  if (v === null || !Number.isFinite(v)) return null;
  return scalePosition(v, g.lo, g.hi, g.log);
}

export const STAT_LABELS: Record<HeatStat, string> = {
  p50: "p50",
  p99: "p99",
  p99_99: "p99.99",
  jitter: "jitter (σ)",
  loss: "loss",
};

/** What each statistic is, for tooltips and the legend; jitter is the standard deviation, not RFC 3550 jitter. */
export const STAT_HELP: Record<HeatStat, string> = {
  p50: "median RTT over the range",
  p99: "99th percentile of RTT over the range",
  p99_99: "99.99th percentile of RTT over the range",
  jitter: "jitter (σ): the standard deviation of RTT over the range, like ping's mdev (not the RFC 3550 inter-arrival jitter)",
  loss: "share of probes without a reply within the timeout",
};
