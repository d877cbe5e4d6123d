import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import type { AgentVM } from "../../api/models";
import { fieldErrors } from "../../api/http";
import { Field, FormError } from "../common/Field";
import { createExperiment, putSettings, type Proto, type ProtoSetting, type SettingsVM } from "../../api/throughput";
import { formatInstant } from "../../lib/format";

interface Draft {
  enabled: boolean;
  budget_gb: string;
  budget_usd: string;
  price: string;
  proto: ProtoSetting;
  duration_s: string;
  streams: string;
  udp_mbps: string;
  per_day: string;
}

const toDraft = (s: SettingsVM): Draft => ({
  enabled: s.enabled,
  budget_gb: String(s.monthly_budget_bytes / 1e9),
  budget_usd: s.monthly_budget_usd === null ? "" : String(s.monthly_budget_usd),
  price: s.price_per_gb_usd === null ? "" : String(s.price_per_gb_usd),
  proto: s.default_proto,
  duration_s: String(s.default_duration_s),
  streams: String(s.streams),
  udp_mbps: String(s.udp_rate_bits_per_s / 1e6),
  per_day: String(s.experiments_per_pair_per_day),
});

/** What the form sends: the edited fields over the stored settings (pairs and datagram size kept). */
export function fromDraft(d: Draft, base: SettingsVM): SettingsVM {
  const n = (v: string) => (v.trim() === "" ? NaN : Number(v));
  return {
    ...base,
    enabled: d.enabled,
    monthly_budget_bytes: Math.round(n(d.budget_gb) * 1e9),
    monthly_budget_usd: d.budget_usd.trim() === "" ? null : n(d.budget_usd),
    price_per_gb_usd: d.price.trim() === "" ? null : n(d.price),
    default_proto: d.proto,
    default_duration_s: Math.round(n(d.duration_s)),
    streams: Math.round(n(d.streams)),
    udp_rate_bits_per_s: Math.round(n(d.udp_mbps) * 1e6),
    experiments_per_pair_per_day: Math.round(n(d.per_day)),
  };
}

/** The org's throughput settings, for admins; the server's 422 messages show beside their field. */
export function SettingsForm({ settings }: { settings: SettingsVM }) {
  const qc = useQueryClient();
  const [d, setD] = useState<Draft>(() => toDraft(settings));
  const save = useMutation({
    mutationFn: () => putSettings(fromDraft(d, settings)),
    onSuccess: (s) => {
      qc.setQueryData(["tput-settings"], s);
      void qc.invalidateQueries({ queryKey: ["tput-budget"] });
    },
  });
  const errs = fieldErrors(save.error);
  const set = (patch: Partial<Draft>) => setD((x) => ({ ...x, ...patch }));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  const shown = ["monthly_budget_bytes", "monthly_budget_usd", "price_per_gb_usd", "default_proto", "default_duration_s", "streams", "udp_rate_bits_per_s", "experiments_per_pair_per_day"];
  return (
    <form aria-label="Throughput settings" onSubmit={submit}>
      <label className="check">
        <input type="checkbox" checked={d.enabled} onChange={(e) => set({ enabled: e.target.checked })} /> Schedule experiments
      </label>
      <div className="fields">
        <Field id="tput-budget" label="Monthly budget (GB)" error={errs.monthly_budget_bytes}>
          {(a) => <input {...a} type="number" min={0} step="any" value={d.budget_gb} onChange={(e) => set({ budget_gb: e.target.value })} />}
        </Field>
        <Field id="tput-budget-usd" label="Monthly cost cap (USD; empty: none)" error={errs.monthly_budget_usd}>
          {(a) => <input {...a} type="number" min={0} step="any" value={d.budget_usd} onChange={(e) => set({ budget_usd: e.target.value })} />}
        </Field>
        <Field id="tput-price" label="Price per GB (USD; empty: pricing catalog)" error={errs.price_per_gb_usd}>
          {(a) => <input {...a} type="number" min={0} step="any" value={d.price} onChange={(e) => set({ price: e.target.value })} />}
        </Field>
        <Field id="tput-proto" label="Protocol" error={errs.default_proto}>
          {(a) => (
            <select {...a} value={d.proto} onChange={(e) => set({ proto: e.target.value as ProtoSetting })}>
              <option value="tcp">TCP</option>
              <option value="udp">UDP</option>
              <option value="both">both</option>
            </select>
          )}
        </Field>
        <Field id="tput-duration" label="Length per direction (s)" error={errs.default_duration_s}>
          {(a) => <input {...a} type="number" min={1} step={1} value={d.duration_s} onChange={(e) => set({ duration_s: e.target.value })} />}
        </Field>
        <Field id="tput-streams" label="TCP streams" error={errs.streams}>
          {(a) => <input {...a} type="number" min={1} max={16} step={1} value={d.streams} onChange={(e) => set({ streams: e.target.value })} />}
        </Field>
        <Field id="tput-udp" label="UDP rate (Mbit/s)" error={errs.udp_rate_bits_per_s}>
          {(a) => <input {...a} type="number" min={0} step="any" value={d.udp_mbps} onChange={(e) => set({ udp_mbps: e.target.value })} />}
        </Field>
        <Field id="tput-per-day" label="Experiments per pair per day" error={errs.experiments_per_pair_per_day}>
          {(a) => <input {...a} type="number" min={0} step={1} value={d.per_day} onChange={(e) => set({ per_day: e.target.value })} />}
        </Field>
      </div>
      <FormError error={save.error} shown={shown} />
      <p className="toolbar">
        <button type="submit" className="primary" disabled={save.isPending}>
          Save settings
        </button>
        {save.isSuccess && !save.isPending && <span role="status">Saved.</span>}
      </p>
    </form>
  );
}

