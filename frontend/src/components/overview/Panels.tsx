import { useQuery } from "@tanstack/react-query";
import type { ReactNode } from "react";
import { listAlerts } from "../../api/alerts";
import { useAgents } from "../../api/agents";
import { getHeatmap, getStorageComparison } from "../../api/analytics";
import type { AgentVM } from "../../api/models";
import { getFleetShifts } from "../../api/overview";
import { getDegradations } from "../../api/throughput";
import { formatAgo, formatBitsPerS, formatCount, formatPercent, formatUs } from "../../lib/format";
import { linkTo } from "../../lib/router";
import { isWeak, supportNote } from "../../lib/support";
import { follow } from "../common/Link";
import { Card } from "../common/State";

const H = 3_600_000;
const TOP = 5;

/** "10-second", "5-minute", "1-hour": a window as an adjective. */
function formatWindow(s: number): string {
  if (s < 60) return `${s}-second`;
  if (s < 3600) return `${s / 60}-minute`;
  return `${s / 3600}-hour`;
}

function Panel({ title, note, href, more, state, children }: { title: string; note: string; href: string; more: string; state: { isPending: boolean; error: Error | null }; children: ReactNode }) {
  return (
    <Card
      title={title}
      note={note}
      label={title}
      actions={
        <a href={href} onClick={follow}>
          {more}
        </a>
      }
    >
      {state.isPending ? <p className="muted">Loading…</p> : state.error ? <p className="state error">{state.error.message}</p> : children}
    </Card>
  );
}

function None({ children }: { children: ReactNode }) {
  return <p className="muted">{children}</p>;
}

const pairLink = (a: AgentVM | undefined, b: AgentVM | undefined, src: string, dst: string) =>
  linkTo("/pair", { level: "node", src, dst, srcLabel: a?.name ?? src, dstLabel: b?.name ?? dst });

/** Beside the heatmap, what a first look needs: what is firing, silent agents, the largest level
 * shifts of the last 24 h, the worst tails with their support, storage failures and throughput
 * drops, each linking to its page. Every panel reads an existing API on its own, so a slow one
 * never holds up the others. */
