import type { LossReasonsVM } from "../../api/analytics";
import { formatCount, formatTime } from "../../lib/format";

/** Why the pair's rounds were lost, as its agents recorded it; nothing when none was. */
export function LossReasons({ data, error }: { data: LossReasonsVM | undefined; error: Error | null }) {
  if (error) return <p className="muted">Loss reasons: {error.message}</p>;
  if (!data || data.lost === 0) return null;
  return (
    <div className="loss-reasons">
      <table className="data" aria-label="Lost rounds by reason">
        <thead>
          <tr>
            {data.reasons.map((r) => (
              <th key={r.reason}>{r.reason}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          <tr>
            {data.reasons.map((r) => (
              <td key={r.reason}>{formatCount(r.count)}</td>
            ))}
          </tr>
        </tbody>
      </table>
      <p className="muted">
        Lost rounds by the reason the agent recorded: timeout (no echo in time), refused (the peer's port was closed), error (a reset connection), corrupt (the echo did not match), wrong_peer (another agent answered at the peer's address).
        {!data.complete && ` Counted from ${formatTime(data.startMs, 2 * 86_400_000)} UTC: raw samples before it are gone or beyond the 7 days these counts read.`}
      </p>
    </div>
  );
}
