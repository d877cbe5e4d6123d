// The rule editor's backtest result: how often the draft would have fired, drawn and listed.
import type { Unit } from "../../api/alertRules";
import type { BacktestVM } from "../../api/backtest";
import { formatInstant, formatSpan } from "../../lib/format";
import { BacktestChart } from "./BacktestChart";
import { formatValue } from "./units";

export function BacktestResult({ bt, unit }: { bt: BacktestVM; unit: Unit }) {
  return (
    <div className="stack" style={{ marginTop: 12 }}>
      <p role="status" className="backtest-count">
        Would have fired <strong>{bt.count}</strong> time{bt.count === 1 ? "" : "s"} in the last {formatSpan(bt.toMs - bt.fromMs)} over {bt.seriesTotal} matched series
        {bt.series.length < bt.seriesTotal ? ` (${bt.series.length} drawn)` : ""}.
      </p>
      {bt.notes.map((n) => (
        <p key={n} className="muted">
          {n}
        </p>
      ))}
      {bt.series.length > 0 && <BacktestChart series={bt.series} firings={bt.firings} unit={unit} fromMs={bt.fromMs} toMs={bt.toMs} />}
      {bt.firings.length > 0 && (
        <div className="scroll-x">
          <table className="data" aria-label="Backtest firings">
            <thead>
              <tr>
                <th>series</th>
                <th>start</th>
                <th>end</th>
                <th>peak</th>
              </tr>
            </thead>
            <tbody>
              {bt.firings.slice(0, 50).map((x, i) => (
                <tr key={i}>
                  <td>{x.series}</td>
                  <td>{formatInstant(x.startMs, "minute")}</td>
                  <td>{x.endMs ? formatInstant(x.endMs, "minute") : "still firing"}</td>
                  <td>{formatValue(unit, x.peak)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
