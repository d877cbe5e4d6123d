// Alerts: rules, backtests, alerts, silences, maintenance windows, channels and deliveries.
// Maps the API's answers onto the view models the alerts components draw, so a change in the
// API touches this file only.
import { api as client, unwrap } from "./http";
import type { components } from "./schema";

type S = components["schemas"];
/** The rule body as the API types it (the editor's scope is a filter → values map). */
const ruleBody = (d: RuleDraft): S["AlertRuleCreate"] => ({ ...d, scope: d.scope as S["AlertScope"] });

export type Severity = "critical" | "warning" | "info";
export const SEVERITIES: Severity[] = ["critical", "warning", "info"];
export type ConditionType = "above" | "below" | "baseline" | "level_shift";
export type BaselineKind = "prev_24h" | "week_ago";
export type ShiftDirection = "up" | "down" | "either";
/** How a statistic's values are written: microseconds, a ratio 0..1, seconds, bytes per second. */
export type Unit = "us" | "ratio" | "s" | "bytes/s" | "count";

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

export interface BacktestPoint {
  t: number;
  value: number | null;
  /** the threshold in force for this window: absolute value, k x baseline or null */
  threshold: number | null;
}

export interface BacktestSeries {
  key: string;
  name: string;
  points: BacktestPoint[];
}

export interface Firing {
  startMs: number;
  endMs: number | null;
  series: string;
  peak: number | null;
}

export interface BacktestVM {
  count: number;
  fromMs: number;
  toMs: number;
  firings: Firing[];
  /** the drawn series (the server picks the most telling ones when many match) */
  series: BacktestSeries[];
  seriesTotal: number;
  notes: string[];
}

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

export type ChannelType = "email" | "slack" | "webhook";

export interface ChannelVM {
  id: string;
  name: string;
  type: ChannelType;
  /** settings the API shows back (never a password or secret) */
  config: Record<string, unknown>;
  createdMs: number;
}

export interface Matcher {
  label: string;
  op: "=" | "!=" | "=~" | "!~";
  value: string;
}

export interface SilenceVM {
  id: string;
  ruleIds: string[];
  matchers: Matcher[];
  startsMs: number;
  endsMs: number;
  createdBy: string;
  comment: string;
  state: "pending" | "active" | "expired";
}

export interface MaintenanceVM {
  id: string;
  name: string;
  startsMs: number | null;
  endsMs: number | null;
  rrule: string | null;
  durationS: number | null;
  timezone: string;
  ruleIds: string[];
  matchers: Matcher[];
  comment: string;
  activeNow: boolean;
  nextStartMs: number | null;
}

export interface DeliveryVM {
  id: string;
  channelId: string;
  channelName: string;
  alertIds: string[];
  ruleId: string | null;
  ruleName: string;
  kind: string;
  status: string;
  attempts: number;
  error: string | null;
  /** the receiving server's reply (SMTP reply, HTTP status and the service's error code) */
  response: string | null;
  atMs: number;
}

// ---- defensive readers: evidence is free-form JSON ----

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown, d = ""): string => (typeof v === "string" ? v : typeof v === "number" ? String(v) : d);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
const ms = (v: unknown): number | null => {
  if (typeof v === "number") return v > 1e11 ? v : v * 1000;
  if (typeof v !== "string") return null;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : null;
};
const strMap = (v: unknown): Record<string, string> => Object.fromEntries(Object.entries(obj(v)).map(([k, x]) => [k, str(x)]));

function agent(v: unknown, idKey: unknown, nameKey: unknown): AgentRef | null {
  const o = obj(v);
  const id = str(o.id ?? idKey);
  const name = str(o.name ?? nameKey ?? id);
  return id || name ? { id, name: name || id } : null;
}

function toSeries(v: unknown): AgreeingSeries {
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
  };
}



const UNITS: Unit[] = ["us", "ratio", "s", "bytes/s", "count"];
export const asUnit = (v: unknown): Unit => (UNITS.includes(v as Unit) ? (v as Unit) : "us");
/** A statistic's unit: rates are ratios whatever the metric's latency unit. */
export function unitFor(metricUnit: unknown, statistic: string): Unit {
  if (statistic.endsWith("_rate")) return "ratio";
  if (statistic.endsWith("_s")) return "s";
  return asUnit(metricUnit);
}
const asSeverity = (v: unknown): Severity => (SEVERITIES.includes(v as Severity) ? (v as Severity) : "warning");

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
    unit: unitFor(a.unit ?? obj(a.evidence).unit, str(a.statistic ?? obj(a.evidence).statistic ?? rule.statistic)),
    // The evidence's series carry their windows; the top-level list is the same series without them.
    series: evidence.agreeing.length ? evidence.agreeing : series,
    evidence,
    events: arr(a.events).map((x) => {
      const o = obj(x);
      return { id: str(o.id), kind: str(o.kind), atMs: ms(o.at) ?? 0 };
    }),
  };
}

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

