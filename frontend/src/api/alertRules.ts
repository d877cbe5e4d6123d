// Alert rules (/api/v1/alert-rules): the editor's draft, the rule as listed, the metric catalog.
import { api as client, unwrap } from "./http";
import { arr, ms, num, obj, str, strMap } from "./decode";
import type { components } from "./schema";

type S = components["schemas"];
/** The rule body as the API types it (the editor's scope is a filter → values map). */
export const ruleBody = (d: RuleDraft): S["AlertRuleCreate"] => ({ ...d, scope: d.scope as S["AlertScope"] });
export type Severity = "critical" | "warning" | "info";
export const SEVERITIES: Severity[] = ["critical", "warning", "info"];
export type ConditionType = "above" | "below" | "baseline" | "level_shift";
export type BaselineKind = "prev_24h" | "week_ago";
export type ShiftDirection = "up" | "down" | "either";
/** How a statistic's values are written: microseconds, a ratio 0..1, seconds, bytes per second, a count, a multiple (stretch). */
export type Unit = "us" | "ratio" | "s" | "bytes/s" | "count" | "x";

export interface StatisticOption {
  id: string;
  label: string;
  unit: Unit;
}

export interface MetricOption {
  id: string;
  label: string;
  kind: string;
  statistics: StatisticOption[];
  /** scope filters this metric accepts (names of the analysis API's query parameters) */
  filters: string[];
  conditions: ConditionType[];
  windowMinS: number;
  windowMaxS: number;
}

export type Condition =
  | { type: "above" | "below"; value: number }
  | { type: "baseline"; k: number; baseline: BaselineKind }
  | { type: "level_shift"; min_step: number; direction: ShiftDirection; lookback_windows: number };

/** A rule as the editor holds it and the API takes it (values in the statistic's unit). */
export interface RuleDraft {
  name: string;
  description: string;
  severity: Severity;
  labels: Record<string, string>;
  enabled: boolean;
  metric: string;
  statistic: string;
  scope: Record<string, (string | number)[]>;
  window_s: number;
  condition: Condition;
  x: number;
  y: number;
  n: number;
  /** series that must be considered together; null = every matched series */
  m: number | null;
  channel_ids: string[];
  reminder_interval_s: number | null;
}

export interface RuleVM extends RuleDraft {
  id: string;
  /** alerts of this rule firing now */
  firing: number;
  createdMs: number;
  updatedMs: number;
}
const UNITS: Unit[] = ["us", "ratio", "s", "bytes/s", "count", "x"];
export const asUnit = (v: unknown): Unit => (UNITS.includes(v as Unit) ? (v as Unit) : "us");
export const asSeverity = (v: unknown): Severity => (SEVERITIES.includes(v as Severity) ? (v as Severity) : "warning");

function toCondition(v: unknown): Condition {
  const c = obj(v);
  const type = str(c.kind ?? c.type);
  if (type === "baseline") return { type, k: num(c.k) ?? 2, baseline: c.baseline === "week_ago" ? "week_ago" : "prev_24h" };
  if (type === "level_shift")
    return { type, min_step: num(c.min_step) ?? 0, direction: c.direction === "down" || c.direction === "either" ? c.direction : "up", lookback_windows: num(c.lookback_windows) ?? 60 };
  return { type: type === "below" ? "below" : "above", value: num(c.value ?? c.threshold) ?? 0 };
}

export function toRule(v: unknown): RuleVM {
  const r = obj(v);
  return {
    id: str(r.id),
    name: str(r.name),
    description: str(r.description),
    severity: asSeverity(r.severity),
    labels: strMap(r.labels),
    enabled: r.enabled !== false,
    metric: str(r.metric),
    statistic: str(r.statistic),
    scope: Object.fromEntries(Object.entries(obj(r.scope)).map(([k, x]) => [k, Array.isArray(x) ? x.map((y) => str(y)) : [str(x)]])),
    window_s: num(r.window_s) ?? 60,
    condition: toCondition(r.condition),
    x: num(r.x) ?? 1,
    y: num(r.y) ?? 1,
    n: num(r.n) ?? 1,
    m: num(r.m),
    channel_ids: arr(r.channel_ids).map((x) => str(x)),
    reminder_interval_s: num(r.reminder_interval_s),
    createdMs: ms(r.created_at) ?? 0,
    updatedMs: ms(r.updated_at) ?? 0,
    firing: num(r.firing) ?? 0,
  };
}

/** The editor's metric choices from the API's catalog (GET /vocabularies, alert_metrics). */
export function metricOptions(r: unknown): MetricOption[] {
  const list = Array.isArray(r) ? r : arr(obj(r).metrics);
  const win = obj(obj(r).window_s);
  const catalogConditions = arr(obj(r).conditions);
  return list.map((x) => {
    const m = obj(x);
    return {
      id: str(m.id ?? m.name ?? m.metric),
      label: str(m.label ?? m.title ?? m.name ?? m.id),
      kind: str(m.kind),
      statistics: arr(m.statistics).map((s) => {
        const o = obj(s);
        const id = typeof s === "string" ? s : str(o.id ?? o.name);
        // The catalog says each statistic's unit (rates are ratios): never worked out here.
        return { id, label: str(o.label ?? o.title, id), unit: asUnit(o.unit ?? obj(m.units)[id]) };
      }),
      filters: arr(m.filters ?? m.scope_filters).map((f) => str(f)),
      conditions: arr(m.conditions ?? catalogConditions)
        .map((c) => str(c))
        .filter((c): c is ConditionType => ["above", "below", "baseline", "level_shift"].includes(c)),
      windowMinS: num(m.window_min_s) ?? num(win.min) ?? 30,
      windowMaxS: num(m.window_max_s) ?? num(win.max) ?? 3600,
    };
  });
}

export async function listRules(signal?: AbortSignal): Promise<RuleVM[]> {
  return arr(unwrap(await client.GET("/api/v1/alert-rules", { signal }))).map(toRule);
}

export async function getRule(id: string, signal?: AbortSignal): Promise<RuleVM> {
  return toRule(unwrap(await client.GET("/api/v1/alert-rules/{rule_id}", { params: { path: { rule_id: id } }, signal })));
}

export async function createRule(d: RuleDraft): Promise<RuleVM> {
  return toRule(unwrap(await client.POST("/api/v1/alert-rules", { body: ruleBody(d) })));
}

export async function updateRule(id: string, d: RuleDraft): Promise<RuleVM> {
  return toRule(unwrap(await client.PATCH("/api/v1/alert-rules/{rule_id}", { params: { path: { rule_id: id } }, body: ruleBody(d) })));
}

export async function deleteRule(id: string): Promise<void> {
  unwrap(await client.DELETE("/api/v1/alert-rules/{rule_id}", { params: { path: { rule_id: id } } }));
}
