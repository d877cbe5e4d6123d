import { isoInstant } from "./format";
// Time ranges as kept in the URL: a preset relative to now ("1h", "24h", ...) or a custom
// absolute pair (from/to as ISO strings). Resolution to absolute instants happens on fetch.

export interface Preset {
  key: string;
  label: string;
  ms: number;
}

export const PRESETS: Preset[] = [
  { key: "15m", label: "15 min", ms: 15 * 60_000 },
  { key: "1h", label: "1 h", ms: 3_600_000 },
  { key: "6h", label: "6 h", ms: 6 * 3_600_000 },
  { key: "24h", label: "24 h", ms: 86_400_000 },
  { key: "7d", label: "7 d", ms: 7 * 86_400_000 },
  { key: "30d", label: "30 d", ms: 30 * 86_400_000 },
];

export const DEFAULT_RANGE = "1h";

export interface RangeSpec {
  /** a preset key, or "custom" */
  range: string;
  from?: string | null;
  to?: string | null;
}

export interface Resolved {
  fromMs: number;
  toMs: number;
  label: string;
}

/** Turn a URL range into absolute instants; an unknown preset falls back to the default. */
export function resolveRange(spec: RangeSpec, nowMs: number = Date.now()): Resolved {
  if (spec.range === "custom" && spec.from && spec.to) {
    const fromMs = Date.parse(spec.from);
    const toMs = Date.parse(spec.to);
    if (Number.isFinite(fromMs) && Number.isFinite(toMs) && toMs > fromMs) {
      return { fromMs, toMs, label: `${spec.from.slice(0, 16)} → ${spec.to.slice(0, 16)}` };
    }
  }
  const preset = PRESETS.find((p) => p.key === spec.range) ?? PRESETS.find((p) => p.key === DEFAULT_RANGE)!;
  return { fromMs: nowMs - preset.ms, toMs: nowMs, label: `last ${preset.label}` };
}

/** Window width for a timeline over the range: 30 s (seed 003) unless that gives too many points. */
export function windowSecondsFor(spanMs: number, maxPoints = 720): number {
  const steps = [30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86_400];
  for (const s of steps) {
    if (spanMs / (s * 1000) <= maxPoints) return s;
  }
  return 86_400;
}

/** Value for an <input type="datetime-local"> in UTC from an ISO string or instant. */
export function toLocalInput(ms: number): string {
  return isoInstant(ms).slice(0, 16);
}

/** Parse a datetime-local value as UTC. */
export function fromLocalInput(v: string): string | null {
  const ms = Date.parse(`${v}:00Z`);
  return Number.isFinite(ms) ? isoInstant(ms) : null;
}