export function toBacktest(v: unknown): BacktestVM {
  const b = obj(v);
  const firings = arr(b.firings).map((x): Firing => {
    const f = obj(x);
    const s = f.series;
    const series = typeof s === "string" ? s : Array.isArray(s) ? s.map((x) => toSeries(x).name).join(", ") : toSeries(s).name;
    return { startMs: ms(f.start ?? f.started_at) ?? 0, endMs: ms(f.end ?? f.resolved_at), series, peak: num(f.peak) };
  });
  return {
    count: num(b.count) ?? firings.length,
    fromMs: ms(b.from ?? b.start) ?? 0,
    toMs: ms(b.to ?? b.end) ?? 0,
    firings,
    seriesTotal: num(b.series_total) ?? arr(b.series).length,
    notes: arr(b.notes).map((n) => str(n)),
    series: arr(b.series).map((x) => {
      const s = obj(x);
      const named = toSeries(s);
      return {
        key: named.key,
        name: named.name,
        points: arr(s.points ?? s.windows).map((p) => {
          const o = obj(p);
          return { t: ms(o.t ?? o.time ?? o.start) ?? 0, value: num(o.value), threshold: num(o.threshold ?? o.baseline) };
        }),
      };
    }),
  };
}

// ---- calls ----

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
        return { id, label: str(o.label ?? o.title, id), unit: o.unit ? asUnit(o.unit) : unitFor(m.unit, id) };
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

export async function backtestRule(d: RuleDraft, signal?: AbortSignal): Promise<BacktestVM> {
  return toBacktest(unwrap(await client.POST("/api/v1/alert-rules/backtest", { body: ruleBody(d), signal })));
}

export async function listAlerts(q: { state?: "firing" | "resolved"; ruleId?: string; limit?: number } = {}, signal?: AbortSignal): Promise<AlertVM[]> {
  const query = { state: q.state, rule_id: q.ruleId, limit: q.limit };
  return unwrap(await client.GET("/api/v1/alerts", { params: { query }, signal })).map(toAlert);
}

export async function getAlert(id: string, signal?: AbortSignal): Promise<AlertVM> {
  return toAlert(unwrap(await client.GET("/api/v1/alerts/{alert_id}", { params: { path: { alert_id: id } }, signal })));
}

// ---- channels ----

function toChannel(v: unknown): ChannelVM {
  const c = obj(v);
  const type = str(c.kind ?? c.type);
  return { id: str(c.id), name: str(c.name), type: type === "email" || type === "slack" ? type : "webhook", config: obj(c.config ?? c.settings), createdMs: ms(c.created_at) ?? 0 };
}

export async function listChannels(signal?: AbortSignal): Promise<ChannelVM[]> {
  return arr(unwrap(await client.GET("/api/v1/channels", { signal }))).map(toChannel);
}

/** Creates a channel; a webhook's signing secret comes back here once and never again. */
export type ChannelCreate = S["EmailChannelCreate"] | S["SlackChannelCreate"] | S["WebhookChannelCreate"];

export async function createChannel(body: ChannelCreate): Promise<{ channel: ChannelVM; secret: string | null }> {
  const r = unwrap(await client.POST("/api/v1/channels", { body }));
  return { channel: toChannel(r), secret: r.signing_secret || null };
}

export async function deleteChannel(id: string): Promise<void> {
  unwrap(await client.DELETE("/api/v1/channels/{channel_id}", { params: { path: { channel_id: id } } }));
}

export interface TestSendVM {
  ok: boolean;
  detail: string;
}

