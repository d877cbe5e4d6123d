// The rule editor's "Who to tell" section: severity, labels, reminders and channels.
import { useQuery } from "@tanstack/react-query";
import { SEVERITIES, type Severity } from "../../api/alertRules";
import { listChannels } from "../../api/channels";
import { Card } from "../common/State";
import { Field } from "../common/Field";
import type { SectionProps } from "./ruleForm";

export function NotifySection({ f, set, err, id }: SectionProps) {
  const channelsQ = useQuery({ queryKey: ["channels"], queryFn: ({ signal }) => listChannels(signal) });
  return (
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
  );
}
