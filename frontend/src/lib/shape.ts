// Pure data shaping for charts; unit-tested.
import type { BoxVM, CdfPoint, HistBin, LevelSegment, TimelinePoint } from "../api/models";

export interface TimelineRow extends TimelinePoint {
  /** p50–p99 and p99–p99.99 bands */
  band: [number, number] | null;
  tailBand: [number, number] | null;
  level: number | null;
  lossMark: number | null;
}

/** Attach the percentile bands, the level of the segment covering each window, and loss marks. */
export function timelineRows(points: TimelinePoint[], segments: LevelSegment[]): TimelineRow[] {
  const segs = [...segments].sort((a, b) => a.startMs - b.startMs);
  let si = 0;
  return [...points]
    .sort((a, b) => a.t - b.t)
    .map((p) => {
      while (si < segs.length - 1 && p.t >= segs[si]!.endMs) si++;
      const seg = segs[si];
      const level = seg && p.t >= seg.startMs && p.t <= seg.endMs ? seg.level_us : null;
      return {
        ...p,
        band: p.p50 !== null && p.p99 !== null ? [p.p50, p.p99] : null,
        tailBand: p.p99 !== null && p.p9999 !== null ? [p.p99, p.p9999] : null,
        level,
        lossMark: p.loss !== null && p.loss > 0 ? 0.97 : null,
      };
    });
}

/** Cut a CDF to its tail (p ≥ 1 − fraction), keeping the point just below for continuity. */
export function tailOfCdf(points: CdfPoint[], fraction = 0.05): CdfPoint[] {
  const cut = 1 - fraction;
  const idx = points.findIndex((p) => p.p >= cut);
  if (idx < 0) return [];
  return points.slice(Math.max(0, idx - 1));
}

/** Empirical CDF of raw values (used where the API returns a sample list). */
export function ecdf(values: number[]): CdfPoint[] {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  const n = v.length;
  const out: CdfPoint[] = [];
  for (let i = 0; i < n; i++) {
    if (i + 1 < n && v[i + 1] === v[i]) continue;
    out.push({ x_us: v[i]!, p: (i + 1) / n });
  }
  return out;
}

export interface HistRow extends HistBin {
  mid_us: number;
  share: number;
  /** the last bucket gathering everything at or above the clip value */
  overflow?: boolean;
}

/** Bins with mid-points and their share of all samples; empty buckets between are filled in. */
export function histRows(bins: HistBin[], clipAbove?: number, maxFill = 4000): HistRow[] {
  const total = bins.reduce((s, b) => s + b.count, 0) || 1;
  let sorted = [...bins].sort((a, b) => a.lo_us - b.lo_us);
  let over: HistBin | null = null;
  if (clipAbove !== undefined) {
    const above = sorted.filter((b) => b.hi_us > clipAbove);
    // Merge only a real tail: at least two buckets past the clip value.
    if (above.length > 1) {
      sorted = sorted.filter((b) => b.hi_us <= clipAbove);
      over = { lo_us: above[0]!.lo_us, hi_us: above[above.length - 1]!.hi_us, count: above.reduce((s, b) => s + b.count, 0) };
    }
  }
  const first = sorted[0];
  const last = sorted[sorted.length - 1];
  let filled = sorted;
  if (first && last) {
    const w = first.hi_us - first.lo_us;
    const n = Math.round((last.hi_us - first.lo_us) / w);
    if (w > 0 && n <= maxFill && sorted.every((b) => Math.abs(b.hi_us - b.lo_us - w) < w * 1e-6)) {
      const byIdx = new Map(sorted.map((b) => [Math.round((b.lo_us - first.lo_us) / w), b]));
      filled = Array.from({ length: n }, (_, i) => byIdx.get(i) ?? { lo_us: first.lo_us + i * w, hi_us: first.lo_us + (i + 1) * w, count: 0 });
    }
  }
  const rows: HistRow[] = filled.map((b) => ({ ...b, mid_us: (b.lo_us + b.hi_us) / 2, share: b.count / total }));
  if (over) rows.push({ ...over, mid_us: over.lo_us, share: over.count / total, overflow: true });
  return rows;
}

/** A 1-2-5 step at or above x (for bucket widths and axis steps). */
export function niceStep(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) return 1;
  const e = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 5, 10]) if (m * e >= x) return m * e;
  return 10 * e;
}

/** A box's whisker-to-whisker span for a range bar, plus order preserved. */
export function boxRows(boxes: BoxVM[], order?: string[]): (BoxVM & { span: [number, number] })[] {
  const rank = (g: string) => {
    const i = order ? order.indexOf(g) : -1;
    return i < 0 ? Number.MAX_SAFE_INTEGER : i;
  };
  return [...boxes].sort((a, b) => rank(a.group) - rank(b.group) || a.group.localeCompare(b.group)).map((b) => ({ ...b, span: [b.p5, b.p95] }));
}

/** Map a value onto a pixel between two others, linearly or in log space (for custom SVG shapes). */
export function interpolatePx(v: number, lo: number, hi: number, pxLo: number, pxHi: number, log: boolean): number {
  if (hi === lo) return (pxLo + pxHi) / 2;
  const t = log && lo > 0 && v > 0 && hi > 0 ? (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo)) : (v - lo) / (hi - lo);
  return pxLo + (pxHi - pxLo) * t;
}

/** Pivot long rows into one row per x with a column per series (for multi-line charts). */
export function pivot<T>(rows: T[], x: (r: T) => number | string, series: (r: T) => string, y: (r: T) => number | null): { rows: Record<string, number | string | null>[]; series: string[] } {
  const byX = new Map<number | string, Record<string, number | string | null>>();
  const names = new Set<string>();
  for (const r of rows) {
    const k = x(r);
    const s = series(r);
    names.add(s);
    let row = byX.get(k);
    if (!row) {
      row = { x: k };
      byX.set(k, row);
    }
    row[s] = y(r);
  }
  const out = [...byX.values()].sort((a, b) => {
    const ax = a.x!;
    const bx = b.x!;
    return typeof ax === "number" && typeof bx === "number" ? ax - bx : String(ax).localeCompare(String(bx));
  });
  return { rows: out, series: [...names].sort() };
}

/** Ticks at 1, 2 and 5 of each decade between lo and hi (for log axes); fewer when the span is wide. */
export function logTicks(lo: number, hi: number): number[] {
  if (!(lo > 0) || !(hi > lo)) return lo > 0 ? [lo] : [];
  const decades = Math.log10(hi) - Math.log10(lo);
  const mults = decades > 4 ? [1] : decades > 1.5 ? [1, 3] : [1, 2, 5];
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of mults) {
      const v = m * Math.pow(10, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
    }
  }
  if (out.length >= 3) return out;
  // Less than a decade: five ticks evenly spaced in log space, to two significant digits.
  const even = Array.from({ length: 5 }, (_, i) => Number((lo * Math.pow(hi / lo, i / 4)).toPrecision(2)));
  return [...new Set(even)].filter((v) => v >= lo * 0.98 && v <= hi * 1.02);
}

/** Positive finite values of some columns of rows (for log-axis domains). */
export function positiveExtent(rows: Record<string, unknown>[], keys: string[]): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const r of rows) {
    for (const k of keys) {
      const v = r[k];
      if (typeof v === "number" && v > 0 && Number.isFinite(v)) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
  }
  return lo <= hi ? [lo, hi] : null;
}
