// Number formatting shared by tables, axes and tooltips. Latencies arrive in microseconds.

/** Format a duration given in microseconds as µs, ms or s with about 3 significant digits. */
export function formatUs(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us)) return "–";
  const abs = Math.abs(us);
  if (abs < 1000) return `${trim(us, abs < 10 ? 2 : abs < 100 ? 1 : 0)} µs`;
  if (abs < 1_000_000) {
    const ms = us / 1000;
    return `${trim(ms, Math.abs(ms) < 10 ? 2 : Math.abs(ms) < 100 ? 1 : 0)} ms`;
  }
  const s = us / 1_000_000;
  return `${trim(s, Math.abs(s) < 10 ? 2 : Math.abs(s) < 100 ? 1 : 0)} s`;
}

/** Same as formatUs but for values already in milliseconds. */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  return formatUs(ms * 1000);
}

const DURATION_UNITS: [string, number][] = [
  ["µs", 1],
  ["ms", 1000],
  ["s", 1_000_000],
];

/** Tick labels for a latency axis whose values reach `maxUs`: every tick in the one unit
 * of that largest value (no space, 3 significant digits), so a ms axis starts at "0ms". */
export function usAxis(maxUs: number): (us: number) => string {
  const abs = Number.isFinite(maxUs) ? Math.abs(maxUs) : 0;
  const [unit, factor] = abs >= 1_000_000 ? DURATION_UNITS[2]! : abs >= 1000 ? DURATION_UNITS[1]! : DURATION_UNITS[0]!;
  return (us: number) => (Number.isFinite(us) ? `${Number((us / factor).toPrecision(3))}${unit}` : "");
}

