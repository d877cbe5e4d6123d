import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { useAgents } from "../../api/agents";
import { fieldErrors } from "../../api/http";
import {
  createStorageTarget,
  deleteStorageTarget,
  listStorageTargets,
  updateStorageTarget,
  type StorageProvider,
  type StorageTarget,
  type StorageTargetCreate,
} from "../../api/org";
import { useIsAdmin } from "../../lib/role";
import { useVocabularies } from "../../api/vocabularies";
import { Field, FormError } from "../common/Field";
import { Card, ErrorState, Loading } from "../common/State";

type Source = "none" | "env" | "inline";

/** The secret fields each provider takes, inline (the value) or from the agent's environment (a variable name). */
const SECRETS: Record<StorageProvider, { key: string; label: string; secret: boolean }[]> = {
  s3: [
    { key: "access_key_id", label: "Access key id", secret: false },
    { key: "secret_access_key", label: "Secret access key", secret: true },
  ],
  azure: [
    { key: "account_name", label: "Account name", secret: false },
    { key: "account_key", label: "Account key", secret: true },
  ],
  gcs: [{ key: "service_account_json", label: "Service account JSON", secret: true }],
};

interface Draft {
  name: string;
  provider: StorageProvider;
  bucket: string;
  region: string;
  endpoint: string;
  path_style: boolean;
  interval_s: string;
  op_timeout_ms: string;
  prefix: string;
  enabled: boolean;
  assign_all: boolean;
  agent_ids: string[];
  source: Source | "keep";
  creds: Record<string, string>;
}

const blank = (): Draft => ({ name: "", provider: "s3", bucket: "", region: "", endpoint: "", path_style: false, interval_s: "600", op_timeout_ms: "120000", prefix: "stormwatch-probe/", enabled: true, assign_all: true, agent_ids: [], source: "none", creds: {} });

const fromTarget = (t: StorageTarget): Draft => ({
  name: t.name,
  provider: t.provider as StorageProvider,
  bucket: t.bucket,
  region: t.region,
  endpoint: t.endpoint,
  path_style: t.path_style,
  interval_s: String(t.interval_s),
  op_timeout_ms: String(t.op_timeout_ms),
  prefix: t.prefix,
  enabled: t.enabled,
  assign_all: t.assign_all,
  agent_ids: t.agent_ids,
  source: "keep",
  creds: {},
});

function credentials(d: Draft): StorageTargetCreate["credentials"] | undefined {
  if (d.source === "keep") return undefined;
  if (d.source === "none") return { source: "none" };
  const out: Record<string, string> = {};
  for (const s of SECRETS[d.provider]) {
    const v = (d.creds[s.key] ?? "").trim();
    if (v) out[d.source === "env" ? `${s.key}_var` : s.key] = v;
  }
  return { source: d.source, ...out } as StorageTargetCreate["credentials"];
}

// An empty field goes to the server as null (JSON has no NaN), which answers a 422 beside it.
const int = (v: string) => (v.trim() === "" ? Number.NaN : Math.round(Number(v)));

function body(d: Draft) {
  return {
    name: d.name,
    bucket: d.bucket,
    region: d.region,
    endpoint: d.endpoint,
    path_style: d.path_style,
    interval_s: int(d.interval_s),
    op_timeout_ms: int(d.op_timeout_ms),
    prefix: d.prefix,
    enabled: d.enabled,
    assign_all: d.assign_all,
    agent_ids: d.assign_all ? [] : d.agent_ids,
  };
}

