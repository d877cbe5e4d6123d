// The rule editor's fields as typed, and their mapping to and from the API's rule.
import type { BaselineKind, ConditionType, MetricOption, RuleDraft, RuleVM, Severity, ShiftDirection, Unit } from "../../api/alertRules";
import { fromInput, toInput } from "./units";

/** The editor's fields as typed (thresholds in ms or %, labels as text). */
export interface RuleForm {
  name: string;
  description: string;
  severity: Severity;
  labels: string;
  enabled: boolean;
  metric: string;
  statistic: string;
  scope: Record<string, string[]>;
  window_s: number;
  condition: ConditionType;
  value: string;
  k: string;
  baseline: BaselineKind;
  min_step: string;
  direction: ShiftDirection;
  lookback: number;
  x: number;
  y: number;
  n: number;
  /** empty: every matched series */
  m: string;
  channel_ids: string[];
  reminder_min: string;
}

export const WINDOWS_S = [30, 60, 120, 300, 600, 900, 1800, 3600];
export const INT_FILTERS = new Set(["payload_bytes", "size_bytes", "copies", "concurrency"]);

export function parseLabels(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text.split(",")) {
    const eq = part.indexOf("=");
    if (eq <= 0) continue;
    out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

export function formFromRule(r: RuleVM | undefined, metrics: MetricOption[]): RuleForm {
  const metric = metrics.find((m) => m.id === r?.metric) ?? metrics[0];
  const stat = metric?.statistics.find((s) => s.id === r?.statistic) ?? metric?.statistics[0];
  const unit: Unit = stat?.unit ?? "us";
  const c = r?.condition;
  return {
    name: r?.name ?? "",
    description: r?.description ?? "",
    severity: r?.severity ?? "warning",
    labels: Object.entries(r?.labels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(", "),
    enabled: r?.enabled ?? true,
    metric: metric?.id ?? "",
    statistic: stat?.id ?? "",
    scope: Object.fromEntries(Object.entries(r?.scope ?? {}).map(([k, v]) => [k, v.map(String)])),
    window_s: r?.window_s ?? 60,
    condition: c?.type ?? "above",
    value: c && (c.type === "above" || c.type === "below") ? toInput(unit, c.value) : "",
    k: c?.type === "baseline" ? String(c.k) : "2",
    baseline: c?.type === "baseline" ? c.baseline : "prev_24h",
    min_step: c?.type === "level_shift" ? toInput(unit, c.min_step) : "",
    direction: c?.type === "level_shift" ? c.direction : "up",
    lookback: c?.type === "level_shift" ? c.lookback_windows : 60,
    x: r?.x ?? 1,
    y: r?.y ?? 1,
    n: r?.n ?? 1,
    m: r?.m ? String(r.m) : "",
    channel_ids: r?.channel_ids ?? [],
    reminder_min: r?.reminder_interval_s ? String(r.reminder_interval_s / 60) : "",
  };
}

/** The API's rule body from the editor's fields (values converted to the statistic's unit). */
export function draftFromForm(f: RuleForm, unit: Unit): RuleDraft {
  const condition: RuleDraft["condition"] =
    f.condition === "baseline"
      ? { type: "baseline", k: Number(f.k), baseline: f.baseline }
      : f.condition === "level_shift"
        ? { type: "level_shift", min_step: fromInput(unit, f.min_step), direction: f.direction, lookback_windows: f.lookback }
        : { type: f.condition, value: fromInput(unit, f.value) };
  // Sizes and counts are integers in the analysis API; everything else is ids or names.
  const scope = Object.fromEntries(
    Object.entries(f.scope)
      .filter(([, v]) => v.length > 0)
      .map(([k, v]) => [k, INT_FILTERS.has(k) ? v.map((x) => (Number.isFinite(Number(x)) && x.trim() !== "" ? Number(x) : x)) : v]),
  );
  return {
    name: f.name.trim(),
    description: f.description.trim(),
    severity: f.severity,
    labels: parseLabels(f.labels),
    enabled: f.enabled,
    metric: f.metric,
    statistic: f.statistic,
    scope,
    window_s: f.window_s,
    condition,
    x: f.x,
    y: f.y,
    n: f.n,
    m: f.m.trim() ? Number(f.m) : null,
    channel_ids: f.channel_ids,
    reminder_interval_s: f.reminder_min.trim() ? Math.round(Number(f.reminder_min) * 60) : null,
  };
}

/** What each section of the editor reads and writes: the one form state and its field errors. */
export interface SectionProps {
  f: RuleForm;
  set: (patch: Partial<RuleForm>) => void;
  err: (path: string) => string | undefined;
  id: (name: string) => string;
}
