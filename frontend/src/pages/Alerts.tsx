import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { deleteRule, listRules, type RuleVM } from "../api/alertRules";
import { listAlerts, type AlertVM } from "../api/alerts";
import { AlertList, SeverityBadge } from "../components/alerts/AlertList";
import { Channels } from "../components/alerts/Channels";
import { MaintenanceWindows, SilenceForm, Silences } from "../components/alerts/Silences";
import { DeleteButton } from "../components/alerts/shared";
import { follow } from "../components/common/Link";
import { Card } from "../components/common/State";
import { linkTo, useParams } from "../lib/router";
import { useListMutation } from "../lib/useListMutation";
import { useIsAdmin } from "../lib/role";

const TABS = [
  ["alerts", "Alerts"],
  ["rules", "Rules"],
  ["silences", "Silences & maintenance"],
  ["channels", "Channels & deliveries"],
] as const;
type Tab = (typeof TABS)[number][0];

// Firing alerts change within seconds of a spike: poll while the page is open.
const POLL_MS = 10_000;

function Rules({ rules }: { rules: RuleVM[] }) {
  const del = useListMutation(deleteRule, "alert-rules");
  if (rules.length === 0) return <p className="muted">No rules yet.</p>;
  return (
    <table className="data" aria-label="Alert rules">
      <thead>
        <tr>
          <th>name</th>
          <th>metric</th>
          <th>window</th>
          <th>X of Y</th>
          <th>N of M</th>
          <th>severity</th>
          <th>state</th>
          <th />
        </tr>
      </thead>
      <tbody>
        {rules.map((r) => (
          <tr key={r.id}>
            <td>
              <a href={linkTo("/alerts/rule", { id: r.id })} onClick={follow}>
                {r.name}
              </a>
            </td>
            <td>
              {r.metric} {r.statistic}
            </td>
            <td>{r.window_s < 60 ? `${r.window_s} s` : `${r.window_s / 60} min`}</td>
            <td>
              {r.x}/{r.y}
            </td>
            <td>
              {r.n}/{r.m}
            </td>
            <td>
              <SeverityBadge severity={r.severity} />
            </td>
            <td>
              {r.firing > 0 ? <span className="badge bad">{r.firing} firing</span> : r.enabled ? "enabled" : <span className="muted">disabled</span>}
            </td>
            <td>
              <DeleteButton label={`Delete rule ${r.name}`} confirm={`Delete the rule "${r.name}"?`} onDelete={() => del.mutate(r.id)} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export default function Alerts() {
  const admin = useIsAdmin();
  const [params, set] = useParams();
  const tab: Tab = (TABS.map((t) => t[0]) as string[]).includes(params.get("tab") ?? "") ? (params.get("tab") as Tab) : "alerts";
  const openId = params.get("alert");
  const rules = useQuery({ queryKey: ["alert-rules"], queryFn: ({ signal }) => listRules(signal) });
  const firing = useQuery({ queryKey: ["alerts", "firing"], queryFn: ({ signal }) => listAlerts({ state: "firing" }, signal), refetchInterval: POLL_MS });
  const history = useQuery({ queryKey: ["alerts", "history"], queryFn: ({ signal }) => listAlerts({ limit: 100 }, signal), refetchInterval: POLL_MS, enabled: tab === "alerts" });
  const [silencing, setSilencing] = useState<AlertVM | null>(null);

  return (
    <>
      <div className="page-head">
        <h1>Alerts</h1>
        <span className="toolbar">
          <span className="group" role="group" aria-label="Section">
            {TABS.map(([t, label]) => (
              <button key={t} type="button" aria-pressed={t === tab} onClick={() => set({ tab: t === "alerts" ? null : t, alert: null })}>
                {label}
              </button>
            ))}
          </span>
          {admin && (
            <a className="button primary" href={linkTo("/alerts/rule")} onClick={follow}>
              New rule
            </a>
          )}
        </span>
      </div>

      {tab === "alerts" && (
        <>
          <Card title="Firing now" note={firing.data ? `${firing.data.length} alert${firing.data.length === 1 ? "" : "s"}` : undefined}>
            {firing.error && <p className="state error">{firing.error.message}</p>}
            {firing.data?.length === 0 && <p className="muted">Nothing is firing.</p>}
            {firing.data && firing.data.length > 0 && <AlertList alerts={firing.data} label="Firing alerts" openId={openId} onSilence={admin ? setSilencing : undefined} />}
            {silencing && (
              <div className="silence-inline">
                <h3 style={{ fontSize: 14 }}>Silence {silencing.ruleName}</h3>
                <SilenceForm rules={rules.data ?? []} presetRuleId={silencing.ruleId} onDone={() => setSilencing(null)} />
              </div>
            )}
          </Card>
          <Card title="Recent history" note="firing episodes with their evidence and transitions">
            {history.error && <p className="state error">{history.error.message}</p>}
            {history.data?.length === 0 && <p className="muted">No alerts yet.</p>}
            {history.data && history.data.length > 0 && <AlertList alerts={history.data} label="Alert history" openId={openId} />}
          </Card>
        </>
      )}
      {tab === "rules" && (
        <Card title="Rules">
          {rules.error && <p className="state error">{rules.error.message}</p>}
          {rules.data && <Rules rules={rules.data} />}
        </Card>
      )}
      {tab === "silences" && (
        <>
          <Card title="Silences" note="nothing is sent for matching alerts until the end time">
            <Silences rules={rules.data ?? []} />
          </Card>
          <Card title="Maintenance windows" note="one-off or recurring (RRULE); alerts in scope stay quiet inside them">
            <MaintenanceWindows rules={rules.data ?? []} />
          </Card>
        </>
      )}
      {tab === "channels" && (
        <Card title="Channels" note="email, chat, incident tools, Alertmanager and signed webhooks">
          <Channels />
        </Card>
      )}
    </>
  );
}
