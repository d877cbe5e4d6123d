import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useMemo, useState, type FormEvent } from "react";
import {
  SEVERITIES,
  createRule,
  metricOptions,
  updateRule,
  type BaselineKind,
  type ConditionType,
  type ShiftDirection,
  type MetricOption,
  type RuleDraft,
  type RuleVM,
  type Severity,
  type Unit,
} from "../../api/alertRules";
import { backtestRule } from "../../api/backtest";
import { listChannels } from "../../api/channels";
import { useAgents } from "../../api/endpoints";
import { fieldErrors } from "../../api/http";
import type { AgentVM } from "../../api/models";
import { Card } from "../common/State";
import { MultiSelect } from "../common/MultiSelect";
import { Field } from "../common/Field";
import { BacktestChart } from "./BacktestChart";
import { formatInstant, formatSpan } from "../../lib/format";
import { formatValue, fromInput, inputUnit, toInput } from "./units";
import { useIsAdmin } from "../../lib/role";
import { keyAt, keyLabel } from "../../lib/zones";
import { topologyLabel, useVocabularies, type Vocabularies } from "../../api/vocabularies";

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
const CONDITION_LABELS: Record<ConditionType, string> = {
  above: "above a value",
  below: "below a value",
  baseline: "above k × baseline",
  level_shift: "level shift",
};
const FILTER_LABELS: Record<string, string> = {
  agents: "Agents",
  src: "Sources",
  dst: "Destinations",
  regions: "Regions",
  zones: "Zones",
  providers: "Providers",
  topology_class: "Topology class",
  payload_bytes: "Payload (bytes)",
  target: "Storage target",
  op: "Operation",
  size_bytes: "Object size (bytes)",
  group_name: "Quorum group",
};
const INT_FILTERS = new Set(["payload_bytes", "size_bytes", "copies", "concurrency"]);

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

/** Choices for a scope filter drawn from the fleet or the API's vocabularies, or null for free text. */
function choices(filter: string, agents: AgentVM[], vocab: Vocabularies): { value: string; label: string }[] | null {
  const uniq = (xs: (string | null)[]) => [...new Set(xs.filter((x): x is string => Boolean(x)))].sort().map((v) => ({ value: v, label: v }));
  if (filter === "agents" || filter === "src" || filter === "dst") return agents.map((a) => ({ value: a.id, label: a.name })).sort((a, b) => a.label.localeCompare(b.label));
  if (filter === "regions") return uniq(agents.map((a) => a.region));
  // Zone names repeat across regions and providers: a zone is the heatmap's provider/region/zone key.
  if (filter === "zones") return [...new Set(agents.map((a) => keyAt(a, "zone")))].sort().map((k) => ({ value: k, label: keyLabel(k, "zone") }));
  if (filter === "providers") return uniq(agents.map((a) => a.provider));
  if (filter === "topology_class") return vocab.topology_classes.map((t) => ({ value: t, label: topologyLabel(t) }));
  if (filter === "op") return vocab.storage_ops.map((v) => ({ value: v, label: v }));
  if (filter === "variant") return vocab.storage_variants.map((v) => ({ value: v, label: v }));
  if (filter === "proto") return vocab.protos.map((v) => ({ value: v, label: v }));
  return null;
}

export function RuleEditor({ rule, onSaved, onCancel }: { rule?: RuleVM; onSaved: (r: RuleVM) => void; onCancel?: () => void }) {
  const vocabQ = useVocabularies();
  const metrics = useMemo(() => (vocabQ.data ? metricOptions(vocabQ.data.alert_metrics) : null), [vocabQ.data]);
  if (vocabQ.error) return <p className="state error" role="alert">Could not load the metrics: {vocabQ.error.message}</p>;
  if (!vocabQ.data || !metrics) return <p className="state" role="status">Loading the metrics…</p>;
  return <EditorForm metrics={metrics} vocab={vocabQ.data} rule={rule} onSaved={onSaved} onCancel={onCancel} />;
}

