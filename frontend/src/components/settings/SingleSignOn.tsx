import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState, type FormEvent } from "react";
import { deleteOidcConfig, getOidcConfig, saveOidcConfig } from "../../api/accounts";
import { fieldErrors } from "../../api/http";
import { useIsAdmin } from "../../lib/role";
import { Field, FormError } from "../common/Field";
import { Card, ErrorState, Loading } from "../common/State";

const FIELDS = ["issuer_url", "client_id", "client_secret", "default_role", "allowed_domains"];

/** The org's OpenID Connect provider: admins set it up; the client secret is write-only. */
export function SingleSignOn() {
  const admin = useIsAdmin();
  const qc = useQueryClient();
  const config = useQuery({ queryKey: ["oidc-config"], queryFn: ({ signal }) => getOidcConfig(signal) });
  const [issuer, setIssuer] = useState("");
  const [clientId, setClientId] = useState("");
  const [secret, setSecret] = useState("");
  const [role, setRole] = useState("viewer");
  const [domains, setDomains] = useState("");
  useEffect(() => {
    const c = config.data;
    if (!c) return;
    setIssuer(c.issuer_url);
    setClientId(c.client_id);
    setRole(c.default_role);
    setDomains(c.allowed_domains.join(", "));
  }, [config.data]);
  const save = useMutation({
    mutationFn: () =>
      saveOidcConfig({
        issuer_url: issuer.trim(),
        client_id: clientId.trim(),
        client_secret: secret ? secret : null,
        default_role: role,
        allowed_domains: domains.split(/[\s,]+/).filter(Boolean).map((d) => d.toLowerCase()),
      }),
    onSuccess: (saved) => {
      setSecret("");
      qc.setQueryData(["oidc-config"], saved);
    },
  });
  const remove = useMutation({
    mutationFn: () => deleteOidcConfig(),
    onSuccess: () => qc.setQueryData(["oidc-config"], null),
  });
  const errs = fieldErrors(save.error);

  if (config.isPending) return <Loading what="Single sign-on" />;
  if (config.isError) return <ErrorState error={config.error} onRetry={() => void config.refetch()} />;
  const current = config.data;

  if (!admin) {
    return (
      <Card title="Single sign-on" note="OpenID Connect">
        <p className="muted">{current ? `People sign in through ${current.issuer_url}; new ones get the ${current.default_role} role.` : "Single sign-on is not set up."}</p>
      </Card>
    );
  }

  function submit(e: FormEvent) {
    e.preventDefault();
    save.mutate();
  }

  return (
    <Card title="Single sign-on" note="your own OpenID Connect provider (authorization code with PKCE)">
      {current && (
        <p>
          Register this redirect URI at the provider: <code>{current.redirect_uri}</code>
        </p>
      )}
      <form aria-label="Single sign-on settings" onSubmit={submit}>
        <Field id="oidc-issuer" label="Issuer URL" error={errs.issuer_url}>
          {(a) => <input {...a} type="url" required value={issuer} onChange={(e) => setIssuer(e.target.value)} placeholder="https://login.example.com" />}
        </Field>
        <Field id="oidc-client" label="Client ID" error={errs.client_id}>
          {(a) => <input {...a} required value={clientId} onChange={(e) => setClientId(e.target.value)} />}
        </Field>
        <Field id="oidc-secret" label={current?.has_client_secret ? "Client secret (stored; type to replace)" : "Client secret"} error={errs.client_secret}>
          {(a) => <input {...a} type="password" autoComplete="off" required={!current?.has_client_secret} value={secret} onChange={(e) => setSecret(e.target.value)} />}
        </Field>
        <Field id="oidc-role" label="Role of new people" error={errs.default_role}>
          {(a) => (
            <select {...a} value={role} onChange={(e) => setRole(e.target.value)}>
              <option value="viewer">viewer</option>
              <option value="admin">admin</option>
            </select>
          )}
        </Field>
        <Field id="oidc-domains" label="Email domains that may sign in (comma separated; empty: any verified)" error={errs["allowed_domains"] ?? Object.entries(errs).find(([k]) => k.startsWith("allowed_domains."))?.[1]}>
          {(a) => <input {...a} value={domains} onChange={(e) => setDomains(e.target.value)} placeholder="example.com" />}
        </Field>
        <FormError error={save.error} shown={Object.keys(errs).filter((k) => FIELDS.includes(k.split(".")[0] ?? ""))} />
        {save.isSuccess && <p role="status">Single sign-on saved.</p>}
        <div className="field-row">
          <button type="submit" className="primary" disabled={save.isPending}>
            Save single sign-on
          </button>
          {current && (
            <button
              type="button"
              className="danger"
              onClick={() => {
                if (window.confirm("Turn single sign-on off? People then sign in with a password.")) remove.mutate();
              }}
            >
              Turn off single sign-on
            </button>
          )}
        </div>
      </form>
      {remove.error && (
        <p className="state error" role="alert">
          {remove.error.message}
        </p>
      )}
    </Card>
  );
}
