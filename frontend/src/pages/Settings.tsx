import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { createApiKey, createUser, deleteUser, listApiKeys, listUsers, revokeApiKey } from "../api/accounts";
import { AdminOnly } from "../components/common/AdminOnly";
import { Invitations } from "../components/settings/Invitations";
import { AuditLog } from "../components/settings/AuditLog";
import { Measurement } from "../components/settings/Measurement";
import { OtlpExport } from "../components/settings/OtlpExport";
import { SingleSignOn } from "../components/settings/SingleSignOn";
import { StorageTargets } from "../components/settings/StorageTargets";
import { Async, Card } from "../components/common/State";
import { useIsAdmin } from "../lib/role";
import { formatInstant } from "../lib/format";

function ApiKeys() {
  const admin = useIsAdmin();
  const qc = useQueryClient();
  const keys = useQuery({ queryKey: ["api-keys"], queryFn: ({ signal }) => listApiKeys(signal) });
  const refetchKeys = () => void qc.invalidateQueries({ queryKey: ["api-keys"] });
  const [name, setName] = useState("");
  const [scope, setScope] = useState<"admin" | "read">("read");
  const [shown, setShown] = useState<{ name: string; key: string }>();
  const [error, setError] = useState<string>();

  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      const k = await createApiKey(name, scope);
      setShown({ name: k.name, key: k.key });
      setName("");
      refetchKeys();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  }

  return (
    <Card title="API keys" note="for REST clients: Authorization: Bearer swk_…">
      <AdminOnly what="Creating an API key">
      <form className="field-row" onSubmit={submit}>
        <label>
          Key name
          <input required value={name} onChange={(e) => setName(e.target.value)} maxLength={200} placeholder="e.g. grafana" />
        </label>
        <label>
          Access
          <select value={scope} onChange={(e) => setScope(e.target.value === "admin" ? "admin" : "read")}>
            <option value="read">read: reads like a viewer (scrape jobs, dashboards)</option>
            <option value="admin">admin: reads and manages the org</option>
          </select>
        </label>
        <button type="submit" className="primary">
          Create API key
        </button>
      </form>
      </AdminOnly>
      {error && (
        <p className="state error" role="alert">
          {error}
        </p>
      )}
      {shown && (
        <div role="status">
          <p>
            Key <strong>{shown.name}</strong> — shown once; only its hash is stored:
          </p>
          <pre aria-label="New API key">{shown.key}</pre>
          <button type="button" onClick={() => setShown(undefined)}>
            I have copied it
          </button>
        </div>
      )}
      <Async state={keys} isEmpty={(d) => d.length === 0} empty="No API keys.">
        {(list) => (
          <table className="data" aria-label="API key list">
            <thead>
              <tr>
                <th>name</th>
                <th>prefix</th>
                <th>access</th>
                <th>created</th>
                <th>last used</th>
                <th>state</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {list.map((k) => (
                <tr key={k.id}>
                  <td>{k.name}</td>
                  <td>
                    <code>{k.prefix}</code>
                  </td>
                  <td>{k.scope}</td>
                  <td>{formatInstant(k.created_at, "minute")}</td>
                  <td>{k.last_used_at ? formatInstant(k.last_used_at, "minute") : "never"}</td>
                  <td>{k.revoked_at ? <span className="badge bad">revoked</span> : <span className="badge ok">active</span>}</td>
                  <td>
                    {!k.revoked_at && admin && (
                      <button
                        type="button"
                        className="danger"
                        aria-label={`Revoke API key ${k.name}`}
                        onClick={() => {
                          if (window.confirm(`Revoke the key "${k.name}"? Clients using it stop working.`)) void revokeApiKey(k.id).then(refetchKeys);
                        }}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Async>
    </Card>
  );
}

function Users() {
  const admin = useIsAdmin();
  const qc = useQueryClient();
  const users = useQuery({ queryKey: ["users"], queryFn: ({ signal }) => listUsers(signal) });
  const refetchUsers = () => void qc.invalidateQueries({ queryKey: ["users"] });
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [role, setRole] = useState("viewer");
  const [error, setError] = useState<string>();

  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      await createUser(email, password, role);
      setEmail("");
      setPassword("");
      refetchUsers();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  }

  return (
    <Card title="Users" note="people of this organisation">
      <Async state={users} isEmpty={(d) => d.length === 0}>
        {(list) => (
          <table className="data" aria-label="User list">
            <thead>
              <tr>
                <th>email</th>
                <th>role</th>
                <th>created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {list.map((u) => (
                <tr key={u.id}>
                  <td>{u.email}</td>
                  <td>{u.role}</td>
                  <td>{formatInstant(u.created_at, "minute")}</td>
                  <td>
                    {admin && (
                    <button
                      type="button"
                      className="danger"
                      aria-label={`Remove user ${u.email}`}
                      onClick={() => {
                        if (window.confirm(`Remove ${u.email}?`))
                          void deleteUser(u.id)
                            .then(refetchUsers)
                            .catch((e: Error) => setError(e.message));
                      }}
                    >
                      Remove
                    </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Async>
      <AdminOnly what="Adding a user">
      <h3 style={{ fontSize: 14 }}>Add a user</h3>
      <form className="field-row" onSubmit={submit}>
        <label>
          Email
          <input type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password (12+ characters)
          <input type="password" required minLength={12} autoComplete="new-password" value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.target.value)}>
            <option value="viewer">viewer</option>
            <option value="admin">admin</option>
          </select>
        </label>
        <button type="submit" className="primary">
          Add user
        </button>
      </form>
      </AdminOnly>
      {error && (
        <p className="state error" role="alert">
          {error}
        </p>
      )}
    </Card>
  );
}

export default function Settings() {
  return (
    <>
      <div className="page-head">
        <h1>Settings</h1>
      </div>
      <Measurement />
      <StorageTargets />
      <ApiKeys />
      <Users />
      <Invitations />
      <SingleSignOn />
      <OtlpExport />
      <AuditLog />
    </>
  );
}
