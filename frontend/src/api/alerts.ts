// Alerts (/api/v1/alerts): the firing and resolved alerts with their evidence, as the components draw them.
import { api as client, unwrap } from "./http";
import { asSeverity, asUnit, type Severity, type Unit } from "./alertRules";
import { arr, ms, num, obj, str, strMap } from "./decode";

export interface AgentRef {
  id: string;
  name: string;
}

export interface WindowValue {
  t: number;
  value: number | null;
  threshold: number | null;
  breach: boolean | null;
}

export interface AgreeingSeries {
  key: string;
  name: string;
  value: number | null;
  threshold: number | null;
  baseline: number | null;
  src: AgentRef | null;
  dst: AgentRef | null;
  /** the last Y windows of this series when it fired */
  values: WindowValue[];
}

export interface Evidence {
  value: number | null;
  threshold: number | null;
  baseline: number | null;
  agreeing: AgreeingSeries[];
  fromMs: number | null;
  toMs: number | null;
  dashboardPath: string | null;
  /** Fired before its window could be judged closed, on the samples in by then. */
  decidedEarly: boolean;
}

export interface AlertEventVM {
  id: string;
  kind: string;
  atMs: number;
}

export interface AlertVM {
  id: string;
  ruleId: string;
  ruleName: string;
  severity: Severity;
  labels: Record<string, string>;
  state: "firing" | "resolved";
  startedMs: number;
  resolvedMs: number | null;
  unit: Unit;
  series: AgreeingSeries[];
  evidence: Evidence;
  events: AlertEventVM[];
}

function agent(v: unknown, idKey: unknown, nameKey: unknown): AgentRef | null {
  const o = obj(v);
  const id = str(o.id ?? idKey);
  const name = str(o.name ?? nameKey ?? id);
  return id || name ? { id, name: name || id } : null;
}

export function toSeries(v: unknown): AgreeingSeries {
  const o = obj(v);
  const labels = obj(o.labels);
  const src = agent(o.src, o.src_id ?? labels.src_id ?? (typeof o.src === "string" ? o.src : undefined), o.src_name ?? labels.src_name);
  const dst = agent(o.dst, o.dst_id ?? labels.dst_id ?? (typeof o.dst === "string" ? o.dst : undefined), o.dst_name ?? labels.dst_name);
  const key = str(o.key ?? o.series_key);
  const name = str(o.name ?? o.series_name, src && dst ? `${src.name} → ${dst.name}` : key);
  return { key, name, value: num(o.value ?? o.peak), threshold: num(o.threshold), baseline: num(o.baseline), src: src ?? agent(o.agent, undefined, undefined), dst, values: arr(o.values).map(toWindow) };
}

function toWindow(p: unknown): WindowValue {
  const o = obj(p);
  return { t: ms(o.t ?? o.time ?? o.start) ?? 0, value: num(o.value ?? o.v), threshold: num(o.threshold), breach: typeof o.breach === "boolean" ? o.breach : null };
}

export function toEvidence(v: unknown): Evidence {
  const e = obj(v);
  const range = obj(e.time_range ?? e.range);
  return {
    value: num(e.value),
    threshold: num(e.threshold),
    baseline: num(e.baseline),
    agreeing: arr(Array.isArray(e.series) ? e.series : e.agreeing).map(toSeries),
    fromMs: ms(range.from ?? range.start ?? e.from ?? e.start),
    toMs: ms(range.to ?? range.end ?? e.to ?? e.end),
    dashboardPath: typeof e.dashboard_path === "string" ? e.dashboard_path : null,
    decidedEarly: e.decided_early === true,
  };
}

export function toAlert(v: unknown): AlertVM {
  const a = obj(v);
  const rule = obj(a.rule);
  const evidence = toEvidence(a.evidence);
  if (typeof a.dashboard_path === "string") evidence.dashboardPath = a.dashboard_path;
  const series = arr(a.series).map(toSeries);
  return {
    id: str(a.id),
    ruleId: str(a.rule_id ?? rule.id),
    ruleName: str(a.rule_name ?? rule.name, "rule"),
    severity: asSeverity(a.severity ?? rule.severity),
    labels: strMap(a.labels ?? rule.labels),
    state: a.state === "resolved" ? "resolved" : "firing",
    startedMs: ms(a.started_at) ?? 0,
    resolvedMs: ms(a.resolved_at),
    unit: asUnit(a.unit),
    // The evidence's series carry their windows; the top-level list is the same series without them.
    series: evidence.agreeing.length ? evidence.agreeing : series,
    evidence,
    events: arr(a.events).map((x) => {
      const o = obj(x);
      return { id: str(o.id), kind: str(o.kind), atMs: ms(o.at) ?? 0 };
    }),
  };
}

export async function listAlerts(q: { state?: "firing" | "resolved"; ruleId?: string; limit?: number } = {}, signal?: AbortSignal): Promise<AlertVM[]> {
  const query = { state: q.state, rule_id: q.ruleId, limit: q.limit };
  return unwrap(await client.GET("/api/v1/alerts", { params: { query }, signal })).map(toAlert);
}

export async function getAlert(id: string, signal?: AbortSignal): Promise<AlertVM> {
  return toAlert(unwrap(await client.GET("/api/v1/alerts/{alert_id}", { params: { path: { alert_id: id } }, signal })));
}
