import type { ReactNode } from "react";
import { useIsAdmin } from "../../lib/role";

/** `children` for admins; for viewers, a line saying what needs the admin role (or nothing). */
export function AdminOnly({ what, children }: { what?: string; children: ReactNode }) {
  if (useIsAdmin()) return <>{children}</>;
  return what ? (
    <p className="muted" role="note">
      {what} needs the admin role.
    </p>
  ) : null;
}
