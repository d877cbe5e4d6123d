import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { createInvitation, listInvitations, revokeInvitation, type InvitationCreated } from "../../api/accounts";
import { fieldErrors } from "../../api/http";
import { useIsAdmin } from "../../lib/role";
import { AdminOnly } from "../common/AdminOnly";
import { Field, FormError } from "../common/Field";
import { Card, ErrorState, Loading } from "../common/State";
import { formatInstant } from "../../lib/format";

/** Invite people by email (a single-use link that sets their password) and withdraw pending invitations. */
export function Invitations() {
  const admin = useIsAdmin();
  const qc = useQueryClient();
  const pending = useQuery({ queryKey: ["invitations"], queryFn: ({ signal }) => listInvitations(signal) });
  const [email, setEmail] = useState("");
  const [role, setRole] = useState("viewer");
  const [sent, setSent] = useState<InvitationCreated>();
  const invite = useMutation({
    mutationFn: () => createInvitation(email, role),
    onSuccess: (created) => {
      setSent(created);
      setEmail("");
      void qc.invalidateQueries({ queryKey: ["invitations"] });
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => revokeInvitation(id),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["invitations"] }),
  });
  const errs = fieldErrors(invite.error);

  function submit(e: FormEvent) {
    e.preventDefault();
    setSent(undefined);
    invite.mutate();
  }

  return (
    <Card title="Invitations" note="a single-use link by email sets the new person's password">
      <AdminOnly what="Inviting people">
        <form className="field-row" aria-label="Invite a person" onSubmit={submit}>
          <Field id="invite-email" label="Email" error={errs.email}>
            {(a) => <input {...a} type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />}
          </Field>
          <Field id="invite-role" label="Role" error={errs.role}>
            {(a) => (
              <select {...a} value={role} onChange={(e) => setRole(e.target.value)}>
                <option value="viewer">viewer</option>
                <option value="admin">admin</option>
              </select>
            )}
          </Field>
          <button type="submit" className="primary" disabled={invite.isPending}>
            Send invitation
          </button>
        </form>
        <FormError error={invite.error} shown={["email", "role"]} />
      </AdminOnly>
      {sent && (
        <div role="status">
          <p>{sent.detail}</p>
          {sent.invite_url && (
            <>
              <pre aria-label="Invitation link">{sent.invite_url}</pre>
              <button type="button" onClick={() => setSent(undefined)}>
                I have copied it
              </button>
            </>
          )}
        </div>
      )}
      {pending.isPending ? (
        <Loading what="Invitations" />
      ) : pending.isError ? (
        <ErrorState error={pending.error} onRetry={() => void pending.refetch()} />
      ) : pending.data.length === 0 ? (
        <p className="muted">No pending invitations.</p>
      ) : (
        <table className="data" aria-label="Pending invitations">
          <thead>
            <tr>
              <th>email</th>
              <th>role</th>
              <th>sent</th>
              <th>expires</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {pending.data.map((i) => (
              <tr key={i.id}>
                <td>{i.email}</td>
                <td>{i.role}</td>
                <td>{formatInstant(i.created_at, "minute")}</td>
                <td>{formatInstant(i.expires_at, "minute")}</td>
                <td>
                  {admin && (
                    <button
                      type="button"
                      className="danger"
                      aria-label={`Withdraw the invitation of ${i.email}`}
                      onClick={() => {
                        if (window.confirm(`Withdraw the invitation of ${i.email}? Its link stops working.`)) revoke.mutate(i.id);
                      }}
                    >
                      Withdraw
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {revoke.error && (
        <p className="state error" role="alert">
          {revoke.error.message}
        </p>
      )}
    </Card>
  );
}
