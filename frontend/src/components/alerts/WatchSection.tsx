// The rule editor's "What to watch" section: metric, statistic, window and the scope filters.
import { useAgents } from "../../api/agents";
import type { AgentVM } from "../../api/models";
import type { MetricOption } from "../../api/alertRules";
import { topologyLabel, type Vocabularies } from "../../api/vocabularies";
import { keyAt, keyLabel } from "../../lib/zones";
import { Card } from "../common/State";
import { Field } from "../common/Field";
import { MultiSelect } from "../common/MultiSelect";
import { WINDOWS_S, type SectionProps } from "./ruleForm";

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

export function WatchSection({ f, set, err, id, metrics, metric, vocab, scopeErr }: SectionProps & { metrics: MetricOption[]; metric: MetricOption | undefined; vocab: Vocabularies; scopeErr: [string, string][] }) {
  const agentsQ = useAgents();
  return (
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
  );
}
