import type { ExperimentVM } from "../../api/throughput";
import { formatPercent, formatRatio, formatUs } from "../../lib/format";
import { directionLabel, formatBytesSI, formatMbps } from "../../lib/throughput";
import { transitionText } from "./ExperimentTimeline";

/** Per direction mean, max, min, CoV and volume (UDP: loss and jitter), then the transitions. */
export function ExperimentStats({ exp }: { exp: ExperimentVM }) {
  const udp = exp.proto === "udp";
  return (
    <>
      <table className="data" aria-label="Experiment statistics">
        <thead>
          <tr>
            <th>direction</th>
            <th>mean</th>
            <th>max</th>
            <th>min</th>
            <th>CoV</th>
            <th>transferred</th>
            {udp && <th>loss</th>}
            {udp && <th>jitter</th>}
          </tr>
        </thead>
        <tbody>
          {exp.stats.map((s) => (
            <tr key={s.direction}>
              <td>{directionLabel(exp, s.direction)}</td>
              <td>{formatMbps(s.meanBps)}</td>
              <td>{formatMbps(s.maxBps)}</td>
              <td>{formatMbps(s.minBps)}</td>
              <td>{formatRatio(s.cov)}</td>
              <td>{formatBytesSI(s.bytes)}</td>
              {udp && <td>{formatPercent(s.lossRatio)}</td>}
              {udp && <td>{formatUs(s.jitterUs)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
      {exp.transitions.length === 0 ? (
        <p className="muted">No high→low transition in this experiment.</p>
      ) : (
        <ul aria-label="Transitions" className="transitions">
          {exp.transitions.map((t, i) => (
            <li key={`${t.direction}${t.atMs}`}>{transitionText(exp, i)}</li>
          ))}
        </ul>
      )}
    </>
  );
}