/** A test send; the server's own reply (SMTP reply, HTTP status and body) comes back verbatim. */
export async function testChannel(id: string): Promise<TestSendVM> {
  const r = await client.POST("/api/v1/channels/{channel_id}/test", { params: { path: { channel_id: id } } });
  if (r.data) return { ok: r.data.ok, detail: r.data.detail };
  // Not a send result (unknown channel, no right to test): the API's own message.
  const detail = obj(r.error).detail;
  return { ok: false, detail: typeof detail === "string" ? detail : JSON.stringify(detail ?? `HTTP ${r.response.status}`) };
}

function toDelivery(v: unknown): DeliveryVM {
  const d = obj(v);
  return {
    id: str(d.id),
    channelId: str(d.channel_id),
    channelName: str(d.channel_name ?? obj(d.channel).name),
    alertIds: arr(d.alert_ids).map((x) => str(x)),
    ruleId: typeof d.rule_id === "string" ? d.rule_id : null,
    ruleName: str(d.rule_name),
    kind: str(d.notification_kind ?? d.kind),
    status: str(d.state ?? d.status),
    attempts: num(d.attempts) ?? 0,
    error: typeof d.last_error === "string" ? d.last_error : null,
    response: typeof d.response === "string" ? d.response : null,
    atMs: ms(d.sent_at ?? d.updated_at ?? d.created_at) ?? 0,
  };
}

export async function listDeliveries(q: { channelId?: string; alertId?: string; ruleId?: string } = {}, signal?: AbortSignal): Promise<DeliveryVM[]> {
  const rows = q.channelId
    ? unwrap(await client.GET("/api/v1/channels/{channel_id}/deliveries", { params: { path: { channel_id: q.channelId } }, signal }))
    : unwrap(await client.GET("/api/v1/deliveries", { params: { query: { alert_id: q.alertId, rule_id: q.ruleId } }, signal }));
  return rows.map(toDelivery);
}

// ---- silences and maintenance ----

function toMatchers(v: unknown): Matcher[] {
  return arr(v).map((m) => {
    const o = obj(m);
    const op = str(o.op, "=");
    return { label: str(o.label ?? o.name), op: op === "!=" || op === "=~" || op === "!~" ? op : "=", value: str(o.value) };
  });
}

function toSilence(v: unknown): SilenceVM {
  const s = obj(v);
  const ends = ms(s.ends_at) ?? 0;
  return {
    id: str(s.id),
    ruleIds: arr(s.rule_ids).map((x) => str(x)),
    matchers: toMatchers(s.matchers),
    startsMs: ms(s.starts_at) ?? 0,
    endsMs: ends,
    createdBy: str(s.created_by),
    comment: str(s.comment),
    state: s.state === "pending" || s.state === "expired" ? s.state : s.state === "active" || ends > Date.now() ? "active" : "expired",
  };
}

export async function listSilences(signal?: AbortSignal): Promise<SilenceVM[]> {
  return arr(unwrap(await client.GET("/api/v1/silences", { signal }))).map(toSilence);
}

export async function createSilence(body: S["SilenceCreate"]): Promise<SilenceVM> {
  return toSilence(unwrap(await client.POST("/api/v1/silences", { body })));
}

export async function expireSilence(id: string): Promise<void> {
  unwrap(await client.DELETE("/api/v1/silences/{silence_id}", { params: { path: { silence_id: id } } }));
}

function toMaintenance(v: unknown): MaintenanceVM {
  const m = obj(v);
  return {
    id: str(m.id),
    name: str(m.name),
    startsMs: ms(m.starts_at),
    endsMs: ms(m.ends_at),
    rrule: typeof m.rrule === "string" && m.rrule ? m.rrule : null,
    durationS: num(m.duration_s),
    timezone: str(m.timezone, "UTC"),
    ruleIds: arr(m.rule_ids).map((x) => str(x)),
    matchers: toMatchers(m.matchers),
    comment: str(m.comment),
    activeNow: m.active_now === true,
    nextStartMs: ms(m.next_start),
  };
}

export async function listMaintenance(signal?: AbortSignal): Promise<MaintenanceVM[]> {
  return arr(unwrap(await client.GET("/api/v1/maintenance-windows", { signal }))).map(toMaintenance);
}

export async function createMaintenance(body: S["MaintenanceWindowCreate"]): Promise<MaintenanceVM> {
  return toMaintenance(unwrap(await client.POST("/api/v1/maintenance-windows", { body })));
}

export async function deleteMaintenance(id: string): Promise<void> {
  unwrap(await client.DELETE("/api/v1/maintenance-windows/{window_id}", { params: { path: { window_id: id } } }));
}
