import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { getAlert, type AlertVM } from "../../api/alerts";
import { withCustomRange } from "../../lib/alertMarks";
import { follow } from "../common/Link";
import { formatValue } from "./units";
import { formatInstant } from "../../lib/format";

const when = (ms: number | null) => (ms ? formatInstant(ms) : "–");

export function SeverityBadge({ severity }: { severity: string }) {
  return <span className={`badge ${severity === "critical" ? "bad" : severity === "warning" ? "warn" : ""}`}>{severity}</span>;
}

/** Why an alert fired: values against the threshold or baseline, the agreeing series, the time range and transitions. */
export function AlertEvidence({ alert }: { alert: AlertVM }) {
  // Transitions come with the single-alert answer; fetched when the evidence is opened.
  const detail = useQuery({ queryKey: ["alert", alert.id], queryFn: ({ signal }) => getAlert(alert.id, signal) });
  const a = detail.data ?? alert;
  const e = a.evidence;
  const unit = a.unit;
  return (
    <div className="evidence">
      <dl className="kv">
        <div>
          <dt>value</dt>
          <dd>{formatValue(unit, e.value)}</dd>
        </div>
        <div>
          <dt>threshold</dt>
          <dd>{formatValue(unit, e.threshold)}</dd>
        </div>
        <div>
          <dt>agreeing series</dt>
          <dd>{a.series.length}</dd>
        </div>
        {e.baseline !== null && (
          <div>
            <dt>baseline</dt>
            <dd>{formatValue(unit, e.baseline)}</dd>
          </div>
        )}
        <div>
          <dt>time range</dt>
          <dd>
            {when(e.fromMs)} – {when(e.toMs)}
          </dd>
        </div>
        {e.decidedEarly && (
          <div>
            <dt>decided</dt>
            <dd>before its window closed, on the samples in by then</dd>
          </div>
        )}
        {Object.keys(a.labels).length > 0 && (
          <div>
            <dt>labels</dt>
            <dd>
              {Object.entries(a.labels)
                .map(([k, v]) => `${k}=${v}`)
                .join(", ")}
            </dd>
          </div>
        )}
      </dl>
      <div className="scroll-x">
        <table className="data" aria-label="Agreeing series">
          <thead>
            <tr>
              <th>series</th>
              <th>value</th>
              <th>threshold</th>
              {e.baseline !== null && <th>baseline</th>}
              <th>windows (oldest first; ▲ breached)</th>
            </tr>
          </thead>
          <tbody>
            {a.series.map((s) => (
              <tr key={s.key || s.name}>
                <td>{s.name}</td>
                <td>{formatValue(unit, s.value)}</td>
                <td>{formatValue(unit, s.threshold)}</td>
                {e.baseline !== null && <td>{formatValue(unit, s.baseline)}</td>}
                <td style={{ whiteSpace: "normal" }}>
                  {s.values.map((v) => `${formatValue(unit, v.value)}${v.breach ? " ▲" : ""}`).join(", ") || "–"}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {a.events.length > 0 && (
        <ol className="transitions" aria-label="Transitions">
          {a.events.map((ev) => (
            <li key={ev.id || `${ev.kind}${ev.atMs}`}>
              {when(ev.atMs)} {ev.kind}
            </li>
          ))}
        </ol>
      )}
      {e.dashboardPath && (
        <p>
          <a href={withCustomRange(e.dashboardPath)} onClick={follow}>
            Open the dashboard view
          </a>
        </p>
      )}
    </div>
  );
}

function AlertItem({ a, open, onSilence }: { a: AlertVM; open: boolean; onSilence?: (a: AlertVM) => void }) {
  const [shown, setShown] = useState(open);
  return (
    <li id={`alert-${a.id}`} className={`alert-item ${a.state}`}>
      <details open={open} onToggle={(e) => setShown(e.currentTarget.open)}>
        <summary>
          <SeverityBadge severity={a.severity} /> <strong>{a.ruleName}</strong> <span className="muted">{a.series.map((s) => s.name).join(", ")}</span>{" "}
          <span className={`badge ${a.state === "firing" ? "bad" : "ok"}`}>{a.state}</span>{" "}
          <span className="muted">
            since {when(a.startedMs)}
            {a.resolvedMs ? `, resolved ${when(a.resolvedMs)}` : ""}
          </span>
        </summary>
        {shown && <AlertEvidence alert={a} />}
      </details>
      {onSilence && a.state === "firing" && (
        <button type="button" onClick={() => onSilence(a)} aria-label={`Silence ${a.ruleName}`}>
          Silence
        </button>
      )}
    </li>
  );
}

export function AlertList({ alerts, label, openId, onSilence }: { alerts: AlertVM[]; label: string; openId?: string | null; onSilence?: (a: AlertVM) => void }) {
  return (
    <ul className="alert-list" aria-label={label}>
      {alerts.map((a) => (
        <AlertItem key={a.id} a={a} open={openId === a.id} onSilence={onSilence} />
      ))}
    </ul>
  );
}
