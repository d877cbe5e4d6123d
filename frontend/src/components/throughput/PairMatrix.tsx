import { useState } from "react";
import type { Proto, RegionPairVM } from "../../api/throughput";
import { rampColor, rampGradient, rampTextColor, scalePosition } from "../../lib/color";
import { formatRatio } from "../../lib/format";
import { formatMbps, pairGrid } from "../../lib/throughput";

/** Region × region grid of mean throughput for one protocol (rows send, columns receive);
 * every cell is a button that opens the pair. */
export function PairMatrix({ rows, proto, selected, onOpen }: { rows: RegionPairVM[]; proto: Proto; selected?: { src: string; dst: string } | null; onOpen: (src: string, dst: string) => void }) {
  const g = pairGrid(rows, proto);
  const [hover, setHover] = useState("");
  const name = proto.toUpperCase();
  if (g.regions.length === 0) return <p className="muted">No {name} experiments in this range.</p>;
  return (
    <div>
      <div className="scroll-x">
        <table className="heatmap" aria-label={`${name} throughput by region pair`}>
          <thead>
            <tr>
              <th scope="col" className="muted" style={{ textAlign: "right", verticalAlign: "bottom" }}>
                from ↓ / to →
              </th>
              {g.regions.map((c) => (
                <th key={c} scope="col" className="col">
                  {c}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {g.regions.map((r) => (
              <tr key={r}>
                <th scope="row" className="row">
                  {r}
                </th>
                {g.regions.map((c) => {
                  const cell = g.at(r, c);
                  if (!cell || cell.meanBps === null) {
                    return (
                      <td key={c}>
                        <span className="empty" title={`${r} → ${c}: no experiments`} />
                      </td>
                    );
                  }
                  // Higher is better here, so the ramp runs the same way as for latency's "low is calm".
                  const pos = scalePosition(cell.meanBps, g.lo, g.hi, false);
                  const desc = `${r} → ${c}: ${name} mean ${formatMbps(cell.meanBps)}, σ ${formatMbps(cell.stdBps)}, CoV ${formatRatio(cell.cov)}, ${cell.experiments} experiment${cell.experiments === 1 ? "" : "s"}`;
                  const isSel = selected?.src === r && selected?.dst === c;
                  return (
                    <td key={c}>
                      <button
                        type="button"
                        aria-label={desc}
                        aria-pressed={isSel}
                        title={desc}
                        style={{ background: rampColor(pos), color: rampTextColor(pos), outline: isSel ? "2px solid currentColor" : undefined }}
                        onMouseEnter={() => setHover(desc)}
                        onFocus={() => setHover(desc)}
                        onClick={() => onOpen(r, c)}
                      >
                        {formatMbps(cell.meanBps).replace(" Mbit/s", "")}
                      </button>
                    </td>
                  );
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div className="legend" aria-label="Colour legend">
        <span>{formatMbps(g.lo)}</span>
        <span className="bar" style={{ background: rampGradient() }} />
        <span>{formatMbps(g.hi)}</span>
        <span>(mean over experiments, Mbit/s, linear scale)</span>
      </div>
      <div className="hover-info" aria-live="polite">
        {hover || "Hover or focus a cell for σ, CoV and the experiment count; click it to open the pair."}
      </div>
    </div>
  );
}