export function OverviewPanels({ nowMs }: { nowMs: number }) {
  const agents = useAgents();
  const firing = useQuery({ queryKey: ["alerts", "firing"], queryFn: ({ signal }) => listAlerts({ state: "firing" }, signal), refetchInterval: 15_000 });
  const day = { fromMs: nowMs - 24 * H, toMs: nowMs };
  const shifts = useQuery({ queryKey: ["overview", "shifts", nowMs], queryFn: ({ signal }) => getFleetShifts(day, signal), staleTime: 300_000 });
  const tails = useQuery({ queryKey: ["overview", "tails", nowMs], queryFn: ({ signal }) => getHeatmap({ fromMs: nowMs - H, toMs: nowMs, level: "node", stat: "p99_99" }, signal) });
  const storage = useQuery({ queryKey: ["overview", "storage", nowMs], queryFn: ({ signal }) => getStorageComparison(day, signal) });
  const drops = useQuery({ queryKey: ["overview", "drops", nowMs], queryFn: ({ signal }) => getDegradations({ fromMs: nowMs - 7 * 24 * H, toMs: nowMs }, signal) });
  const byId = new Map((agents.data ?? []).map((a) => [a.id, a]));
  const name = (id: string) => byId.get(id)?.name ?? shifts.data?.names[id] ?? id;

  const silent = (agents.data ?? []).filter((a) => a.status !== "online");
  const worst = (tails.data?.cells ?? [])
    .filter((c) => c.src !== c.dst && c.value !== null)
    .sort((a, b) => (b.value ?? 0) - (a.value ?? 0))
    .slice(0, TOP);
  const failing = Object.values(
    (storage.data ?? []).reduce<Record<string, { target: string; op: string; failures: number; count: number }>>((acc, r) => {
      const k = `${r.target}|${r.op}`;
      const x = (acc[k] ??= { target: r.target, op: r.op, failures: 0, count: 0 });
      x.failures += r.failures;
      x.count += r.count;
      return acc;
    }, {}),
  )
    .filter((x) => x.failures > 0)
    .sort((a, b) => b.failures / Math.max(b.count, 1) - a.failures / Math.max(a.count, 1));

  return (
    <div className="grid2 overview-panels">
      <Panel title="Firing now" note="alerts open at this moment" href={linkTo("/alerts")} more="All alerts" state={firing}>
        {firing.data && firing.data.length === 0 && <None>Nothing is firing.</None>}
        <ul className="plain" aria-label="Firing alerts">
          {(firing.data ?? []).map((a) => (
            <li key={a.id}>
              <span className={`badge ${a.severity === "critical" ? "bad" : "warn"}`}>{a.severity}</span> <strong>{a.ruleName}</strong>, since {formatAgo(a.startedMs, nowMs)}
              {a.series.length > 0 && <span className="muted"> · {a.series.map((s) => s.name).join(", ")}</span>}
            </li>
          ))}
        </ul>
      </Panel>
      <Panel title="Silent agents" note="not heard from in the last 2 minutes" href={linkTo("/fleet")} more="Fleet" state={agents}>
        {agents.data && silent.length === 0 && <None>Every agent is reporting.</None>}
        <ul className="plain" aria-label="Silent agents">
          {silent.map((a) => (
            <li key={a.id}>
              <strong>{a.name}</strong> <span className="muted">{a.last_seen_ms ? `last heard ${formatAgo(a.last_seen_ms, nowMs)}` : "never heard from"}</span>
            </li>
          ))}
        </ul>
      </Panel>
      <Panel title="Largest level shifts" note={`last 24 h, each pair's ${shifts.data ? formatWindow(shifts.data.windowS) : ""} medians`} href={linkTo("/distributions")} more="Distributions" state={shifts}>
        {shifts.data && shifts.data.shifts.length === 0 && <None>No pair changed level.</None>}
        <ul className="plain" aria-label="Largest level shifts">
          {(shifts.data?.shifts ?? []).slice(0, TOP).map((s) => (
            <li key={`${s.src}|${s.dst}|${s.atMs}`}>
              <a href={pairLink(byId.get(s.src), byId.get(s.dst), s.src, s.dst)} onClick={follow}>
                {name(s.src)} → {name(s.dst)}
              </a>{" "}
              {s.stepUs > 0 ? "+" : "−"}
              {formatUs(Math.abs(s.stepUs))} ({formatUs(s.beforeUs)} → {formatUs(s.afterUs)}), {formatAgo(s.atMs, nowMs)}
            </li>
          ))}
        </ul>
      </Panel>
      <Panel title="Worst tails" note="p99.99 of each pair over the last hour, with the samples beyond it" href={linkTo("/overview", { level: "node", stat: "p99_99" })} more="Node heatmap" state={tails}>
        {tails.data && worst.length === 0 && <None>No mesh samples in the last hour.</None>}
        <ul className="plain" aria-label="Worst tails">
          {worst.map((c) => (
            <li key={`${c.src}|${c.dst}`}>
              <a href={pairLink(byId.get(c.src), byId.get(c.dst), c.src, c.dst)} onClick={follow}>
                {name(c.src)} → {name(c.dst)}
              </a>{" "}
              {formatUs(c.value)} <span className={isWeak(c.beyond) ? "badge warn" : "muted"}>{supportNote(c.beyond) || `${formatCount(c.count)} samples`}</span>
            </li>
          ))}
        </ul>
      </Panel>
      <Panel title="Storage failures" note="failed operations per target, last 24 h" href={linkTo("/storage")} more="Storage" state={storage}>
        {storage.data && failing.length === 0 && <None>No failed storage operation.</None>}
        <ul className="plain" aria-label="Storage failures">
          {failing.slice(0, TOP).map((f) => (
            <li key={`${f.target}|${f.op}`}>
              <strong>{f.target}</strong> {f.op.toUpperCase()}: {f.failures} of {f.count} failed ({formatPercent(f.failures / Math.max(f.count, 1))})
            </li>
          ))}
        </ul>
      </Panel>
      <Panel title="Throughput drops" note="hours below the pair's norm, last 7 days" href={linkTo("/throughput")} more="Throughput" state={drops}>
        {drops.data && drops.data.length === 0 && <None>No throughput drop.</None>}
        <ul className="plain" aria-label="Throughput drops">
          {(drops.data ?? []).slice(0, TOP).map((d) => (
            <li key={`${d.srcName}|${d.dstName}|${d.proto}|${d.startMs}`}>
              <strong>
                {d.srcName} → {d.dstName}
              </strong>{" "}
              {d.proto.toUpperCase()} {formatBitsPerS(d.levelBps)} against {formatBitsPerS(d.normBps)}, {formatAgo(d.startMs, nowMs)}
            </li>
          ))}
        </ul>
      </Panel>
    </div>
  );
}
