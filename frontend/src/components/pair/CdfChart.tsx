import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { CdfPoint } from "../../api/models";
import { axisUs, formatUs } from "../../lib/format";
import { logTicks } from "../../lib/shape";
import { useTheme } from "../../lib/theme";
import { TipBox } from "../common/ChartTooltip";

export interface CdfSeries {
  name: string;
  points: CdfPoint[];
}

/** One or more CDFs on a log latency axis; with tail=true the y axis spans the top 5%. */
export function CdfChart({ series, tail, height = 280 }: { series: CdfSeries[]; tail: boolean; height?: number }) {
  const { palette } = useTheme();
  const all = series.flatMap((s) => s.points.map((p) => p.x_us)).filter((x) => x > 0);
  const lo = all.length ? Math.min(...all) : 1;
  const hi = all.length ? Math.max(...all) : 10;
  return (
    <ResponsiveContainer width="100%" height={height}>
      <LineChart margin={{ top: 8, right: 12, bottom: 4, left: 8 }}>
        <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
        <XAxis dataKey="x_us" type="number" scale="log" domain={[lo, hi]} ticks={logTicks(lo, hi)} allowDataOverflow tickFormatter={axisUs} stroke={palette.muted} />
        <YAxis
          dataKey="p"
          type="number"
          domain={tail ? [0.95, 1] : [0, 1]}
          allowDataOverflow
          ticks={tail ? [0.95, 0.96, 0.97, 0.98, 0.99, 1] : [0, 0.25, 0.5, 0.75, 1]}
          tickFormatter={(v: number) => (tail ? v.toFixed(2) : v.toFixed(2))}
          stroke={palette.muted}
          width={52}
        />
        <Tooltip
          content={({ active, payload }) => {
            const p = active && payload?.[0] ? (payload[0].payload as CdfPoint) : undefined;
            if (!p) return null;
            return <TipBox title={formatUs(p.x_us)} rows={[{ name: "P(RTT ≤ x)", value: p.p.toFixed(5) }]} />;
          }}
        />
        {series.length > 1 && <Legend />}
        {series.map((s, i) => (
          <Line
            key={s.name}
            data={s.points.filter((p) => p.x_us > 0)}
            dataKey="p"
            name={s.name}
            type="stepAfter"
            stroke={palette.series[i % palette.series.length]}
            dot={false}
            isAnimationActive={false}
          />
        ))}
      </LineChart>
    </ResponsiveContainer>
  );
}
