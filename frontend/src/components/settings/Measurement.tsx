import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { fieldErrors } from "../../api/http";
import { getOrg, updateOrg, type Org, type OrgUpdate } from "../../api/org";
import { useIsAdmin } from "../../lib/role";
import { Field, FormError } from "../common/Field";
import { Card, ErrorState, Loading } from "../common/State";

interface Draft {
  enabled: boolean;
  rate_hz: string;
  payload_bytes: string;
  timeout_ms: string;
  path_trace_interval_s: string;
  path_trace_proto: Org["mesh_settings"]["path_trace_proto"];
  raw_days: string;
  rollup_days: string;
}

const toDraft = (o: Org): Draft => ({
  enabled: o.mesh_settings.enabled ?? true,
  rate_hz: String(o.mesh_settings.rate_hz),
  payload_bytes: String(o.mesh_settings.payload_bytes),
  timeout_ms: String(o.mesh_settings.timeout_ms),
  path_trace_interval_s: String(o.mesh_settings.path_trace_interval_s),
  path_trace_proto: o.mesh_settings.path_trace_proto,
  raw_days: String(o.raw_retention_days),
  rollup_days: String(o.rollup_retention_days),
});

// An empty or non-numeric field goes to the server as NaN → null, which answers a 422 beside it.
const n = (v: string) => (v.trim() === "" ? Number.NaN : Number(v));

export function fromDraft(d: Draft): OrgUpdate {
  return {
    mesh_settings: {
      enabled: d.enabled,
      rate_hz: n(d.rate_hz),
      payload_bytes: Math.round(n(d.payload_bytes)),
      timeout_ms: Math.round(n(d.timeout_ms)),
      path_trace_interval_s: Math.round(n(d.path_trace_interval_s)),
      path_trace_proto: d.path_trace_proto,
    },
    raw_retention_days: Math.round(n(d.raw_days)),
    rollup_retention_days: Math.round(n(d.rollup_days)),
  };
}

const FIELDS: { key: keyof Omit<Draft, "enabled" | "path_trace_proto">; err: string; label: string; step: string }[] = [
  { key: "rate_hz", err: "mesh_settings.rate_hz", label: "Mesh rounds per second (each agent probes every peer once a round)", step: "any" },
  { key: "payload_bytes", err: "mesh_settings.payload_bytes", label: "Probe payload (bytes)", step: "1" },
  { key: "timeout_ms", err: "mesh_settings.timeout_ms", label: "Probe timeout (ms): slower replies count as lost", step: "1" },
  { key: "path_trace_interval_s", err: "mesh_settings.path_trace_interval_s", label: "Trace the path to each peer every (s; 0 = off, else at least 60)", step: "1" },
  { key: "raw_days", err: "raw_retention_days", label: "Keep raw samples (days)", step: "1" },
  { key: "rollup_days", err: "rollup_retention_days", label: "Keep rollups (days)", step: "1" },
];

function MeasurementForm({ org, admin }: { org: Org; admin: boolean }) {
  const qc = useQueryClient();
  const [d, setD] = useState<Draft>(() => toDraft(org));
  const save = useMutation({
    mutationFn: () => updateOrg(fromDraft(d)),
    onSuccess: (o) => qc.setQueryData(["org"], o),
  });
  const errs = fieldErrors(save.error);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  return (
    <form aria-label="Measurement settings" onSubmit={submit}>
      <div>
        <label className="check">
          <input type="checkbox" disabled={!admin} checked={d.enabled} onChange={(e) => setD({ ...d, enabled: e.target.checked })} /> Mesh probing on
        </label>
        <div className="fields">
          {FIELDS.map((f) => (
            <Field key={f.key} id={`org-${f.key}`} label={f.label} error={errs[f.err]}>
              {(a) => <input {...a} disabled={!admin} type="number" min={0} step={f.step} value={d[f.key]} onChange={(e) => setD({ ...d, [f.key]: e.target.value })} />}
            </Field>
          ))}
        </div>
      </div>
      <FormError error={save.error} shown={FIELDS.map((f) => f.err)} />
      {admin ? (
        <p className="toolbar">
          <button type="submit" className="primary" disabled={save.isPending}>
            Save measurement settings
          </button>
          {save.isSuccess && !save.isPending && <span role="status">Saved; agents apply it at their next config poll (within 30 s).</span>}
        </p>
      ) : (
        <p className="muted" role="note">
          Changing these needs the admin role.
        </p>
      )}
    </form>
  );
}

/** The org's mesh rate, payload and timeout and its retention: admins edit, viewers read. */
export function Measurement() {
  const admin = useIsAdmin();
  const org = useQuery({ queryKey: ["org"], queryFn: ({ signal }) => getOrg(signal) });
  return (
    <Card title="Measurement" note="mesh probing of every agent of the org, and how long data is kept">
      {org.isPending && <Loading />}
      {org.error && <ErrorState error={org.error} onRetry={() => void org.refetch()} />}
      {org.data && <MeasurementForm key={org.data.id} org={org.data} admin={admin} />}
    </Card>
  );
}
