import { Area, CartesianGrid, ComposedChart, Legend, Line, ReferenceLine, ResponsiveContainer, Scatter, Tooltip, XAxis, YAxis } from "recharts";
import type { LevelSegment, ShiftMark, TimelinePoint } from "../../api/models";
import { formatInstant, formatPercent, formatUs, timeAxis, usAxis } from "../../lib/format";
import { logTicks, positiveExtent, timelineRows } from "../../lib/shape";
import { useTheme } from "../../lib/theme";
import { TipBox } from "../common/ChartTooltip";

// Bands between the lines they join, then the marks (the legend's default is alphabetical).
const LEGEND_ORDER = ["p50", "p50–p99", "p99", "p99–p99.99", "p99.99", "level (change points)", "above the range", "loss"];

/** The y-domain that fits the body of the distribution (p1 to p99.9 of the range), padded so
 * the level line and p50 sit well inside it; null when the body is unknown or degenerate. */
export function bodyDomain(body: [number, number] | null | undefined, log: boolean): [number, number] | null {
  if (!body || !(body[1] > body[0]) || !(body[0] > 0)) return null;
  const pad = (body[1] - body[0]) * 0.1;
  return log ? [Math.max(body[0] - pad, body[0] / 1.5), body[1] + pad] : [Math.max(0, body[0] - pad), body[1] + pad];
}

/** RTT in windows: bands p50–p99 and p99–p99.99 with their edges drawn, level shifts as steps, losses as marks.
 * By default the y-range fits the body (`body`: p1..p99.9), tail values above it are drawn as marks at its top
 * edge; `full` shows every value. */
export function Timeline({
  points,
  segments,
  log,
  body,
  full = false,
  shifts = [],
}: {
  points: TimelinePoint[];
  segments: LevelSegment[];
  log: boolean;
  body?: [number, number] | null;
  full?: boolean;
  /** Level shifts as marks, each with its path change (docs/paths.md) marked beside it. */
  shifts?: ShiftMark[];
}) {
  const { palette } = useTheme();
  const time = points.length ? timeAxis(Math.min(...points.map((p) => p.t)), Math.max(...points.map((p) => p.t))) : null;
  const ext = positiveExtent(timelineRows(points, segments) as unknown as Record<string, unknown>[], ["p50", "p99", "p9999", "level"]);
  // Explicit, padded domain: every line stays inside the frame on both scales.
  const fullDomain: [number, number] | undefined = ext ? (log ? [ext[0] / 1.2, ext[1] * 1.2] : [0, ext[1] * 1.05]) : undefined;
  const fit = full ? null : bodyDomain(body, log);
  const domain = fit ?? fullDomain;
  const top = fit ? fit[1] : null;
  const yTick = usAxis(domain?.[1] ?? 0);
  const rows = timelineRows(points, segments).map((r) => ({
    ...r,
    // A window whose tail (or median) leaves the fitted range: a mark at the top edge.
    overMark: top !== null && [r.p50, r.p99, r.p9999].some((v) => v !== null && v > top) ? top : null,
  }));
  const [c50, c99, c9999, cLevel] = [palette.series[0], palette.series[1], palette.series[2], palette.series[4]];
  return (
    <ResponsiveContainer width="100%" height={320}>
      <ComposedChart data={rows} margin={{ top: 8, right: 12, bottom: 4, left: 8 }}>
        <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
        <XAxis dataKey="t" type="number" scale="time" domain={["dataMin", "dataMax"]} ticks={time?.ticks} tickFormatter={time?.format} stroke={palette.muted} />
        <YAxis
          yAxisId="rtt"
          scale={log ? "log" : "linear"}
          domain={domain ?? (log ? ["auto", "auto"] : [0, "auto"])}
          ticks={log && domain ? logTicks(domain[0], domain[1]).filter((v) => v >= domain[0] && v <= domain[1]) : undefined}
          allowDataOverflow
          tickFormatter={yTick}
          stroke={palette.muted}
          width={64}
        />
        <YAxis yAxisId="loss" orientation="right" domain={[0, 1]} hide />
        <Tooltip
          content={({ active, payload }) => {
            const row = active && payload?.[0] ? (payload[0].payload as (typeof rows)[number]) : undefined;
            if (!row) return null;
            return (
              <TipBox
                title={formatInstant(row.t)}
                rows={[
                  { name: "p50", value: formatUs(row.p50), color: c50 },
                  { name: "p99", value: formatUs(row.p99), color: c99 },
                  { name: "p99.99", value: formatUs(row.p9999), color: c9999 },
                  ...(row.level !== null ? [{ name: "level", value: formatUs(row.level), color: cLevel }] : []),
                  { name: "samples", value: String(row.count) },
                  { name: "loss", value: formatPercent(row.loss), color: palette.danger },
                ]}
              />
            );
          }}
        />
        <Legend itemSorter={(item) => LEGEND_ORDER.indexOf(String(item.value))} />
        <Area yAxisId="rtt" dataKey="band" name="p50–p99" stroke="none" fill={c99} fillOpacity={0.22} isAnimationActive={false} connectNulls={false} />
        <Area yAxisId="rtt" dataKey="tailBand" name="p99–p99.99" stroke="none" fill={c9999} fillOpacity={0.14} isAnimationActive={false} connectNulls={false} />
        <Line yAxisId="rtt" dataKey="p50" name="p50" stroke={c50} dot={false} strokeWidth={1.5} isAnimationActive={false} connectNulls={false} />
        <Line yAxisId="rtt" dataKey="p99" name="p99" stroke={c99} dot={false} strokeWidth={1} isAnimationActive={false} connectNulls={false} />
        <Line yAxisId="rtt" dataKey="p9999" name="p99.99" stroke={c9999} dot={false} strokeWidth={1} isAnimationActive={false} connectNulls={false} />
        {segments.length > 0 && (
          <Line yAxisId="rtt" className="level-line" dataKey="level" name="level (change points)" type="stepAfter" stroke={cLevel} strokeWidth={2} dot={false} isAnimationActive={false} connectNulls />
        )}
        {top !== null && <Scatter yAxisId="rtt" dataKey="overMark" name="above the range" fill={c9999} shape="diamond" isAnimationActive={false} />}
        <Scatter yAxisId="loss" dataKey="lossMark" name="loss" fill={palette.danger} shape="triangle" isAnimationActive={false} />
        {shifts.map((s) => (
          <ReferenceLine key={`shift-${s.tMs}`} yAxisId="rtt" x={s.tMs} className="level-shift-mark" stroke={cLevel} strokeDasharray="4 3" ifOverflow="extendDomain" label={{ value: "shift", position: "insideBottomRight", fill: cLevel, fontSize: 11 }} />
        ))}
        {shifts.flatMap((s) =>
          s.pathChange
            ? [
                <ReferenceLine
                  key={`path-${s.pathChange.atMs}`}
                  yAxisId="rtt"
                  x={s.pathChange.atMs}
                  className="path-change-mark"
                  stroke={palette.danger}
                  ifOverflow="extendDomain"
                  label={{ value: `path (hop ${s.pathChange.diffTtl})`, position: "insideTopLeft", fill: palette.danger, fontSize: 11 }}
                />,
              ]
            : [],
        )}
      </ComposedChart>
    </ResponsiveContainer>
  );
}
