import { useMutation } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { adviseTimeout, type TimeoutIn, type TimeoutOut } from "../api/advisors";
import { useAgents } from "../api/agents";
import { topologyLabel, useVocabularies } from "../api/vocabularies";
import { AgentSelect, CheckList, DecidePage, NumberField, RunState } from "../components/decide/Layout";
import { Missing, TermsTable, Verdict, num } from "../components/decide/Terms";
import { LinesChart } from "../components/common/LinesChart";
import { Card, Loading } from "../components/common/State";
import { formatCount, formatMs, formatSpan } from "../lib/format";

type Scope = TimeoutIn["scope"];
type TopologyClass = NonNullable<TimeoutIn["topology_class"]>;

/** Where the asked rate is unmet or unsupported: the best the samples do support, said both
 * ways, and how much data the asked rate needs (or that none helps at the measured loss rate). */
function Support({ out }: { out: TimeoutOut }) {
  if (out.best_probability === null || out.best_probability === undefined) return null;
  const perHour = out.best_false_timeouts_per_hour;
  return (
    <div role="note" aria-label="What the data supports">
      <p>
        The best these samples support: <strong>T = {formatMs(out.best_timeout_ms)}</strong> at {num(perHour)} false timeouts per hour at {num(out.msg_rate_per_s)} messages/s, or at{" "}
        {num(out.false_timeouts_per_hour)} per hour up to {num(out.best_msg_rate_per_s)} messages/s.
      </p>
      <p className="muted">
        {out.samples_needed === null || out.samples_needed === undefined
          ? `No amount of data meets the asked rate while the loss rate stays at ${num((out.losses ?? 0) / Math.max(out.samples ?? 1, 1))}: lost replies exceed every timeout.`
          : `The asked rate needs ${formatCount(out.samples_needed)} samples${out.time_needed_s ? `: about ${formatSpan(out.time_needed_s * 1000)} of data at the rate this scope is measured` : ""}.`}
      </p>
    </div>
  );
}

function Answer({ out }: { out: TimeoutOut }) {
  const ok = out.achievable !== false && out.timeout_ms !== null && out.timeout_ms !== undefined;
  return (
    <Card title="Timeout" note={out.what}>
      <Verdict good={ok ? !out.warning : false}>{ok ? `Timeout T = ${formatMs(out.timeout_ms)}` : "No timeout meets this rate"}</Verdict>
      {out.warning && (
        <p className="state warn" role="alert" aria-label="Sample support warning">
          {out.warning}
        </p>
      )}
      <Support out={out} />
      <TermsTable
        label="Timeout terms"
        terms={[
          { symbol: "p", meaning: "tolerated false timeouts ÷ messages (target P(RTT > T))", value: num(out.target_probability) },
          { symbol: "q", meaning: "quantile of the measured values taken as T (losses count beyond every T)", value: out.quantile === null || out.quantile === undefined ? "–" : String(out.quantile) },
          { symbol: "N", meaning: "samples in the range (with losses)", value: formatCount(out.samples) },
          { symbol: "L", meaning: "losses (no reply within the agent's timeout)", value: formatCount(out.losses) },
          { symbol: "p·N", meaning: "samples expected beyond T (10 or more needed)", value: num(out.tail_samples_expected) },
          { symbol: "N needed", meaning: "samples for 10 beyond T", value: formatCount(out.samples_needed) },
          { symbol: "source", meaning: out.exact ? "raw samples: exact order statistic" : "merged sketches: within 1%", value: out.source.resolution },
        ]}
      />
      <p className="muted">
        For comparison: p50 {formatMs(out.p50_ms)}, p99 {formatMs(out.p99_ms)}, max {formatMs(out.max_ms)}.
      </p>
    </Card>
  );
}

function ByHour({ out }: { out: TimeoutOut }) {
  const rows = out.by_hour.map((h) => ({ x: h.hour, T: h.timeout_ms ?? null }));
  return (
    <Card title="T by hour of day (UTC)" note="the same rate over each hour's samples">
      <LinesChart rows={rows} series={["T"]} xFormat={(v) => `${v}h`} yUnit="ms" xInteger dots />
      <table className="data" aria-label="Timeout by hour">
        <thead>
          <tr>
            <th>hour</th>
            <th>T</th>
            <th>samples</th>
            <th>note</th>
          </tr>
        </thead>
        <tbody>
          {out.by_hour
            .filter((h) => h.samples > 0)
            .map((h) => (
              <tr key={h.hour}>
                <td>{h.hour}</td>
                <td>{formatMs(h.timeout_ms)}</td>
                <td>{formatCount(h.samples)}</td>
                <td>{h.warning ? <span className="badge warn">few samples</span> : ""}</td>
              </tr>
            ))}
        </tbody>
      </table>
    </Card>
  );
}