/** The largest finite value of the given keys over rows (0 when there is none), for usAxis. */
export function maxOf(rows: readonly Record<string, unknown>[], keys: readonly string[]): number {
  let hi = 0;
  for (const r of rows) {
    for (const k of keys) {
      const v = r[k];
      if (typeof v === "number" && Number.isFinite(v) && Math.abs(v) > hi) hi = Math.abs(v);
    }
  }
  return hi;
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const TIME_STEPS = [1, 2, 5, 10, 15, 30].map((s) => s * SECOND)
  .concat([1, 2, 5, 10, 15, 30].map((m) => m * MINUTE))
  .concat([1, 2, 3, 6, 12].map((h) => h * HOUR))
  .concat([1, 2, 7, 14, 30].map((d) => d * DAY));

/** Ticks for a UTC time axis over [fromMs, toMs]: whole steps (at most `maxTicks`), labelled
 * to the step's precision so no two ticks read alike. */
export function timeAxis(fromMs: number, toMs: number, maxTicks = 6): { ticks: number[]; format: (ms: number) => string } {
  const span = Math.max(0, toMs - fromMs);
  const step = TIME_STEPS.find((s) => span / s <= maxTicks) ?? TIME_STEPS[TIME_STEPS.length - 1]!;
  const ticks: number[] = [];
  for (let t = Math.ceil(fromMs / step) * step; t <= toMs; t += step) ticks.push(t);
  if (!ticks.length && Number.isFinite(fromMs)) ticks.push(fromMs);
  const sameDay = new Date(fromMs).toISOString().slice(0, 10) === new Date(toMs).toISOString().slice(0, 10);
  const format = (ms: number) => {
    const iso = new Date(ms).toISOString();
    if (step >= DAY) return iso.slice(5, 10);
    const clock = step < MINUTE ? iso.slice(11, 19) : iso.slice(11, 16);
    return sameDay ? clock : `${iso.slice(5, 10)} ${clock}`;
  };
  return { ticks, format };
}

/** A ratio 0..1 shown as a percentage; tiny non-zero rates keep their significance. */
export function formatPercent(ratio: number | null | undefined): string {
  if (ratio === null || ratio === undefined || !Number.isFinite(ratio)) return "–";
  const pct = ratio * 100;
  if (pct === 0) return "0%";
  if (Math.abs(pct) < 0.01) return `${pct.toPrecision(2)}%`;
  if (Math.abs(pct) < 10) return `${trim(pct, 2)}%`;
  return `${trim(pct, 1)}%`;
}

/** Plain count with thousands separators and k/M/G suffixes above a million. */
export function formatCount(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${trim(n / 1e9, 2)}G`;
  if (abs >= 1e6) return `${trim(n / 1e6, 2)}M`;
  return Math.round(n).toLocaleString("en-US");
}

/** Byte sizes in binary units as storage studies use them (1 kB = 1024 B in seed 000). */
export function formatBytes(b: number | null | undefined): string {
  if (b === null || b === undefined || !Number.isFinite(b)) return "–";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let v = b;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${trim(v, i === 0 || Number.isInteger(v) ? 0 : v < 10 ? 2 : 1)} ${units[i]}`;
}

/** Throughput in bits per second with SI units, as network links are quoted. */
export function formatBitsPerS(bytesPerS: number | null | undefined): string {
  if (bytesPerS === null || bytesPerS === undefined || !Number.isFinite(bytesPerS)) return "–";
  const bits = bytesPerS * 8;
  const units = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s"];
  let v = bits;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${trim(v, v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}

/** Nanoseconds per bit for axes: integers with separators, decimals below 10. */
export function formatNsPerBit(ns: number | null | undefined): string {
  if (ns === null || ns === undefined || !Number.isFinite(ns)) return "–";
  const abs = Math.abs(ns);
  if (abs >= 10) return Math.round(ns).toLocaleString("en-US");
  return trim(ns, abs >= 1 ? 1 : 3);
}

/** Plain ratio such as CoV or p99.99/mean. */
export function formatRatio(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  const abs = Math.abs(x);
  return trim(x, abs < 10 ? 3 : abs < 100 ? 1 : 0);
}

/** Timestamp in UTC, compact: "11-22 05:10:30Z" or with date only when the span is long. */
export function formatTime(ms: number, spanMs = 0): string {
  const d = new Date(ms);
  const iso = d.toISOString();
  if (spanMs > 3 * 86_400_000) return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
  if (spanMs > 86_400_000) return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
  if (spanMs > 0 && spanMs <= 15 * 60_000) return iso.slice(11, 19);
  return iso.slice(11, 16);
}

// Instants are shown in UTC, marked with a Z, everywhere in the UI.

/** An instant as the API takes it in a query: ISO 8601 in UTC ("2026-11-23T22:01:40.000Z"). */
export function isoInstant(ms: number): string {
  return new Date(ms).toISOString();
}

/** An instant (ms or ISO string) as "2026-11-23 22:01:40Z", or to the minute "2026-11-23 22:01Z". */
export function formatInstant(t: number | string, to: "second" | "minute" = "second"): string {
  const iso = new Date(t).toISOString();
  return `${iso.slice(0, to === "second" ? 19 : 16).replace("T", " ")}Z`;
}

/** A time of day, "22:01:40Z" to the nearest second (a switch is located to a fraction of one), or "22:01Z". */
export function formatClock(t: number, to: "second" | "minute" = "second"): string {
  const iso = new Date(to === "second" ? Math.round(t / 1000) * 1000 : t).toISOString();
  return `${iso.slice(11, to === "second" ? 19 : 16)}Z`;
}

/** A UTC day as "11-23" (daily medians). */
export function formatDay(t: number): string {
  return new Date(t).toISOString().slice(5, 10);
}

/** A span as people say it: "45 min", "2.5 h", "1 day", "7 days". */
export function formatSpan(ms: number): string {
  const min = ms / 60_000;
  if (min < 90) return `${Math.max(1, Math.round(min))} min`;
  const h = min / 60;
  if (h < 36) return `${trim(h, 1)} h`;
  const d = Math.round((h / 24) * 10) / 10;
  return `${trim(d, 1)} day${d === 1 ? "" : "s"}`;
}

/** Relative age such as "12 s ago", "3 min ago", "2 h ago". */
export function formatAgo(thenMs: number, nowMs: number = Date.now()): string {
  const s = Math.max(0, Math.round((nowMs - thenMs) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

function trim(x: number, digits: number): string {
  const s = x.toFixed(digits);
  return digits > 0 ? s.replace(/\.?0+$/, "") : s;
}