function TargetForm({ target, onDone }: { target?: StorageTarget; onDone: () => void }) {
  const providers = useVocabularies().data?.storage_providers;
  const qc = useQueryClient();
  const agents = useAgents();
  const [d, setD] = useState<Draft>(() => (target ? fromTarget(target) : blank()));
  const save = useMutation({
    mutationFn: () => {
      const creds = credentials(d);
      if (target) return updateStorageTarget(target.id, { ...body(d), ...(creds ? { credentials: creds } : {}) });
      return createStorageTarget({ ...body(d), provider: d.provider, credentials: creds ?? { source: "none" } });
    },
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ["storage-targets"] });
      onDone();
    },
  });
  const errs = fieldErrors(save.error);
  const set = (patch: Partial<Draft>) => setD((x) => ({ ...x, ...patch }));
  const shown = new Set(["name", "provider", "bucket", "region", "endpoint", "interval_s", "op_timeout_ms", "prefix", "agent_ids"]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  const id = target ? `st-${target.id}` : "st-new";
  return (
    <form aria-label={target ? `Edit storage target ${target.name}` : "New storage target"} onSubmit={submit} className="stack">
      <div className="fields">
        <Field id={`${id}-name`} label="Name" error={errs.name}>
          {(a) => <input {...a} required maxLength={200} value={d.name} onChange={(e) => set({ name: e.target.value })} />}
        </Field>
        <Field id={`${id}-provider`} label="Provider" error={errs.provider}>
          {(a) => (
            <select {...a} value={d.provider} disabled={Boolean(target)} onChange={(e) => set({ provider: e.target.value as StorageProvider, creds: {} })}>
              {(providers ?? [d.provider]).map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field id={`${id}-bucket`} label={d.provider === "azure" ? "Container" : "Bucket"} error={errs.bucket}>
          {(a) => <input {...a} required maxLength={255} value={d.bucket} onChange={(e) => set({ bucket: e.target.value })} />}
        </Field>
        <Field id={`${id}-region`} label="Region (prices the cost advisors)" error={errs.region}>
          {(a) => <input {...a} maxLength={100} value={d.region} placeholder="e.g. us-east-1" onChange={(e) => set({ region: e.target.value })} />}
        </Field>
        <Field id={`${id}-endpoint`} label="Endpoint (empty: the provider's public one)" error={errs.endpoint}>
          {(a) => <input {...a} maxLength={500} value={d.endpoint} placeholder="https://…" onChange={(e) => set({ endpoint: e.target.value })} />}
        </Field>
        <Field id={`${id}-interval`} label="Probe every (s)" error={errs.interval_s}>
          {(a) => <input {...a} type="number" min={10} step={1} value={d.interval_s} onChange={(e) => set({ interval_s: e.target.value })} />}
        </Field>
        <Field id={`${id}-timeout`} label="Operation timeout (ms)" error={errs.op_timeout_ms}>
          {(a) => <input {...a} type="number" min={100} step={1} value={d.op_timeout_ms} onChange={(e) => set({ op_timeout_ms: e.target.value })} />}
        </Field>
        <Field id={`${id}-prefix`} label="Object prefix (each agent writes under <prefix><agent id>/)" error={errs.prefix}>
          {(a) => <input {...a} maxLength={400} value={d.prefix} onChange={(e) => set({ prefix: e.target.value })} />}
        </Field>
      </div>
      <label className="check">
        <input type="checkbox" checked={d.path_style} onChange={(e) => set({ path_style: e.target.checked })} /> Path-style URLs (S3-compatible endpoints)
      </label>
      <label className="check">
        <input type="checkbox" checked={d.enabled} onChange={(e) => set({ enabled: e.target.checked })} /> Probing on
      </label>
      <fieldset>
        <legend>Credentials</legend>
        <label>
          Source
          <select value={d.source} onChange={(e) => set({ source: e.target.value as Draft["source"], creds: {} })}>
            {target && <option value="keep">keep the stored ones</option>}
            <option value="none">none (public bucket, local emulator)</option>
            <option value="env">the agent host's environment variables</option>
            <option value="inline">stored encrypted on the server</option>
          </select>
        </label>
        {(d.source === "env" || d.source === "inline") &&
          SECRETS[d.provider].map((s) => (
            <label key={s.key}>
              {d.source === "env" ? `${s.label}: variable name` : s.label}
              {s.key === "service_account_json" && d.source === "inline" ? (
                <textarea value={d.creds[s.key] ?? ""} onChange={(e) => set({ creds: { ...d.creds, [s.key]: e.target.value } })} />
              ) : (
                <input type={s.secret && d.source === "inline" ? "password" : "text"} autoComplete="off" value={d.creds[s.key] ?? ""} onChange={(e) => set({ creds: { ...d.creds, [s.key]: e.target.value } })} />
              )}
            </label>
          ))}
      </fieldset>
      <fieldset>
        <legend>Agents that probe it</legend>
        <label className="check">
          <input type="checkbox" checked={d.assign_all} onChange={(e) => set({ assign_all: e.target.checked })} /> Every agent of the org
        </label>
        {!d.assign_all && (
          <div role="group" aria-label="Probing agents">
            {(agents.data ?? []).map((a) => (
              <label key={a.id} className="check">
                <input
                  type="checkbox"
                  checked={d.agent_ids.includes(a.id)}
                  onChange={(e) => set({ agent_ids: e.target.checked ? [...d.agent_ids, a.id] : d.agent_ids.filter((x) => x !== a.id) })}
                />{" "}
                {a.name}
              </label>
            ))}
            {errs.agent_ids && (
              <span className="field-error" role="alert">
                {errs.agent_ids}
              </span>
            )}
          </div>
        )}
      </fieldset>
      <FormError error={save.error} shown={shown} />
      <p className="toolbar">
        <button type="submit" className="primary" disabled={save.isPending}>
          {target ? "Save target" : "Create target"}
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </p>
    </form>
  );
}

/** The org's object-storage targets: admins create, edit, pause and delete them and choose the probing agents; viewers read. */
export function StorageTargets() {
  const admin = useIsAdmin();
  const qc = useQueryClient();
  const targets = useQuery({ queryKey: ["storage-targets"], queryFn: ({ signal }) => listStorageTargets(signal) });
  const agents = useAgents();
  const [editing, setEditing] = useState<string | null>(null);
  const remove = useMutation({
    mutationFn: (id: string) => deleteStorageTarget(id),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["storage-targets"] }),
  });
  const names = new Map((agents.data ?? []).map((a) => [a.id, a.name]));
  const list = targets.data ?? [];
  return (
    <Card title="Storage targets" note="object stores the agents probe with PUT/GET">
      {targets.isPending && <Loading />}
      {targets.error && <ErrorState error={targets.error} onRetry={() => void targets.refetch()} />}
      {targets.data && list.length === 0 && <p className="muted">No storage targets.</p>}
      {list.length > 0 && (
        <table className="data" aria-label="Storage target list">
          <thead>
            <tr>
              <th>name</th>
              <th>provider / region</th>
              <th>bucket</th>
              <th>every</th>
              <th>probed by</th>
              <th>state</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((t) => (
              <tr key={t.id}>
                <td>{t.name}</td>
                <td>
                  {t.provider} / {t.region || "—"}
                </td>
                <td>{t.bucket}</td>
                <td>{t.interval_s} s</td>
                <td>{t.assign_all ? "every agent" : t.agent_ids.map((i) => names.get(i) ?? i).join(", ") || "no agent"}</td>
                <td>{t.enabled ? <span className="badge ok">probing</span> : <span className="badge">paused</span>}</td>
                <td>
                  {admin && (
                    <>
                      <button type="button" aria-label={`Edit ${t.name}`} onClick={() => setEditing(t.id)}>
                        Edit
                      </button>{" "}
                      <button
                        type="button"
                        aria-label={`Delete ${t.name}`}
                        disabled={remove.isPending}
                        onClick={() => {
                          if (window.confirm(`Delete storage target ${t.name}? Its samples stay until retention removes them.`)) remove.mutate(t.id);
                        }}
                      >
                        Delete
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {remove.error && <ErrorState error={remove.error} />}
      {admin ? (
        editing === null ? (
          <p className="toolbar">
            <button type="button" onClick={() => setEditing("new")}>
              Add storage target
            </button>
          </p>
        ) : (
          <TargetForm key={editing} target={list.find((t) => t.id === editing)} onDone={() => setEditing(null)} />
        )
      ) : (
        <p className="muted" role="note">
          Changing storage targets needs the admin role.
        </p>
      )}
    </Card>
  );
}
