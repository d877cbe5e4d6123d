import { CartesianGrid, ComposedChart, Legend, Line, ReferenceLine, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { ExperimentVM, SamplesVM } from "../../api/throughput";
import { formatClock, formatInstant, formatPercent } from "../../lib/format";
import { directionLabel, formatBytesSI, levelMarks, timelineRows, toMbps } from "../../lib/throughput";
import { useTheme } from "../../lib/theme";
import { TipBox } from "../common/ChartTooltip";

const mbit = (v: number) => `${v >= 100 ? Math.round(v) : v.toFixed(1)}`;

/** A sentence per transition: which direction, when, both levels and the volume before it. */
export function transitionText(exp: ExperimentVM, i: number): string {
  const tr = exp.transitions[i]!;
  const m = (b: number) => `${mbit(toMbps(b))} Mbit/s`;
  return `${directionLabel(exp, tr.direction)}: at ${formatClock(tr.atMs)} (${Math.round(tr.offsetS)} s in), ${m(tr.beforeBps)} → ${m(tr.afterBps)}, after ${formatBytesSI(tr.bytesBefore)}`;
}

/** Per-second throughput of both directions (forward, then reverse) with each high→low
 * transition marked: a vertical line at its second and its two levels as horizontal segments. */
export function ExperimentTimeline({ exp, samples }: { exp: ExperimentVM; samples: SamplesVM }) {
  const { palette } = useTheme();
  const rows = timelineRows(samples);
  const marks = levelMarks(exp, samples);
  const [cf, cr, cl] = [palette.series[0], palette.series[1], palette.danger];
  const summary =
    exp.transitions.length === 0
      ? `Per-second throughput of ${exp.srcName} ⇄ ${exp.dstName}; no high→low transition`
      : `Per-second throughput of ${exp.srcName} ⇄ ${exp.dstName}; ${exp.transitions.map((_, i) => transitionText(exp, i)).join("; ")}`;
  if (rows.length === 0) return <p className="muted">No samples stored for this experiment yet.</p>;
  return (
    <figure style={{ margin: 0 }}>
      <div role="img" aria-label={summary} className="tput-timeline">
        <ResponsiveContainer width="100%" height={300}>
          <ComposedChart data={rows} margin={{ top: 20, right: 16, bottom: 4, left: 8 }}>
            <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
            <XAxis dataKey="t" type="number" scale="time" domain={["dataMin", "dataMax"]} tickFormatter={(v: number) => formatClock(v)} stroke={palette.muted} />
            <YAxis domain={[0, "auto"]} tickFormatter={mbit} stroke={palette.muted} width={56} label={{ value: "Mbit/s", angle: -90, position: "insideLeft", fill: palette.muted }} />
            <Tooltip
              content={({ active, payload }) => {
                const r = active && payload?.[0] ? (payload[0].payload as (typeof rows)[number]) : undefined;
                if (!r) return null;
                const loss = r.forwardLoss ?? r.reverseLoss;
                return (
                  <TipBox
                    title={formatInstant(r.t)}
                    rows={[
                      ...(r.forward !== null ? [{ name: "forward", value: `${mbit(r.forward)} Mbit/s`, color: cf }] : []),
                      ...(r.reverse !== null ? [{ name: "reverse", value: `${mbit(r.reverse)} Mbit/s`, color: cr }] : []),
                      ...(loss !== null ? [{ name: "loss", value: formatPercent(loss) }] : []),
                    ]}
                  />
                );
              }}
            />
            <Legend />
            <Line dataKey="forward" name={directionLabel(exp, "forward")} stroke={cf} dot={false} strokeWidth={1.5} isAnimationActive={false} connectNulls={false} />
            <Line dataKey="reverse" name={directionLabel(exp, "reverse")} stroke={cr} dot={false} strokeWidth={1.5} isAnimationActive={false} connectNulls={false} />
            {marks.map((m, i) => [
              <ReferenceLine
                key={`at${i}`}
                className="transition-at"
                x={m.transition.atMs}
                stroke={cl}
                strokeWidth={2}
                label={{ value: `switch ${formatClock(m.transition.atMs)}`, position: "top", fill: cl, fontSize: 12 }}
              />,
              <ReferenceLine
                key={`hi${i}`}
                className="transition-level-before"
                segment={[
                  { x: m.fromMs, y: toMbps(m.transition.beforeBps) },
                  { x: m.transition.atMs, y: toMbps(m.transition.beforeBps) },
                ]}
                stroke={cl}
                strokeDasharray="6 3"
                label={{ value: `${mbit(toMbps(m.transition.beforeBps))} Mbit/s`, position: "insideTopLeft", fill: cl, fontSize: 11 }}
              />,
              <ReferenceLine
                key={`lo${i}`}
                className="transition-level-after"
                segment={[
                  { x: m.transition.atMs, y: toMbps(m.transition.afterBps) },
                  { x: m.toMs, y: toMbps(m.transition.afterBps) },
                ]}
                stroke={cl}
                strokeDasharray="6 3"
                label={{ value: `${mbit(toMbps(m.transition.afterBps))} Mbit/s`, position: "insideBottomRight", fill: cl, fontSize: 11 }}
              />,
            ])}
          </ComposedChart>
        </ResponsiveContainer>
      </div>
      <figcaption className="muted">Bytes received per second by each direction's receiver; dashed: the levels before and after a switch.</figcaption>
    </figure>
  );
}