export default function DecideTimeouts() {
  const agents = useAgents();
  const list = agents.data ?? [];
  const [scope, setScope] = useState<Scope>("topology_class");
  const [src, setSrc] = useState("");
  const [dst, setDst] = useState("");
  const [group, setGroup] = useState<string[]>([]);
  const [cls, setCls] = useState<TopologyClass>("cross_region");
  const vocab = useVocabularies();
  const [groupName, setGroupName] = useState("");
  const [rate, setRate] = useState("500");
  const [perHour, setPerHour] = useState("1");
  const [days, setDays] = useState("1");
  const run = useMutation({ mutationFn: adviseTimeout });
  const s = src || list[0]?.id || "";
  const d = dst || list[1]?.id || list[0]?.id || "";

  function submit(e: FormEvent) {
    e.preventDefault();
    const end = new Date();
    end.setUTCSeconds(0, 0);
    const start = new Date(end.getTime() - Number(days) * 86_400_000);
    const body: TimeoutIn = { scope, msg_rate_per_s: Number(rate), false_timeouts_per_hour: Number(perHour), start: start.toISOString(), end: end.toISOString() };
    if (scope === "pair") Object.assign(body, { src: s, dst: d });
    if (scope === "group") body.agents = group;
    if (scope === "topology_class") body.topology_class = cls;
    if (scope === "quorum") Object.assign(body, { group_name: groupName, src: src || null });
    run.mutate(body);
  }
  const out = run.data;
  return (
    <DecidePage title="timeouts" current="/decide/timeouts">
      <Card title="Which timeout gives fewer false timeouts than you tolerate?" note="seed 003 §1: T with P(RTT > T) ≤ tolerated rate ÷ message rate, from the measured distribution">
        {agents.isPending ? (
          <Loading />
        ) : (
          <form onSubmit={submit} aria-label="Timeout inputs">
            <div className="field-row">
              <label>
                Timeout for
                <select value={scope} onChange={(e) => setScope(e.target.value as Scope)}>
                  <option value="pair">a pair</option>
                  <option value="group">a group of agents</option>
                  <option value="topology_class">a topology class</option>
                  <option value="quorum">a quorum</option>
                </select>
              </label>
              {scope === "pair" && (
                <>
                  <AgentSelect label="From" agents={list} value={s} onChange={setSrc} />
                  <AgentSelect label="To" agents={list} value={d} onChange={setDst} />
                </>
              )}
              {scope === "topology_class" && (
                <label>
                  Topology class
                  <select value={cls} onChange={(e) => setCls(e.target.value as TopologyClass)}>
                    {(vocab.data?.topology_classes ?? [cls]).map((c) => (
                      <option key={c} value={c}>
                        {topologyLabel(c)}
                      </option>
                    ))}
                  </select>
                </label>
              )}
              {scope === "quorum" && (
                <>
                  <label>
                    Group name
                    <input required value={groupName} onChange={(e) => setGroupName(e.target.value)} placeholder="zone-majority" />
                  </label>
                  <AgentSelect label="At agent (optional)" agents={list} value={src} onChange={setSrc} anyLabel="every member" />
                </>
              )}
              <NumberField label="Messages per second" value={rate} onChange={setRate} />
              <NumberField label="Tolerated false timeouts per hour" value={perHour} onChange={setPerHour} />
              <label>
                Range
                <select value={days} onChange={(e) => setDays(e.target.value)}>
                  <option value="1">last day</option>
                  <option value="7">last 7 days</option>
                  <option value="30">last 30 days</option>
                </select>
              </label>
              <button type="submit" className="primary" disabled={run.isPending}>
                Find T
              </button>
            </div>
            {scope === "group" && (
              <CheckList legend="Agents (every link among them)" options={list.map((a) => ({ value: a.id, label: a.name }))} checked={group} onToggle={(id) => setGroup(group.includes(id) ? group.filter((x) => x !== id) : [...group, id])} />
            )}
          </form>
        )}
        <RunState pending={run.isPending} error={run.error} />
        {out && <Missing items={out.missing ?? []} />}
      </Card>
      {out?.status === "ok" && (
        <div className="grid2">
          <Answer out={out} />
          <ByHour out={out} />
        </div>
      )}
    </DecidePage>
  );
}