/** Schedule one experiment now between two agents; the server refuses (422) over budget or
 * when either agent is busy, and says why. */
export function RunNow({ agents, defaultProto, onScheduled }: { agents: AgentVM[]; defaultProto: ProtoSetting; onScheduled?: (id: string) => void }) {
  const qc = useQueryClient();
  const [src, setSrc] = useState("");
  const [dst, setDst] = useState("");
  const [proto, setProto] = useState<Proto>(defaultProto === "udp" ? "udp" : "tcp");
  const run = useMutation({
    mutationFn: () => createExperiment({ initiator_agent_id: src, responder_agent_id: dst, proto, start_at: null }),
    onSuccess: (e) => {
      void qc.invalidateQueries({ queryKey: ["tput-experiments"] });
      void qc.invalidateQueries({ queryKey: ["tput-budget"] });
      onScheduled?.(e.id);
    },
  });
  const sorted = [...agents].sort((a, b) => a.name.localeCompare(b.name));
  return (
    <form
      aria-label="Run an experiment now"
      className="field-row"
      onSubmit={(e) => {
        e.preventDefault();
        run.mutate();
      }}
    >
      <label>
        Initiator
        <select required value={src} onChange={(e) => setSrc(e.target.value)}>
          <option value="">choose…</option>
          {sorted.map((a) => (
            <option key={a.id} value={a.id}>
              {a.name}
              {a.region ? ` (${a.region})` : ""}
            </option>
          ))}
        </select>
      </label>
      <label>
        Responder
        <select required value={dst} onChange={(e) => setDst(e.target.value)}>
          <option value="">choose…</option>
          {sorted
            .filter((a) => a.id !== src)
            .map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
                {a.region ? ` (${a.region})` : ""}
              </option>
            ))}
        </select>
      </label>
      <label>
        Protocol
        <select value={proto} onChange={(e) => setProto(e.target.value as Proto)}>
          <option value="tcp">TCP</option>
          <option value="udp">UDP</option>
        </select>
      </label>
      <button type="submit" className="primary" disabled={run.isPending || !src || !dst}>
        Run an experiment now
      </button>
      {run.error && (
        <p className="state error" role="alert">
          Not scheduled: {run.error.message}
        </p>
      )}
      {run.data && !run.isPending && (
        <p role="status">
          Scheduled {run.data.srcName} → {run.data.dstName} ({run.data.proto.toUpperCase()}) at {formatInstant(run.data.startMs)}.
        </p>
      )}
    </form>
  );
}
