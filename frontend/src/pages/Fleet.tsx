import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { agentsQuery, createEnrollmentToken, useAgents, listEnrollmentTokens, revokeEnrollmentToken, type EnrollmentToken } from "../api/agents";
import type { AgentVM } from "../api/models";
import { Async, Card } from "../components/common/State";
import { formatAgo, formatInstant } from "../lib/format";
import { AdminOnly } from "../components/common/AdminOnly";

const STATUS_CLASS: Record<string, string> = { online: "ok", stale: "warn", never_seen: "bad" };

/** The command an operator runs on a VM to enroll it; the token is the only secret in it. */
export function enrollmentCommand(origin: string, token: string): string {
  return [
    `export STORMWATCH_API_URL=${origin}`,
    `export STORMWATCH_ENROLLMENT_TOKEN=${token}`,
    `stormwatch-agent run --name "$(hostname)"`,
  ].join("\n");
}

function AgentTable({ agents }: { agents: AgentVM[] }) {
  const now = Date.now();
  return (
    <div className="scroll-x">
      <table className="data" aria-label="Agents">
        <thead>
          <tr>
            <th>name</th>
            <th>status</th>
            <th>last seen</th>
            <th>version</th>
            <th>provider</th>
            <th>region</th>
            <th>zone</th>
            <th>subnet</th>
            <th>instance</th>
            <th>private IP</th>
            <th>mesh address</th>
          </tr>
        </thead>
        <tbody>
          {agents.map((a) => (
            <tr key={a.id}>
              <td>{a.name}</td>
              <td>
                <span className={`badge ${STATUS_CLASS[a.status] ?? ""}`}>{a.status.replace("_", " ")}</span>
              </td>
              <td title={a.last_seen_ms ? formatInstant(a.last_seen_ms) : undefined}>{a.last_seen_ms ? formatAgo(a.last_seen_ms, now) : "never"}</td>
              <td>{a.version || "–"}</td>
              <td>{a.provider || "–"}</td>
              <td>{a.region || "–"}</td>
              <td>{a.zone || "–"}</td>
              <td>{a.subnet || "–"}</td>
              <td>{String(a.metadata.instance_type || "–")}</td>
              <td>{String(a.metadata.private_ip || "–")}</td>
              <td>{String(a.metadata.mesh_address || "–")}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function AddAgent({ onChange }: { onChange: () => void }) {
  const [name, setName] = useState("");
  const [created, setCreated] = useState<{ token: string; name: string }>();
  const [error, setError] = useState<string>();
  const qc = useQueryClient();
  const tokens = useQuery({ queryKey: ["enrollment-tokens"], queryFn: ({ signal }) => listEnrollmentTokens(signal) });
  const refetchTokens = () => void qc.invalidateQueries({ queryKey: ["enrollment-tokens"] });

  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      const t = await createEnrollmentToken(name || "enrollment");
      setCreated({ token: t.token, name: t.name });
      setName("");
      refetchTokens();
      onChange();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  }

  return (
    <Card title="Add agent" note="create an enrollment token, then run the command on each VM">
      <form className="field-row" onSubmit={submit}>
        <label>
          Token name
          <input value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. aws-prod" maxLength={200} />
        </label>
        <button type="submit" className="primary">
          Create enrollment token
        </button>
      </form>
      {error && (
        <p className="state error" role="alert">
          {error}
        </p>
      )}
      {created && (
        <div role="status">
          <p>
            Token <strong>{created.name}</strong> — shown once, copy it now:
          </p>
          <pre aria-label="Enrollment command">{enrollmentCommand(window.location.origin, created.token)}</pre>
          <button type="button" onClick={() => void navigator.clipboard?.writeText(enrollmentCommand(window.location.origin, created.token))}>
            Copy command
          </button>
        </div>
      )}
      <h3 style={{ fontSize: 14 }}>Enrollment tokens</h3>
      <Async state={tokens} isEmpty={(d) => d.length === 0} empty="No enrollment tokens yet.">
        {(list) => <TokenTable tokens={list} onRevoke={async (id) => { await revokeEnrollmentToken(id); refetchTokens(); }} />}
      </Async>
    </Card>
  );
}

function TokenTable({ tokens, onRevoke }: { tokens: EnrollmentToken[]; onRevoke: (id: string) => Promise<void> }) {
  return (
    <table className="data" aria-label="Enrollment tokens">
      <thead>
        <tr>
          <th>name</th>
          <th>prefix</th>
          <th>created</th>
          <th>expires</th>
          <th>state</th>
          <th />
        </tr>
      </thead>
      <tbody>
        {tokens.map((t) => (
          <tr key={t.id}>
            <td>{t.name}</td>
            <td>
              <code>{t.prefix}</code>
            </td>
            <td>{formatInstant(t.created_at, "minute")}</td>
            <td>{t.expires_at ? formatInstant(t.expires_at, "minute") : "never"}</td>
            <td>{t.revoked_at ? <span className="badge bad">revoked</span> : <span className="badge ok">active</span>}</td>
            <td>
              {!t.revoked_at && (
                <button type="button" className="danger" onClick={() => void onRevoke(t.id)} aria-label={`Revoke enrollment token ${t.name}`}>
                  Revoke
                </button>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export default function Fleet() {
  const qc = useQueryClient();
  const agents = useAgents({ refetchInterval: 30_000 });
  const counts = (agents.data ?? []).reduce<Record<string, number>>((m, a) => ({ ...m, [a.status]: (m[a.status] ?? 0) + 1 }), {});
  return (
    <>
      <div className="page-head">
        <h1>Fleet</h1>
        <span className="muted">
          {agents.data ? `${agents.data.length} agents · ${counts.online ?? 0} online · ${counts.stale ?? 0} stale · ${counts.never_seen ?? 0} never seen` : ""}
        </span>
      </div>
      <Card title="Agents" note="online = seen in the last 2 minutes">
        <Async state={agents} isEmpty={(d) => d.length === 0} empty="No agents yet: create an enrollment token below and run the command on a VM.">
          {(list) => <AgentTable agents={list} />}
        </Async>
      </Card>
      <AdminOnly what="Adding agents (enrollment tokens)">
        <AddAgent onChange={() => void qc.invalidateQueries({ queryKey: agentsQuery.queryKey })} />
      </AdminOnly>
    </>
  );
}
