import { useMutation, useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { createChannel, deleteChannel, listChannels, listDeliveries, testChannel, type ChannelCreate, type ChannelType, type ChannelVM, type TestSendVM } from "../../api/channels";
import { fieldErrors } from "../../api/http";
import { DeleteButton } from "./shared";
import { useListMutation } from "../../lib/useListMutation";
import { AdminOnly } from "../common/AdminOnly";
import { formatInstant } from "../../lib/format";

const when = (ms: number) => (ms ? formatInstant(ms) : "–");

/** The body for each channel type; secrets are write-only and never shown back. */
function bodyFor(kind: ChannelType, name: string, v: Record<string, string>): ChannelCreate {
  if (kind === "email") {
    const security = v.security === "tls" || v.security === "none" ? v.security : "starttls";
    return {
      kind,
      name,
      enabled: true,
      config: {
        host: v.host ?? "",
        port: Number(v.port || (security === "tls" ? 465 : 587)),
        security,
        username: v.username || null,
        password: v.password || null,
        from_address: v.from_address ?? "",
        to_addresses: (v.to_addresses ?? "")
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
      },
    };
  }
  return kind === "slack" ? { kind, name, enabled: true, config: { url: v.url ?? "" } } : { kind, name, enabled: true, config: { url: v.url ?? "" } };
}

function ChannelForm() {
  const [type, setType] = useState<ChannelType>("slack");
  const [name, setName] = useState("");
  const [v, setV] = useState<Record<string, string>>({});
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  const m = useListMutation(
    () => createChannel(bodyFor(type, name, v)),
    "channels",
    (r) => {
      setSecret(r.secret ? { name: r.channel.name, secret: r.secret } : null);
      setName("");
      setV({});
    },
  );
  const errs = fieldErrors(m.error);
  const fieldErr = (k: string) => errs[`config.${k}`] ?? errs[k];
  const input = (k: string, label: string, extra: Record<string, unknown> = {}) => (
    <label key={k}>
      {label}
      <input value={v[k] ?? ""} onChange={(e) => setV({ ...v, [k]: e.target.value })} aria-invalid={fieldErr(k) ? true : undefined} {...extra} />
      {fieldErr(k) && (
        <span className="field-error" role="alert">
          {fieldErr(k)}
        </span>
      )}
    </label>
  );
  function submit(e: FormEvent) {
    e.preventDefault();
    setSecret(null);
    m.mutate();
  }
  const other = Object.entries(errs).filter(([k]) => !k.startsWith("config.") && !["url", "host", "port", "from_address", "to_addresses", "username", "password", "security"].includes(k));
  return (
    <>
      <form className="field-row" aria-label="New channel" onSubmit={submit}>
        <label>
          Type
          <select value={type} onChange={(e) => setType(e.target.value as ChannelType)}>
            <option value="slack">Slack</option>
            <option value="email">Email</option>
            <option value="webhook">Webhook</option>
          </select>
        </label>
        <label>
          Channel name
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        {type === "email" ? (
          <>
            {input("host", "SMTP host", { required: true })}
            {input("port", "Port", { type: "number", placeholder: "587" })}
            <label>
              Security
              <select value={v.security ?? "starttls"} onChange={(e) => setV({ ...v, security: e.target.value })}>
                <option value="starttls">STARTTLS</option>
                <option value="tls">TLS</option>
                <option value="none">none</option>
              </select>
            </label>
            {input("username", "Username", { autoComplete: "off" })}
            {input("password", "Password", { type: "password", autoComplete: "new-password" })}
            {input("from_address", "From", { type: "email", required: true })}
            {input("to_addresses", "To (comma-separated)", { required: true })}
          </>
        ) : (
          input("url", type === "slack" ? "Slack webhook URL" : "Webhook URL", { type: "url", required: true, size: 40 })
        )}
        <button type="submit" className="primary" disabled={m.isPending}>
          Add channel
        </button>
      </form>
      {(other.length > 0 || (m.error && Object.keys(errs).length === 0)) && (
        <div className="state error" role="alert">
          {other.length ? other.map(([k, msg]) => <p key={k}>{`${k}: ${msg}`}</p>) : <p>{m.error?.message}</p>}
        </div>
      )}
      {secret && (
        <div role="status">
          <p>
            Signing secret of <strong>{secret.name}</strong> — shown once; receivers verify the webhook-signature header with it:
          </p>
          <pre aria-label="Webhook signing secret">{secret.secret}</pre>
          <button type="button" onClick={() => setSecret(null)}>
            I have copied it
          </button>
        </div>
      )}
    </>
  );
}

function describe(c: ChannelVM): string {
  const cfg = c.config;
  if (c.type === "email") return `${String(cfg.host ?? "")} → ${Array.isArray(cfg.to_addresses) ? cfg.to_addresses.join(", ") : String(cfg.to_addresses ?? "")}`;
  // Slack URLs are the secret and never come back; the server shows a host at most.
  return String(cfg.url ?? cfg.url_host ?? cfg.host ?? "");
}

export function Deliveries({ channelId, alertId }: { channelId?: string; alertId?: string }) {
  const q = useQuery({ queryKey: ["deliveries", channelId ?? "", alertId ?? ""], queryFn: ({ signal }) => listDeliveries({ channelId, alertId }, signal), refetchInterval: 15_000 });
  if (q.error) return <p className="state error">{q.error.message}</p>;
  if (!q.data) return <p className="muted">Loading deliveries…</p>;
  if (q.data.length === 0) return <p className="muted">Nothing delivered yet.</p>;
  return (
    <table className="data" aria-label="Delivery log">
      <thead>
        <tr>
          <th>time</th>
          <th>channel</th>
          <th>message</th>
          <th>status</th>
          <th>attempts</th>
          <th>reply / error</th>
        </tr>
      </thead>
      <tbody>
        {q.data.map((d) => (
          <tr key={d.id}>
            <td>{when(d.atMs)}</td>
            <td>{d.channelName || d.channelId}</td>
            <td>
              {d.kind} {d.ruleName}
            </td>
            <td>
              <span className={`badge ${d.status === "sent" || d.status === "delivered" ? "ok" : d.status === "failed" ? "bad" : "warn"}`}>{d.status}</span>
            </td>
            <td>{d.attempts}</td>
            <td style={{ whiteSpace: "normal", textAlign: "left" }}>{d.error ?? d.response ?? ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Channels() {
  const q = useQuery({ queryKey: ["channels"], queryFn: ({ signal }) => listChannels(signal) });
  const [results, setResults] = useState<Record<string, TestSendVM>>({});
  const [logFor, setLogFor] = useState<string>("");
  const test = useMutation({ mutationFn: (id: string) => testChannel(id), onSuccess: (r, id) => setResults((x) => ({ ...x, [id]: r })) });
  const del = useListMutation(deleteChannel, "channels");
  return (
    <>
      <AdminOnly what="Adding a channel">
        <ChannelForm />
      </AdminOnly>
      {q.error && <p className="state error">{q.error.message}</p>}
      {q.data && q.data.length === 0 && <p className="muted">No channels yet.</p>}
      {q.data && q.data.length > 0 && (
        <table className="data" aria-label="Channels">
          <thead>
            <tr>
              <th>name</th>
              <th>type</th>
              <th>destination</th>
              <th>last test</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {q.data.map((c) => {
              const r = results[c.id];
              return (
                <tr key={c.id}>
                  <td>{c.name}</td>
                  <td>{c.type}</td>
                  <td>{describe(c)}</td>
                  <td style={{ whiteSpace: "normal", textAlign: "left", maxWidth: 420 }}>
                    {r && (
                      <div role="status" aria-label={`Test send to ${c.name}`}>
                        <span className={`badge ${r.ok ? "ok" : "bad"}`}>{r.ok ? "sent" : "failed"}</span>
                        <pre className="reply">{r.detail}</pre>
                      </div>
                    )}
                  </td>
                  <td>
                    <span className="toolbar">
                      <button type="button" onClick={() => test.mutate(c.id)} disabled={test.isPending && test.variables === c.id} aria-label={`Test send to ${c.name}`}>
                        Test send
                      </button>
                      <button type="button" onClick={() => setLogFor(logFor === c.id ? "" : c.id)} aria-pressed={logFor === c.id} aria-label={`Delivery log of ${c.name}`}>
                        Log
                      </button>
                      <DeleteButton label={`Delete channel ${c.name}`} confirm={`Delete the channel "${c.name}"?`} onDelete={() => del.mutate(c.id)} />
                    </span>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {test.error && <p className="state error">{test.error.message}</p>}
      <h3 style={{ fontSize: 14 }}>Delivery log{logFor ? ` — ${q.data?.find((c) => c.id === logFor)?.name ?? ""}` : " — all channels"}</h3>
      <Deliveries channelId={logFor || undefined} />
    </>
  );
}
