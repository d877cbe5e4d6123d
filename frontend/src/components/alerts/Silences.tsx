import { useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import type { RuleVM } from "../../api/alertRules";
import { createMaintenance, deleteMaintenance, listMaintenance } from "../../api/maintenance";
import { createSilence, expireSilence, listSilences, type Matcher } from "../../api/silences";
import { fieldErrors } from "../../api/http";
import { parseLabels } from "./ruleForm";
import { DeleteButton, RuleMatchFields, ruleNamesOf } from "./shared";
import { useListMutation } from "../../lib/useListMutation";
import { useIsAdmin } from "../../lib/role";
import { AdminOnly } from "../common/AdminOnly";
import { formatInstant, isoInstant } from "../../lib/format";

const when = (ms: number | null) => (ms ? formatInstant(ms, "minute") : "–");
const matcherText = (ms: Matcher[]) => ms.map((m) => `${m.label}${m.op}${m.value}`).join(", ");
const toMatchers = (text: string): Matcher[] => Object.entries(parseLabels(text)).map(([label, value]) => ({ label, op: "=", value }));
const DURATIONS_MIN = [30, 60, 120, 240, 480, 1440];

function Errors({ error }: { error: Error | null }) {
  if (!error) return null;
  const fields = fieldErrors(error);
  const lines = Object.keys(fields).length ? Object.entries(fields).map(([k, m]) => `${k}: ${m}`) : [error.message];
  return (
    <div className="state error" role="alert">
      {lines.map((l) => (
        <p key={l}>{l}</p>
      ))}
    </div>
  );
}

/** A silence: by rule or by label matchers, until an end time, with who (the server records it) and why. */
export function SilenceForm({ rules, presetRuleId, onDone }: { rules: RuleVM[]; presetRuleId?: string; onDone?: () => void }) {
  const [ruleId, setRuleId] = useState(presetRuleId ?? "");
  const [labels, setLabels] = useState("");
  const [minutes, setMinutes] = useState(60);
  const [comment, setComment] = useState("");
  const m = useListMutation(
    () => {
      const now = Date.now();
      return createSilence({ rule_ids: ruleId ? [ruleId] : [], matchers: toMatchers(labels), starts_at: isoInstant(now), ends_at: isoInstant(now + minutes * 60_000), comment });
    },
    "silences",
    () => {
      setComment("");
      setLabels("");
      onDone?.();
    },
  );
  function submit(e: FormEvent) {
    e.preventDefault();
    m.mutate();
  }
  return (
    <form className="field-row" aria-label="New silence" onSubmit={submit}>
      <RuleMatchFields rules={rules} ruleId={ruleId} onRuleId={setRuleId} labels={labels} onLabels={setLabels} placeholder="team=net, env=prod" />
      <label>
        For
        <select value={minutes} onChange={(e) => setMinutes(Number(e.target.value))}>
          {DURATIONS_MIN.map((d) => (
            <option key={d} value={d}>
              {d < 60 ? `${d} min` : `${d / 60} h`}
            </option>
          ))}
        </select>
      </label>
      <label>
        Comment
        <input required value={comment} onChange={(e) => setComment(e.target.value)} placeholder="why" />
      </label>
      <button type="submit" className="primary" disabled={m.isPending}>
        Create silence
      </button>
      <Errors error={m.error} />
    </form>
  );
}

export function Silences({ rules }: { rules: RuleVM[] }) {
  const admin = useIsAdmin();
  const q = useQuery({ queryKey: ["silences"], queryFn: ({ signal }) => listSilences(signal) });
  const expire = useListMutation(expireSilence, "silences");
  const ruleNames = (ids: string[]) => (ids.length ? ruleNamesOf(rules, ids).join(", ") : "any");
  return (
    <>
      <AdminOnly what="Creating a silence">
        <SilenceForm rules={rules} />
      </AdminOnly>
      {q.error && <Errors error={q.error} />}
      {q.data && q.data.length === 0 && <p className="muted">No silences.</p>}
      {q.data && q.data.length > 0 && (
        <table className="data" aria-label="Silences">
          <thead>
            <tr>
              <th>rule</th>
              <th>matchers</th>
              <th>from</th>
              <th>until</th>
              <th>by</th>
              <th>comment</th>
              <th>state</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {q.data.map((s) => (
              <tr key={s.id}>
                <td>{ruleNames(s.ruleIds)}</td>
                <td>{matcherText(s.matchers) || "–"}</td>
                <td>{when(s.startsMs)}</td>
                <td>{when(s.endsMs)}</td>
                <td>{s.createdBy}</td>
                <td>{s.comment}</td>
                <td>
                  <span className={`badge ${s.state === "active" ? "warn" : ""}`}>{s.state}</span>
                </td>
                <td>
                  {s.state !== "expired" && admin && (
                    <button type="button" className="danger" aria-label={`Expire silence ${s.comment || s.id}`} onClick={() => expire.mutate(s.id)}>
                      Expire
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Errors error={expire.error} />
    </>
  );
}

export function MaintenanceWindows({ rules }: { rules: RuleVM[] }) {
  const q = useQuery({ queryKey: ["maintenance"], queryFn: ({ signal }) => listMaintenance(signal) });
  const [name, setName] = useState("");
  const [kind, setKind] = useState<"once" | "recurring">("once");
  const [start, setStart] = useState("");
  const [end, setEnd] = useState("");
  const [rrule, setRrule] = useState("FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0");
  const [durationMin, setDurationMin] = useState(60);
  const [tz, setTz] = useState(() => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC");
  const [ruleId, setRuleId] = useState("");
  const [labels, setLabels] = useState("");
  const [note, setNote] = useState("");
  const create = useListMutation(
    () =>
      createMaintenance({
        name,
        timezone: tz,
        rule_ids: ruleId ? [ruleId] : [],
        matchers: toMatchers(labels),
        comment: note,
        // Local wall-clock times in the window's timezone; the server stores UTC.
        ...(kind === "once" ? { starts_at: start, ends_at: end } : { rrule, duration_s: durationMin * 60, starts_at: start }),
      }),
    "maintenance",
    () => setName(""),
  );
  const del = useListMutation(deleteMaintenance, "maintenance");
  return (
    <>
      <AdminOnly what="Adding a maintenance window">
      <form
        className="field-row"
        aria-label="New maintenance window"
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <label>
          Name
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <span className="group" role="group" aria-label="Repeats">
          <button type="button" aria-pressed={kind === "once"} onClick={() => setKind("once")}>
            One-off
          </button>
          <button type="button" aria-pressed={kind === "recurring"} onClick={() => setKind("recurring")}>
            Recurring
          </button>
        </span>
        <label>
          {kind === "once" ? "Starts" : "First occurrence"}
          <input type="datetime-local" required value={start} onChange={(e) => setStart(e.target.value)} />
        </label>
        {kind === "once" ? (
          <label>
            Ends
            <input type="datetime-local" required value={end} onChange={(e) => setEnd(e.target.value)} />
          </label>
        ) : (
          <>
            <label>
              RRULE (RFC 5545)
              <input required value={rrule} onChange={(e) => setRrule(e.target.value)} size={36} />
            </label>
            <label>
              Duration (min)
              <input type="number" min="1" required value={durationMin} onChange={(e) => setDurationMin(Number(e.target.value))} />
            </label>
          </>
        )}
        <label>
          Timezone
          <input required value={tz} onChange={(e) => setTz(e.target.value)} />
        </label>
        <RuleMatchFields rules={rules} ruleId={ruleId} onRuleId={setRuleId} labels={labels} onLabels={setLabels} placeholder="env=prod" />
        <label>
          Comment
          <input value={note} onChange={(e) => setNote(e.target.value)} placeholder="why" />
        </label>
        <button type="submit" className="primary" disabled={create.isPending}>
          Add window
        </button>
      </form>
      </AdminOnly>
      <Errors error={create.error} />
      {q.error && <Errors error={q.error} />}
      {q.data && q.data.length === 0 && <p className="muted">No maintenance windows.</p>}
      {q.data && q.data.length > 0 && (
        <table className="data" aria-label="Maintenance windows">
          <thead>
            <tr>
              <th>name</th>
              <th>when</th>
              <th>timezone</th>
              <th>scope</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {q.data.map((w) => (
              <tr key={w.id}>
                <td>{w.name}</td>
                <td>
                  {w.rrule ? `${w.rrule} for ${Math.round((w.durationS ?? 0) / 60)} min, next ${when(w.nextStartMs)}` : `${when(w.startsMs)} – ${when(w.endsMs)}`}{" "}
                  {w.activeNow && <span className="badge warn">in progress</span>}
                </td>
                <td>{w.timezone}</td>
                <td>{[...ruleNamesOf(rules, w.ruleIds), matcherText(w.matchers)].filter(Boolean).join("; ") || "all rules"}</td>
                <td>
                  <DeleteButton label={`Delete maintenance window ${w.name}`} onDelete={() => del.mutate(w.id)} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
