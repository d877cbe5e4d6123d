import type { BudgetVM } from "../../api/throughput";
import { formatBytesSI, formatUsd } from "../../lib/throughput";

/** This month's egress: used, scheduled and left against the budget, and what was refused. */
export function Budget({ b }: { b: BudgetVM }) {
  const share = b.budgetBytes > 0 ? Math.min(1, (b.usedBytes + b.scheduledBytes) / b.budgetBytes) : 0;
  return (
    <div>
      <dl className="kv" aria-label="Budget">
        <div>
          <dt>month</dt>
          <dd>{b.month}</dd>
        </div>
        <div>
          <dt>used</dt>
          <dd>
            {formatBytesSI(b.usedBytes)}, {formatUsd(b.usedCostUsd)}
          </dd>
        </div>
        <div>
          <dt>scheduled</dt>
          <dd>
            {formatBytesSI(b.scheduledBytes)}, {formatUsd(b.scheduledCostUsd)}
          </dd>
        </div>
        <div>
          <dt>left</dt>
          <dd>{formatBytesSI(b.remainingBytes)}</dd>
        </div>
        <div>
          <dt>budget</dt>
          <dd>{formatBytesSI(b.budgetBytes)}</dd>
        </div>
        <div>
          <dt>estimated cost</dt>
          <dd>
            {formatUsd(b.estimatedCostUsd)}
            {b.budgetCostUsd !== null && ` of ${formatUsd(b.budgetCostUsd)}`}
          </dd>
        </div>
        {b.budgetCostUsd !== null && b.estimatedCostUsd !== null && (
          <div>
            <dt>cost left</dt>
            <dd>{formatUsd(Math.max(0, b.budgetCostUsd - b.estimatedCostUsd))}</dd>
          </div>
        )}
      </dl>
      <meter
        aria-label="Budget used and scheduled"
        min={0}
        max={1}
        low={0.75}
        high={0.9}
        optimum={0}
        value={share}
        style={{ width: "100%", marginTop: 8 }}
        title={`${Math.round(share * 100)}% of the month's budget used or scheduled`}
      />
      {b.refused.length > 0 ? (
        <>
          <h3 style={{ fontSize: 14 }}>Refused by the scheduler</h3>
          <ul aria-label="Refused experiments">
            {b.refused.map((r, i) => (
              <li key={`${r.pair}${i}`}>
                {r.pair}
                {r.proto ? ` ${r.proto.toUpperCase()}` : ""}
                {r.experiments !== null ? ` (${r.experiments} experiment${r.experiments === 1 ? "" : "s"})` : ""}: {r.reason}
              </li>
            ))}
          </ul>
        </>
      ) : (
        <p className="muted">The scheduler refused nothing this month.</p>
      )}
    </div>
  );
}
