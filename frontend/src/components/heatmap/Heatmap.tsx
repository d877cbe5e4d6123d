import { useState } from "react";
import type { HeatmapVM } from "../../api/models";
import { rampColor, rampGradient, rampTextColor } from "../../lib/color";
import { formatCount } from "../../lib/format";
import { STAT_HELP, STAT_LABELS, buildGrid, cellPosition, formatStat } from "../../lib/heatmap";
import { MIN_BEYOND, isWeak, supportNote } from "../../lib/support";

/** src × dst grid (rows send, columns answer); every cell is a button that opens the pair. */
export function Heatmap({ vm, onOpen, firing }: { vm: HeatmapVM; onOpen: (src: string, dst: string) => void; firing?: Map<string, { ruleName: string }[]> }) {
  const g = buildGrid(vm);
  const [hover, setHover] = useState<string>("");
  const label = (k: string) => vm.labels[k] ?? k;
  const statName = STAT_LABELS[vm.stat];
  return (
    <div>
      <div className="scroll-x">
        <table className="heatmap" aria-label={`${statName} heatmap by ${vm.level}`}>
          <thead>
            <tr>
              <th scope="col" className="muted" style={{ textAlign: "right", verticalAlign: "bottom" }}>
                from ↓ / to →
              </th>
              {g.cols.map((c) => (
                <th key={c} scope="col" className="col">
                  {label(c)}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {g.rows.map((r) => (
              <tr key={r}>
                <th scope="row" className="row">
                  {label(r)}
                </th>
                {g.cols.map((c) => {
                  const cell = g.at(r, c);
                  const pos = cell ? cellPosition(g, cell.value) : null;
                  if (!cell || pos === null) {
                    return (
                      <td key={c}>
                        <span className="empty" title={`${label(r)} → ${label(c)}: no data`} />
                      </td>
                    );
                  }
                  const text = formatStat(vm.stat, cell.value);
                  const alerts = firing?.get(`${r}|${c}`) ?? [];
                  // A tail percentile with too few samples beyond it is greyed, off the colour ramp.
                  const weak = isWeak(cell.beyond);
                  const support = supportNote(cell.beyond);
                  const desc = `${label(r)} → ${label(c)}: ${statName} ${text}, ${formatCount(cell.count)} samples${support ? `, ${support}` : ""}${alerts.length ? `; firing: ${alerts.map((a) => a.ruleName).join(", ")}` : ""}`;
                  const classes = [alerts.length ? "alerting" : "", weak ? "weak" : ""].filter(Boolean).join(" ");
                  return (
                    <td key={c}>
                      <button
                        type="button"
                        aria-label={desc}
                        title={desc}
                        className={classes || undefined}
                        style={weak ? undefined : { background: rampColor(pos), color: rampTextColor(pos) }}
                        onMouseEnter={() => setHover(desc)}
                        onFocus={() => setHover(desc)}
                        onClick={() => onOpen(r, c)}
                      >
                        {text.replace(" ", "\u00a0")}
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
        <span>{formatStat(vm.stat, g.lo)}</span>
        <span className="bar" style={{ background: rampGradient() }} />
        <span>{formatStat(vm.stat, g.hi)}</span>
        <span>({g.log ? "log scale" : "linear scale"})</span>
        {vm.stat === "jitter" && <span className="muted">{STAT_HELP.jitter}</span>}
        {vm.cells.some((c) => isWeak(c.beyond)) && (
          <span>
            <span className="swatch weak" aria-hidden="true" /> grey: fewer than {MIN_BEYOND} samples beyond the percentile, too few to support it
          </span>
        )}
      </div>
      <div className="hover-info" aria-live="polite">
        {hover || "Hover or focus a cell for its value; click it to open the pair."}
      </div>
    </div>
  );
}
