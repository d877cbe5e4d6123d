import { useInfiniteQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { listAuditEvents, type AuditEvent, type AuditFilters } from "../../api/audit";
import { useIsAdmin } from "../../lib/role";
import { Card, ErrorState, Loading } from "../common/State";
import { formatInstant } from "../../lib/format";

const shown = (v: unknown) => (v === null || v === undefined ? "–" : typeof v === "string" ? v : JSON.stringify(v));

function Changes({ changes }: { changes: AuditEvent["changes"] }) {
  const fields = Object.entries(changes);
  if (fields.length === 0) return <span className="muted">–</span>;
  return (
    <ul className="audit-diff">
      {fields.map(([field, pair]) => {
        const [before, after] = Array.isArray(pair) ? pair : [undefined, pair];
        return (
          <li key={field}>
            <code>{field}</code>: {shown(before)} → {shown(after)}
          </li>
        );
      })}
    </ul>
  );
}

/** Who changed what in the org, newest first: admins only (the API refuses everyone else). */
export function AuditLog() {
  const isAdmin = useIsAdmin();
  const [filters, setFilters] = useState<AuditFilters>({});
  const [draft, setDraft] = useState<AuditFilters>({});
  const log = useInfiniteQuery({
    queryKey: ["audit", filters],
    queryFn: ({ pageParam, signal }) => listAuditEvents(filters, pageParam, signal),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.next_cursor ?? undefined,
    enabled: isAdmin,
  });
  if (!isAdmin) return null;
  const apply = (e: FormEvent) => {
    e.preventDefault();
    setFilters({ ...draft });
  };
  const events = log.data?.pages.flatMap((p) => p.items) ?? [];
  return (
    <Card title="Audit log" note="who changed what, times in UTC">
      <form aria-label="Audit log filters" onSubmit={apply} className="inline-form">
        <label>
          Actor <input value={draft.actor ?? ""} onChange={(e) => setDraft({ ...draft, actor: e.target.value })} />
        </label>
        <label>
          Action <input value={draft.action ?? ""} placeholder="alert_rule.update" onChange={(e) => setDraft({ ...draft, action: e.target.value })} />
        </label>
        <label>
          Target type <input value={draft.target_type ?? ""} placeholder="channel" onChange={(e) => setDraft({ ...draft, target_type: e.target.value })} />
        </label>
        <button type="submit">Filter</button>
      </form>
      {log.isPending ? (
        <Loading what="Loading the audit log" />
      ) : log.isError ? (
        <ErrorState error={log.error} onRetry={() => void log.refetch()} />
      ) : events.length === 0 ? (
        <p className="muted">No changes recorded.</p>
      ) : (
        <>
          <table aria-label="Audit log">
            <thead>
              <tr>
                <th>time (UTC)</th>
                <th>actor</th>
                <th>action</th>
                <th>target</th>
                <th>changes</th>
              </tr>
            </thead>
            <tbody>
              {events.map((e) => (
                <tr key={e.id}>
                  <td>{formatInstant(e.at)}</td>
                  <td>
                    {e.actor_label} <small className="muted">{e.actor_kind === "api_key" ? "API key" : "user"}</small>
                  </td>
                  <td>
                    <code>{e.action}</code>
                  </td>
                  <td>{e.target_label || e.target_id}</td>
                  <td>
                    <Changes changes={e.changes} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {log.hasNextPage && (
            <button type="button" disabled={log.isFetchingNextPage} onClick={() => void log.fetchNextPage()}>
              Older entries
            </button>
          )}
        </>
      )}
    </Card>
  );
}
