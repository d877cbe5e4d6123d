import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { formatUs, maxOf, timeAxis, usAxis } from "../../lib/format";
import { logTicks, positiveExtent } from "../../lib/shape";
import { useTheme } from "../../lib/theme";

/** Several series over a shared x (time or a numeric size), thin over Recharts. With `yUnit`
 * the values are durations (µs or ms) and the y ticks share one unit fitting the axis; on a
 * time x the ticks are whole UTC steps labelled so that no two read alike (xFormat then labels
 * the tooltip). */
export function LinesChart({
  rows,
  series,
  xFormat,
  yFormat,
  xLog = false,
  yLog = false,
  xTime = false,
  height = 280,
  step = false,
  dots = false,
  xInteger = false,
  yWidth = 64,
  xTicks,
  yUnit,
}: {
  rows: Record<string, number | string | null>[];
  series: string[];
  xFormat: (v: number) => string;
  yFormat?: (v: number) => string;
  xLog?: boolean;
  yLog?: boolean;
  xTime?: boolean;
  height?: number;
  step?: boolean;
  dots?: boolean;
  xInteger?: boolean;
  yWidth?: number;
  /** explicit x ticks (e.g. the measured object sizes) */
  xTicks?: number[];
  /** the y values are durations in this unit */
  yUnit?: "us" | "ms";
}) {
  const { palette } = useTheme();
  const yFactor = yUnit === "ms" ? 1000 : 1;
  const yTick = yUnit ? ((axis) => (v: number) => axis(v * yFactor))(usAxis(maxOf(rows, series) * yFactor)) : (yFormat ?? String);
  const yTip = yUnit ? (v: number) => formatUs(v * yFactor) : (yFormat ?? String);
  const xs = rows.map((r) => r.x).filter((v): v is number => typeof v === "number" && Number.isFinite(v));
  const time = xTime && !xTicks && xs.length ? timeAxis(Math.min(...xs), Math.max(...xs)) : null;
  const xExt = xLog ? positiveExtent(rows, ["x"]) : null;
  const yRaw = yLog ? positiveExtent(rows, series) : null;
  // A little room above and below so the extreme points don't sit on the frame.
  const yExt: [number, number] | null = yRaw ? [yRaw[0] / 1.15, yRaw[1] * 1.15] : null;
  return (
    <ResponsiveContainer width="100%" height={height}>
      <LineChart data={rows} margin={{ top: 8, right: 12, bottom: 4, left: 8 }}>
        <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
        <XAxis
          dataKey="x"
          type="number"
          scale={xLog ? "log" : xTime ? "time" : "linear"}
          domain={xExt ?? ["dataMin", "dataMax"]}
          ticks={xTicks ?? time?.ticks ?? (xExt ? logTicks(xExt[0], xExt[1]) : undefined)}
          allowDecimals={!xInteger}
          tickFormatter={time?.format ?? xFormat}
          stroke={palette.muted}
        />
        <YAxis
          scale={yLog ? "log" : "linear"}
          domain={yExt ?? [0, "auto"]}
          ticks={yExt ? logTicks(yExt[0], yExt[1]) : undefined}
          allowDataOverflow={Boolean(yExt)}
          tickFormatter={yTick}
          stroke={palette.muted}
          width={yWidth}
        />
        <Tooltip
          contentStyle={{ background: palette.panel, borderColor: palette.grid }}
          labelFormatter={(v) => xFormat(Number(v))}
          formatter={(v) => (typeof v === "number" ? yTip(v) : String(v))}
        />
        <Legend />
        {series.map((s, i) => (
          <Line key={s} dataKey={s} name={s} type={step ? "stepAfter" : "linear"} stroke={palette.series[i % palette.series.length]} dot={dots} connectNulls isAnimationActive={false} />
        ))}
      </LineChart>
    </ResponsiveContainer>
  );
}