function EditorForm({ metrics, vocab, rule, onSaved, onCancel }: { metrics: MetricOption[]; vocab: Vocabularies; rule?: RuleVM; onSaved: (r: RuleVM) => void; onCancel?: () => void }) {
  const admin = useIsAdmin();
  const uid = useId();
  const qc = useQueryClient();
  const [f, setF] = useState<RuleForm>(() => formFromRule(rule, metrics));
  const agentsQ = useAgents();
  const channelsQ = useQuery({ queryKey: ["channels"], queryFn: ({ signal }) => listChannels(signal) });
  const metric = metrics.find((m) => m.id === f.metric) ?? metrics[0];
  const stat = metric?.statistics.find((s) => s.id === f.statistic) ?? metric?.statistics[0];
  const unit: Unit = stat?.unit ?? "us";
  const draft = useMemo(() => draftFromForm(f, unit), [f, unit]);
  const draftKey = JSON.stringify(draft);

  const backtest = useMutation({ mutationFn: (d: RuleDraft) => backtestRule(d), mutationKey: ["backtest"] });
  const save = useMutation({
    mutationFn: (d: RuleDraft) => (rule ? updateRule(rule.id, d) : createRule(d)),
    onSuccess: (r) => {
      void qc.invalidateQueries({ queryKey: ["alert-rules"] });
      onSaved(r);
    },
  });
  const [testedKey, setTestedKey] = useState<string | null>(null);
  const tested = testedKey === draftKey && backtest.isSuccess;
  const errors = { ...fieldErrors(backtest.error), ...fieldErrors(save.error) };
  const err = (path: string) => errors[path];
  const known = new Set(["name", "description", "severity", "labels", "metric", "statistic", "window_s", "condition", "condition.value", "condition.k", "condition.baseline", "condition.min_step", "condition.direction", "condition.lookback_windows", "x", "y", "n", "m", "channel_ids", "reminder_interval_s", "scope"]);
  const scopeErr = Object.entries(errors).filter(([k]) => k === "scope" || k.startsWith("scope."));
  const other = Object.entries(errors).filter(([k]) => !known.has(k) && !k.startsWith("scope."));
  const plainError = [backtest.error, save.error].find((e) => e && Object.keys(fieldErrors(e)).length === 0);

  const set = (patch: Partial<RuleForm>) => setF((cur) => ({ ...cur, ...patch }));
  const id = (name: string) => `${uid}-${name}`;

  function runBacktest(e?: FormEvent) {
    e?.preventDefault();
    save.reset();
    setTestedKey(draftKey);
    backtest.mutate(draft);
  }

  const bt = backtest.data;
  const it = inputUnit(unit);
  return (
    <form className="rule-editor" aria-label={rule ? `Edit rule ${rule.name}` : "New alert rule"} onSubmit={runBacktest} noValidate>
      <Card title="What to watch">
        <div className="fields">
          <Field label="Name" id={id("name")} error={err("name")}>
            {(a) => <input {...a} value={f.name} onChange={(e) => set({ name: e.target.value })} maxLength={200} required />}
          </Field>
          <Field label="Metric" id={id("metric")} error={err("metric")}>
            {(a) => (
              <select
                {...a}
                value={f.metric}
                onChange={(e) => {
                  const m = metrics.find((x) => x.id === e.target.value);
                  const allowed = new Set(m?.filters ?? []);
                  set({
                    metric: e.target.value,
                    statistic: m?.statistics[0]?.id ?? "",
                    scope: Object.fromEntries(Object.entries(f.scope).filter(([k]) => allowed.has(k))),
                    condition: m && !m.conditions.includes(f.condition) ? (m.conditions[0] ?? "above") : f.condition,
                  });
                }}
              >
                {metrics.map((m) => (
                  <option key={m.id} value={m.id}>
                    {m.label}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Statistic" id={id("statistic")} error={err("statistic")}>
            {(a) => (
              <select {...a} value={f.statistic} onChange={(e) => set({ statistic: e.target.value })}>
                {(metric?.statistics ?? []).map((s) => (
                  <option key={s.id} value={s.id}>
                    {s.label}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Window" id={id("window")} error={err("window_s")}>
            {(a) => (
              <select {...a} value={f.window_s} onChange={(e) => set({ window_s: Number(e.target.value) })}>
                {WINDOWS_S.filter((w) => !metric || (w >= metric.windowMinS && w <= metric.windowMaxS)).map((w) => (
                  <option key={w} value={w}>
                    {w < 60 ? `${w} s` : `${w / 60} min`}
                  </option>
                ))}
              </select>
            )}
          </Field>
        </div>
        <fieldset className="scope">
          <legend>Scope (every matching series is evaluated on its own; empty = all)</legend>
          <div className="fields">
            {(metric?.filters ?? []).map((flt) => {
              const opts = choices(flt, agentsQ.data ?? [], vocab);
              const label = FILTER_LABELS[flt] ?? flt;
              const e = err(`scope.${flt}`);
              return (
                <Field key={flt} label={label} id={id(`scope-${flt}`)} error={e}>
                  {(a) =>
                    opts ? (
                      <MultiSelect a11y={a} label={label} options={opts} value={f.scope[flt] ?? []} onChange={(next) => set({ scope: { ...f.scope, [flt]: next } })} />
                    ) : (
                      <input
                        {...a}
                        value={(f.scope[flt] ?? []).join(",")}
                        placeholder="comma-separated"
                        onChange={(ev) =>
                          set({
                            scope: {
                              ...f.scope,
                              [flt]: ev.target.value
                                .split(",")
                                .map((s) => s.trim())
                                .filter(Boolean),
                            },
                          })
                        }
                      />
                    )
                  }
                </Field>
              );
            })}
          </div>
          {scopeErr
            .filter(([k]) => k === "scope" || !(metric?.filters ?? []).includes(k.slice(6)))
            .map(([k, m]) => (
              <p key={k} className="field-error" role="alert">
                {k}: {m}
              </p>
            ))}
        </fieldset>
      </Card>

      <Card title="When to fire">
        <div className="fields">
          <Field label="Condition" id={id("condition")} error={err("condition")}>
            {(a) => (
              <select {...a} value={f.condition} onChange={(e) => set({ condition: e.target.value as ConditionType })}>
                {(metric?.conditions.length ? metric.conditions : (Object.keys(CONDITION_LABELS) as ConditionType[])).map((c) => (
                  <option key={c} value={c}>
                    {CONDITION_LABELS[c]}
                  </option>
                ))}
              </select>
            )}
          </Field>
          {(f.condition === "above" || f.condition === "below") && (
            <Field label={`Threshold${it.label ? ` (${it.label})` : ""}`} id={id("value")} error={err("condition.value")}>
              {(a) => <input {...a} type="number" step="any" value={f.value} onChange={(e) => set({ value: e.target.value })} />}
            </Field>
          )}
          {f.condition === "baseline" && (
            <>
              <Field label="Factor k" id={id("k")} error={err("condition.k")}>
                {(a) => <input {...a} type="number" step="any" min="1" value={f.k} onChange={(e) => set({ k: e.target.value })} />}
              </Field>
              <Field label="Baseline" id={id("baseline")} error={err("condition.baseline")}>
                {(a) => (
                  <select {...a} value={f.baseline} onChange={(e) => set({ baseline: e.target.value as BaselineKind })}>
                    <option value="prev_24h">previous 24 h</option>
                    <option value="week_ago">same hour a week earlier</option>
                  </select>
                )}
              </Field>
            </>
          )}
          {f.condition === "level_shift" && (
            <>
              <Field label={`Minimum shift${it.label ? ` (${it.label})` : ""}`} id={id("min_step")} error={err("condition.min_step")}>
                {(a) => <input {...a} type="number" step="any" min="0" value={f.min_step} onChange={(e) => set({ min_step: e.target.value })} />}
              </Field>
              <Field label="Direction" id={id("direction")} error={err("condition.direction")}>
                {(a) => (
                  <select {...a} value={f.direction} onChange={(e) => set({ direction: e.target.value as ShiftDirection })}>
                    <option value="up">up (slower)</option>
                    <option value="down">down</option>
                    <option value="either">either</option>
                  </select>
                )}
              </Field>
              <Field label="Detector look-back (windows)" id={id("lookback")} error={err("condition.lookback_windows")}>
                {(a) => <input {...a} type="number" min="10" max="500" value={f.lookback} onChange={(e) => set({ lookback: Number(e.target.value) })} />}
              </Field>
            </>
          )}
          <Field label="X windows" id={id("x")} error={err("x")}>
            {(a) => <input {...a} type="number" min="1" value={f.x} onChange={(e) => set({ x: Number(e.target.value) })} />}
          </Field>
          <Field label="of Y consecutive" id={id("y")} error={err("y")}>
            {(a) => <input {...a} type="number" min="1" value={f.y} onChange={(e) => set({ y: Number(e.target.value) })} />}
          </Field>
          <Field label="N series" id={id("n")} error={err("n")}>
            {(a) => <input {...a} type="number" min="1" value={f.n} onChange={(e) => set({ n: Number(e.target.value) })} />}
          </Field>
          <Field label="of M matched (empty = all)" id={id("m")} error={err("m")}>
            {(a) => <input {...a} type="number" min="1" value={f.m} onChange={(e) => set({ m: e.target.value })} />}
          </Field>
        </div>
      </Card>

      <Card title="Who to tell">
        <div className="fields">
          <Field label="Severity" id={id("severity")} error={err("severity")}>
            {(a) => (
              <select {...a} value={f.severity} onChange={(e) => set({ severity: e.target.value as Severity })}>
                {SEVERITIES.map((s) => (
                  <option key={s}>{s}</option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Labels (key=value, …)" id={id("labels")} error={err("labels")}>
            {(a) => <input {...a} value={f.labels} placeholder="team=net, env=prod" onChange={(e) => set({ labels: e.target.value })} />}
          </Field>
          <Field label="Reminder every (min, empty = none)" id={id("reminder")} error={err("reminder_interval_s")}>
            {(a) => <input {...a} type="number" min="1" value={f.reminder_min} onChange={(e) => set({ reminder_min: e.target.value })} />}
          </Field>
          <Field label="Description" id={id("description")} error={err("description")}>
            {(a) => <textarea {...a} rows={2} value={f.description} onChange={(e) => set({ description: e.target.value })} />}
          </Field>
        </div>
        <fieldset className="channels">
          <legend>Channels</legend>
          {channelsQ.data?.length === 0 && <span className="muted">No channels yet: add one on the Alerts page.</span>}
          {(channelsQ.data ?? []).map((c) => (
            <label key={c.id} className="check">
              <input
                type="checkbox"
                checked={f.channel_ids.includes(c.id)}
                onChange={(e) => set({ channel_ids: e.target.checked ? [...f.channel_ids, c.id] : f.channel_ids.filter((x) => x !== c.id) })}
              />
              {c.name} <span className="muted">({c.type})</span>
            </label>
          ))}
          {err("channel_ids") && (
            <span className="field-error" role="alert">
              {err("channel_ids")}
            </span>
          )}
        </fieldset>
        <label className="check">
          <input type="checkbox" checked={f.enabled} onChange={(e) => set({ enabled: e.target.checked })} /> Enabled
        </label>
      </Card>

      {other.length > 0 && (
        <div className="state error" role="alert">
          {other.map(([k, m]) => (
            <p key={k}>
              {k ? `${k}: ` : ""}
              {m}
            </p>
          ))}
        </div>
      )}
      {plainError && (
        <p className="state error" role="alert">
          {plainError.message}
        </p>
      )}

      <Card title="Backtest" note="the rule replayed over the stored data of the last 7 days (from where it begins, on a young install), before it is saved">
        <div className="toolbar">
          <button type="submit" className={tested ? undefined : "primary"} disabled={backtest.isPending}>
            {backtest.isPending ? "Backtesting…" : "Run backtest"}
          </button>
          {admin && (
            <button type="button" className={tested ? "primary" : undefined} disabled={!tested || save.isPending} onClick={() => save.mutate(draft)}>
              {save.isPending ? "Saving…" : rule ? "Save changes" : "Save rule"}
            </button>
          )}
          {onCancel && (
            <button type="button" onClick={onCancel}>
              Cancel
            </button>
          )}
          {admin && !tested && !backtest.isPending && <span className="muted">Saving is possible once the backtest has run on these settings.</span>}
          {!admin && <span className="muted">Viewers may backtest; saving a rule needs the admin role.</span>}
        </div>
        {bt && testedKey === draftKey && (
          <div className="stack" style={{ marginTop: 12 }}>
            <p role="status" className="backtest-count">
              Would have fired <strong>{bt.count}</strong> time{bt.count === 1 ? "" : "s"} in the last {formatSpan(bt.toMs - bt.fromMs)} over {bt.seriesTotal} matched series
              {bt.series.length < bt.seriesTotal ? ` (${bt.series.length} drawn)` : ""}.
            </p>
            {bt.notes.map((n) => (
              <p key={n} className="muted">
                {n}
              </p>
            ))}
            {bt.series.length > 0 && <BacktestChart series={bt.series} firings={bt.firings} unit={unit} fromMs={bt.fromMs} toMs={bt.toMs} />}
            {bt.firings.length > 0 && (
              <div className="scroll-x">
                <table className="data" aria-label="Backtest firings">
                  <thead>
                    <tr>
                      <th>series</th>
                      <th>start</th>
                      <th>end</th>
                      <th>peak</th>
                    </tr>
                  </thead>
                  <tbody>
                    {bt.firings.slice(0, 50).map((x, i) => (
                      <tr key={i}>
                        <td>{x.series}</td>
                        <td>{formatInstant(x.startMs, "minute")}</td>
                        <td>{x.endMs ? formatInstant(x.endMs, "minute") : "still firing"}</td>
                        <td>{formatValue(unit, x.peak)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </div>
        )}
      </Card>
    </form>
  );
}
