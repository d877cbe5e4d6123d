// Shaping of storage comparison rows into the tables and curves of seed 000.
import type { StorageRow } from "../api/models";

export interface SizeTable {
  providers: string[];
  sizes: number[];
  /** size → provider → value */
  value: (size: number, provider: string) => number | null;
}

/** One op and variant as a size × provider table of medians (seed 000 Tables 1 and 2). */
export function sizeTable(rows: StorageRow[], op: string, variant: string, adjusted: boolean): SizeTable {
  const sel = rows.filter((r) => r.op === op && r.variant === variant);
  const providers = [...new Set(sel.map((r) => r.provider))].sort();
  const sizes = [...new Set(sel.map((r) => r.size_bytes))].sort((a, b) => a - b);
  const m = new Map<string, number | null>();
  for (const r of sel) m.set(`${r.size_bytes}|${r.provider}`, adjusted ? r.p50_adjusted_us : r.p50_us);
  return { providers, sizes, value: (s, p) => m.get(`${s}|${p}`) ?? null };
}

/** Failure rate per provider and op over all sizes and variants. */
export function failureRates(rows: StorageRow[]): { provider: string; op: string; count: number; failures: number; rate: number }[] {
  const acc = new Map<string, { provider: string; op: string; count: number; failures: number }>();
  for (const r of rows) {
    const k = `${r.provider}|${r.op}`;
    const a = acc.get(k) ?? { provider: r.provider, op: r.op, count: 0, failures: 0 };
    a.count += r.count;
    a.failures += r.failures;
    acc.set(k, a);
  }
  return [...acc.values()]
    .map((a) => ({ ...a, rate: a.count ? a.failures / a.count : 0 }))
    .sort((a, b) => a.provider.localeCompare(b.provider) || a.op.localeCompare(b.op));
}

/** Curve rows (x = size) with one column per provider for an op, variant and field. */
export function sizeCurves(rows: StorageRow[], op: string, variant: string, pick: (r: StorageRow) => number | null): { rows: Record<string, number | null>[]; series: string[] } {
  const sel = rows.filter((r) => r.op === op && r.variant === variant);
  const series = [...new Set(sel.map((r) => r.provider))].sort();
  const bySize = new Map<number, Record<string, number | null>>();
  for (const r of sel) {
    const row = bySize.get(r.size_bytes) ?? { x: r.size_bytes };
    row[r.provider] = pick(r);
    bySize.set(r.size_bytes, row);
  }
  return { rows: [...bySize.values()].sort((a, b) => (a.x as number) - (b.x as number)), series };
}

/** Variant medians side by side (plain vs gzip9) per provider and size for an op, raw or RTT-adjusted. */
export function variantCompare(rows: StorageRow[], op: string, a: string, b: string, adjusted: boolean): { provider: string; size_bytes: number; a_us: number | null; b_us: number | null }[] {
  const sel = rows.filter((r) => r.op === op && (r.variant === a || r.variant === b));
  const m = new Map<string, { provider: string; size_bytes: number; a_us: number | null; b_us: number | null }>();
  for (const r of sel) {
    const k = `${r.provider}|${r.size_bytes}`;
    const row = m.get(k) ?? { provider: r.provider, size_bytes: r.size_bytes, a_us: null, b_us: null };
    const v = adjusted ? r.p50_adjusted_us : r.p50_us;
    if (r.variant === a) row.a_us = v;
    else row.b_us = v;
    m.set(k, row);
  }
  return [...m.values()].filter((r) => r.b_us !== null).sort((x, y) => x.provider.localeCompare(y.provider) || x.size_bytes - y.size_bytes);
}
