import { useState, type FormEvent } from "react";
import { ssoStartUrl } from "../api/accounts";
import { login, type Me } from "../api/session";
import { follow } from "../components/common/Link";

/** Sends the browser to the org's own provider, named by its slug or an email domain. */
function SsoSignIn({ go }: { go: (url: string) => void }) {
  const [org, setOrg] = useState("");
  const [open, setOpen] = useState(false);
  if (!open) {
    return (
      <button type="button" onClick={() => setOpen(true)}>
        Sign in with SSO
      </button>
    );
  }
  return (
    <form
      aria-label="Sign in with SSO"
      onSubmit={(e) => {
        e.preventDefault();
        go(ssoStartUrl(org));
      }}
    >
      <label>
        Organisation or email
        <input required value={org} onChange={(e) => setOrg(e.target.value)} placeholder="acme, you@acme.com or acme.com" />
      </label>
      <button type="submit" className="primary">
        Continue to your provider
      </button>
    </form>
  );
}

export function Login({ onLoggedIn, go = (url) => window.location.assign(url) }: { onLoggedIn: (me: Me) => void; go?: (url: string) => void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      onLoggedIn(await login(email, password));
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="login card">
      <h1>Stormwatch</h1>
      <p className="muted">Sign in to see your fleet.</p>
      <form onSubmit={submit}>
        <label>
          Email
          <input type="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password
          <input type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        {error && (
          <p className="state error" role="alert" style={{ padding: 0 }}>
            {error}
          </p>
        )}
        <button type="submit" className="primary" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
      <p>
        <a href="/forgot-password" onClick={follow}>
          Forgot your password?
        </a>
      </p>
      <SsoSignIn go={go} />
    </main>
  );
}
