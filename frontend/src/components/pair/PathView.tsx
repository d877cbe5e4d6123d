import { useMutation, useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { getCurrentPath, getPathChanges, getPathTraces, getTraceDiff, requestTrace, type Hop, type PairRef, type Trace, type TraceDiff } from "../../api/paths";
import { useIsAdmin } from "../../lib/role";
import { formatClock, formatInstant, formatPercent, formatUs } from "../../lib/format";
import { Async, Card } from "../common/State";

const routers = (h: Hop | undefined) => (h ? (h.addrs.length ? h.addrs.join(" / ") : "*") : "");
const rtt = (h: Hop | undefined) => (h && h.rtt_med_us !== null ? formatUs(h.rtt_med_us) : "");
const loss = (h: Hop) => (h.sent ? formatPercent(h.lost / h.sent) : "");

/** The pair's current path, hop by hop. */
function HopsTable({ hops, label }: { hops: Hop[]; label: string }) {
  return (
    <table className="data" aria-label={label}>
      <thead>
        <tr>
          <th>hop</th>
          <th>routers</th>
          <th>RTT min</th>
          <th>median</th>
          <th>max</th>
          <th>loss</th>
        </tr>
      </thead>
      <tbody>
        {hops.map((h) => (
          <tr key={h.ttl}>
            <td>{h.ttl}</td>
            <td>{routers(h)}{h.reached ? " (destination)" : ""}</td>
            <td>{h.rtt_min_us !== null ? formatUs(h.rtt_min_us) : ""}</td>
            <td>{rtt(h)}</td>
            <td>{h.rtt_max_us !== null ? formatUs(h.rtt_max_us) : ""}</td>
            <td>{loss(h)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const traceLabel = (t: Trace) => `${formatInstant(Date.parse(t.started_at), "minute")} (${t.hops.length} hops, ${t.trigger})`;

function diffNote(d: TraceDiff | undefined, failed: boolean): string {
  if (failed) return " could not compare them";
  if (!d) return "";
  if (d.same_path) return " the same path";
  const n = d.differing_ttls.length;
  const added = d.added_rtt_us !== null && d.added_rtt_us !== undefined ? `, ${d.added_rtt_us >= 0 ? "+" : "−"}${formatUs(Math.abs(d.added_rtt_us))} at hop ${d.diff_ttl}` : "";
  return ` ${n} hop${n === 1 ? "" : "s"} differ${n === 1 ? "s" : ""}${added}`;
}

/** Two traces side by side, the hops where their paths differ (the server's diff) marked. */
function Compare({ traces, initial }: { traces: Trace[]; initial: [string, string] }) {
  const [ids, setIds] = useState<[string, string]>(initial);
  const a = traces.find((t) => t.id === ids[0]) ?? traces[1] ?? traces[0]!;
  const b = traces.find((t) => t.id === ids[1]) ?? traces[0]!;
  const diff = useQuery({ queryKey: ["paths", "diff", a.id, b.id], queryFn: ({ signal }) => getTraceDiff(a.id, b.id, signal), staleTime: Infinity });
  const differ = new Set(diff.data?.differing_ttls ?? []);
  const n = Math.max(a.hops.length, b.hops.length);
  const pick = (i: 0 | 1) => (
    <select aria-label={i === 0 ? "Earlier trace" : "Later trace"} value={(i === 0 ? a : b).id} onChange={(e) => setIds(i === 0 ? [e.target.value, b.id] : [a.id, e.target.value])}>
      {traces.map((t) => (
        <option key={t.id} value={t.id}>
          {traceLabel(t)}
        </option>
      ))}
    </select>
  );
  return (
    <div className="stack">
      <p className="toolbar">
        Compare {pick(0)} with {pick(1)}
        <span className="muted">{diffNote(diff.data, diff.isError)}</span>
      </p>
      <table className="data" aria-label="Two traces compared">
        <thead>
          <tr>
            <th>hop</th>
            <th>earlier: routers</th>
            <th>median</th>
            <th>later: routers</th>
            <th>median</th>
          </tr>
        </thead>
        <tbody>
          {Array.from({ length: n }, (_, i) => {
            const d = differ.has(i + 1);
            return (
              <tr key={i} className={d ? "differs" : undefined} aria-label={d ? `hop ${i + 1} differs` : undefined}>
                <td>{i + 1}</td>
                <td>{routers(a.hops[i])}</td>
                <td>{rtt(a.hops[i])}</td>
                <td>{routers(b.hops[i])}</td>
                <td>{rtt(b.hops[i])}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

/** Where the pair's traffic goes: its current path, its path changes in the range, and any two
 * of its traces compared (docs/paths.md). */
export function PathView({ pair, rangeKey, refetchInterval }: { pair: () => PairRef; rangeKey: string; refetchInterval: number | false }) {
  const { src, dst } = pair();
  // The range's key, not its instants: a relative range moves on every render.
  const key = ["paths", src, dst, rangeKey] as const;
  const current = useQuery({ queryKey: [...key, "current"], queryFn: ({ signal }) => getCurrentPath(src, dst, signal), refetchInterval });
  const changes = useQuery({ queryKey: [...key, "changes"], queryFn: ({ signal }) => getPathChanges(pair(), signal), refetchInterval });
  const traces = useQuery({ queryKey: [...key, "traces"], queryFn: ({ signal }) => getPathTraces(pair(), signal), refetchInterval });
  const admin = useIsAdmin();
  const ask = useMutation({ mutationFn: () => requestTrace(src, dst) });
  const last = changes.data?.at(-1);
  // By default the traces either side of the range's last path change, else the two newest.
  const initial = (ts: Trace[]): [string, string] => {
    if (last) {
      const after = [...ts].reverse().find((t) => t.path_id === last.to_path.id);
      const before = ts.find((t) => t.path_id === last.from_path.id);
      if (after && before) return [before.id, after.id];
    }
    return [ts[1]?.id ?? ts[0]!.id, ts[0]!.id];
  };
  return (
    <Card
      title="Path"
      note="hop by hop, from the agent's traces; changes of route in this range"
      actions={
        admin ? (
          <span className="toolbar">
            <button type="button" onClick={() => ask.mutate()} disabled={ask.isPending}>
              Trace now
            </button>
            {ask.isSuccess && <span role="status">Asked: the agent traces at its next config poll (within 30 s).</span>}
            {ask.error && <span role="alert">{ask.error.message}</span>}
          </span>
        ) : undefined
      }
    >
      <Async state={current} isEmpty={(p) => !p} empty="No trace of this pair yet: agents trace each peer every path_trace_interval_s (Settings).">
        {(p) => (
          <>
            <p className="muted">
              Current path since {formatInstant(Date.parse(p!.first_seen), "minute")}, {p!.traces} trace{p!.traces > 1 ? "s" : ""}, last at {formatClock(Date.parse(p!.last_seen), "minute")}
              {p!.reached ? "" : "; the destination did not answer"}.
            </p>
            <HopsTable hops={p!.hops} label="Current path" />
          </>
        )}
      </Async>
      {changes.data && changes.data.length > 0 && (
        <ul aria-label="Path changes">
          {changes.data.map((c) => (
            <li key={c.to_path.id}>
              {formatInstant(Date.parse(c.at), "minute")}: the path changed from hop {c.diff_ttl}
              {c.parting_after.length ? ` (after ${c.parting_after.join(" / ")})` : ""}
              {c.added_rtt_us !== null ? `, ${c.added_rtt_us >= 0 ? "+" : "−"}${formatUs(Math.abs(c.added_rtt_us))} there` : ""}
            </li>
          ))}
        </ul>
      )}
      {traces.data && traces.data.length > 1 && <Compare key={`${key.join("|")}|${last?.to_path.id ?? ""}`} traces={traces.data} initial={initial(traces.data)} />}
    </Card>
  );
}
