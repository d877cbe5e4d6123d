import { useQuery } from "@tanstack/react-query";
import type { FormEvent, ReactNode } from "react";
import { listTargets } from "../../api/advisors";
import { Loading } from "../common/State";
import { DecideNav } from "./DecideNav";
import { formatInstant } from "../../lib/format";

/** Every advisor page's head: its title and the Decide section's navigation. */
export function DecidePage({ title, current, children }: { title: string; current: string; children: ReactNode }) {
  return (
    <>
      <div className="page-head">
        <h1>Decide: {title}</h1>
      </div>
      <DecideNav current={current} />
      {children}
    </>
  );
}

/** The org's storage targets, and the one chosen (the first until the user picks). */
export function useTargetChoice(picked: string) {
  const targets = useQuery({ queryKey: ["storage-targets"], queryFn: ({ signal }) => listTargets(signal) });
  return { targets, chosen: picked || targets.data?.[0]?.id || "" };
}

type TargetOption = { id: string; name: string; provider: string; region: string };

export function TargetSelect({ targets, value, onChange }: { targets: TargetOption[]; value: string; onChange: (id: string) => void }) {
  return (
    <label>
      Storage target
      <select value={value} onChange={(e) => onChange(e.target.value)}>
        {targets.map((t) => (
          <option key={t.id} value={t.id}>
            {t.name} ({t.provider} {t.region})
          </option>
        ))}
      </select>
    </label>
  );
}

/** An agent picker; `anyLabel` adds a first, empty choice. */
export function AgentSelect({ label, agents, value, onChange, anyLabel }: { label: string; agents: { id: string; name: string }[]; value: string; onChange: (id: string) => void; anyLabel?: string }) {
  return (
    <label>
      {label}
      <select value={value} onChange={(e) => onChange(e.target.value)}>
        {anyLabel !== undefined && <option value="">{anyLabel}</option>}
        {agents.map((a) => (
          <option key={a.id} value={a.id}>
            {a.name}
          </option>
        ))}
      </select>
    </label>
  );
}

/** A number input kept as text, so a half-typed value stays editable. */
export function NumberField({ label, value, onChange, min = "0", max, step = "any" }: { label: string; value: string; onChange: (v: string) => void; min?: string; max?: string; step?: string }) {
  return (
    <label>
      {label}
      <input type="number" min={min} max={max} step={step} value={value} onChange={(e) => onChange(e.target.value)} />
    </label>
  );
}

/** While an advisor computes, a spinner; when it fails, the server's message. */
export function RunState({ pending, error, what = "Evaluating" }: { pending: boolean; error: Error | null; what?: string }) {
  return (
    <>
      {pending && <Loading what={what} />}
      {error && (
        <p className="state error" role="alert">
          {error.message}
        </p>
      )}
    </>
  );
}

/** A row of checkboxes, one per option, under a legend. */
export function CheckList({ legend, options, checked, onToggle }: { legend: string; options: { value: string; label: string }[]; checked: string[]; onToggle: (value: string) => void }) {
  return (
    <fieldset className="field-row">
      <legend>{legend}</legend>
      {options.map((o) => (
        <label key={o.value}>
          <span>
            <input type="checkbox" checked={checked.includes(o.value)} onChange={() => onToggle(o.value)} /> {o.label}
          </span>
        </label>
      ))}
    </fieldset>
  );
}

/** A storage-target advisor's inputs: the target, the advisor's own fields, Evaluate. */
export function TargetForm({ label, targets, chosen, onTarget, busy, onSubmit, children }: { label: string; targets: { isPending: boolean; data?: TargetOption[] }; chosen: string; onTarget: (id: string) => void; busy: boolean; onSubmit: () => void; children: ReactNode }) {
  if (targets.isPending) return <Loading />;
  function submit(e: FormEvent) {
    e.preventDefault();
    if (chosen) onSubmit();
  }
  return (
    <form className="field-row" onSubmit={submit} aria-label={label}>
      <TargetSelect targets={targets.data ?? []} value={chosen} onChange={onTarget} />
      {children}
      <button type="submit" className="primary" disabled={!chosen || busy}>
        Evaluate
      </button>
    </form>
  );
}

/** Which data an answer came from: its resolution and UTC range, to the minute. */
export const dataRange = (source: { resolution: string; start: string; end: string }) => `${source.resolution} from ${formatInstant(source.start, "minute")} to ${formatInstant(source.end, "minute")}`;
