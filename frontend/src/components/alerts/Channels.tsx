import { useMutation, useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { createChannel, deleteChannel, listChannels, listDeliveries, testChannel, type ChannelCreate, type ChannelVM, type TestSendVM } from "../../api/channels";
import { useVocabularies, type Vocabularies } from "../../api/vocabularies";
import { fieldErrors } from "../../api/http";
import { DeleteButton } from "./shared";
import { useListMutation } from "../../lib/useListMutation";
import { AdminOnly } from "../common/AdminOnly";
import { formatInstant } from "../../lib/format";

const when = (ms: number) => (ms ? formatInstant(ms) : "–");

type ChannelKindInfo = Vocabularies["channel_kinds"][number];
type ChannelField = ChannelKindInfo["fields"][number];

/** The body for a kind from its form fields (GET /vocabularies): empty optional fields are left
 * to the API's defaults; secrets are write-only and never shown back. */
function bodyFor(kind: ChannelKindInfo, name: string, v: Record<string, string>): ChannelCreate {
  const config: Record<string, unknown> = {};
  for (const f of kind.fields) {
    const raw = (v[f.name] ?? "").trim();
    if (!raw && !f.required) continue;
    if (f.input === "number") config[f.name] = Number(raw);
    else if (f.input === "list")
      config[f.name] = raw
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
    else config[f.name] = raw;
  }
  // The API checks the config per kind and answers a 422 naming the field.
  return { kind: kind.name, name, enabled: true, config } as ChannelCreate;
}

const INPUT_TYPES: Record<string, string> = { url: "url", password: "password", number: "number", email: "email" };

function ChannelForm() {
  const kinds = useVocabularies().data?.channel_kinds ?? [];
  const [typeName, setType] = useState<string>("");
  const kind = kinds.find((k) => k.name === typeName) ?? kinds[0];
  const [name, setName] = useState("");
  const [v, setV] = useState<Record<string, string>>({});
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  const m = useListMutation(
    () => (kind ? createChannel(bodyFor(kind, name, v)) : Promise.reject(new Error("no channel kinds"))),
    "channels",
    (r) => {
      setSecret(r.secret ? { name: r.channel.name, secret: r.secret } : null);
      setName("");
      setV({});
    },
  );
  const errs = fieldErrors(m.error);
  const fieldErr = (k: string) => errs[`config.${k}`] ?? errs[k];
  const input = (f: ChannelField) => {
    const err = fieldErr(f.name);
    const common = { "aria-invalid": err ? true : undefined } as const;
    return (
      <label key={f.name}>
        {f.label}
        {f.input === "select" ? (
          <select value={v[f.name] ?? f.default ?? ""} onChange={(e) => setV({ ...v, [f.name]: e.target.value })} {...common}>
            {f.choices.map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        ) : (
          <input
            value={v[f.name] ?? ""}
            onChange={(e) => setV({ ...v, [f.name]: e.target.value })}
            type={INPUT_TYPES[f.input] ?? "text"}
            required={f.required}
            placeholder={f.default ?? undefined}
            autoComplete={f.secret ? "new-password" : "off"}
            size={f.input === "url" ? 40 : undefined}
            {...common}
          />
        )}
        {err && (
          <span className="field-error" role="alert">
            {err}
          </span>
        )}
      </label>
    );
  };
  function submit(e: FormEvent) {
    e.preventDefault();
    setSecret(null);
    m.mutate();
  }
  const own = new Set(kind?.fields.map((f) => f.name) ?? []);
  const other = Object.entries(errs).filter(([k]) => !k.startsWith("config.") && !own.has(k));
  if (!kind) return <p className="muted">Loading channel kinds…</p>;
  return (
    <>
      <form className="field-row" aria-label="New channel" onSubmit={submit}>
        <label>
          Type
          <select
            value={kind.name}
            onChange={(e) => {
              setType(e.target.value);
              setV({});
            }}
          >
            {kinds.map((k) => (
              <option key={k.name} value={k.name}>
                {k.title}
              </option>
            ))}
          </select>
        </label>
        <label>
          Channel name
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        {kind.fields.map(input)}
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
  // Secret URLs never come back; the server shows their host at most (url_hint).
  return String(cfg.url ?? cfg.url_hint ?? cfg.api_url ?? cfg.events_url ?? cfg.host ?? "");
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
