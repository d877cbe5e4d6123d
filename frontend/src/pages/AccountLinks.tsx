import { useState, type FormEvent } from "react";
import { acceptInvitation, confirmPasswordReset, linkToken, requestPasswordReset } from "../api/accounts";
import { fieldErrors } from "../api/http";
import type { Me } from "../api/models";
import { follow } from "../components/common/Link";

function Problem({ error }: { error?: string }) {
  return error ? (
    <p className="state error" role="alert" style={{ padding: 0 }}>
      {error}
    </p>
  ) : null;
}

function message(err: unknown): string {
  const fields = fieldErrors(err);
  const first = Object.entries(fields)[0];
  if (first) return `${first[0]}: ${first[1]}`;
  return err instanceof Error ? err.message : String(err);
}

/** Sets a password through a mailed link (an invitation or a reset) and signs the person in. */
function SetPassword({ title, intro, action, submit, onDone }: { title: string; intro: string; action: string; submit: (token: string, password: string) => Promise<Me>; onDone: (me: Me) => void }) {
  const token = linkToken();
  const [password, setPassword] = useState("");
  const [again, setAgain] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  async function send(e: FormEvent) {
    e.preventDefault();
    if (password !== again) {
      setError("The two passwords differ.");
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      onDone(await submit(token, password));
    } catch (err) {
      setError(message(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="login card">
      <h1>{title}</h1>
      {!token ? (
        <Problem error="This page needs the whole link from the email: open it again from there." />
      ) : (
        <>
          <p className="muted">{intro}</p>
          <form onSubmit={send} aria-label={title}>
            <label>
              New password (12+ characters)
              <input type="password" autoComplete="new-password" required minLength={12} value={password} onChange={(e) => setPassword(e.target.value)} />
            </label>
            <label>
              The same again
              <input type="password" autoComplete="new-password" required minLength={12} value={again} onChange={(e) => setAgain(e.target.value)} />
            </label>
            <Problem error={error} />
            <button type="submit" className="primary" disabled={busy}>
              {action}
            </button>
          </form>
        </>
      )}
      <p>
        <a href="/login" onClick={follow}>
          Back to sign in
        </a>
      </p>
    </main>
  );
}

export function AcceptInvite({ onDone }: { onDone: (me: Me) => void }) {
  return <SetPassword title="Accept the invitation" intro="Choose the password you will sign in with. The link works once." action="Set password and sign in" submit={acceptInvitation} onDone={onDone} />;
}

export function ResetPassword({ onDone }: { onDone: (me: Me) => void }) {
  return <SetPassword title="Choose a new password" intro="Your other sessions end when you set it. The link works once." action="Set new password" submit={confirmPasswordReset} onDone={onDone} />;
}

export function ForgotPassword() {
  const [email, setEmail] = useState("");
  const [answer, setAnswer] = useState<string>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  async function send(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      setAnswer(await requestPasswordReset(email));
    } catch (err) {
      setError(message(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="login card">
      <h1>Forgot your password?</h1>
      {answer ? (
        <p role="status">{answer}</p>
      ) : (
        <form onSubmit={send} aria-label="Reset password">
          <label>
            Email
            <input type="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
          </label>
          <Problem error={error} />
          <button type="submit" className="primary" disabled={busy}>
            Email me a link
          </button>
        </form>
      )}
      <p>
        <a href="/login" onClick={follow}>
          Back to sign in
        </a>
      </p>
    </main>
  );
}
