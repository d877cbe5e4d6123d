import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { CdfPoint, CdfSeries } from "../../api/models";
import { formatUs, usAxis } from "../../lib/format";
import { logTicks, tailOfCdf } from "../../lib/shape";
import { useTheme } from "../../lib/theme";
import { TipBox } from "../common/ChartTooltip";

interface Row {
  x_us: number;
  p: number;
  /** 1 - p: the share of samples slower than x (tail view) */
  q: number;
}

function prepare(points: CdfPoint[], tail: boolean): Row[] {
  const src = tail ? tailOfCdf(points, 0.05) : points;
  return src.map((p) => ({ x_us: p.x_us, p: p.p, q: 1 - p.p })).filter((r) => r.x_us > 0 && (!tail || r.q > 0));
}

/**
 * CDFs on a log latency axis. The tail view zooms into the slowest 5% and plots
 * P(RTT > x) on a log axis, so p99.9 to p99.999 are as readable as the median.
 */
export function CdfChart({ series, tail, height = 280 }: { series: CdfSeries[]; tail: boolean; height?: number }) {
  const { palette } = useTheme();
  const data = series.map((s) => ({ name: s.name, rows: prepare(s.points, tail) }));
  const xs = data.flatMap((d) => d.rows.map((r) => r.x_us));
  const lo = xs.length ? Math.min(...xs) : 1;
  const hi = xs.length ? Math.max(...xs) : 10;
  const qs = data.flatMap((d) => d.rows.map((r) => r.q)).filter((q) => q > 0);
  const qLo = qs.length ? Math.max(1e-7, Math.min(...qs)) : 1e-5;
  const yKey = tail ? "q" : "p";
  return (
    <ResponsiveContainer width="100%" height={height}>
      <LineChart margin={{ top: 8, right: 12, bottom: 4, left: 8 }}>
        <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
        <XAxis dataKey="x_us" type="number" scale="log" domain={[lo, hi]} ticks={logTicks(lo, hi)} allowDataOverflow tickFormatter={usAxis(hi)} stroke={palette.muted} />
        {tail ? (
          <YAxis
            dataKey="q"
            type="number"
            scale="log"
            domain={[qLo, 0.05]}
            allowDataOverflow
            ticks={logTicks(qLo, 0.05)}
            tickFormatter={(v: number) => v.toExponential(0)}
            stroke={palette.muted}
            width={52}
            label={{ value: "P(RTT > x)", angle: -90, position: "insideLeft", fill: palette.muted, fontSize: 11 }}
          />
        ) : (
          <YAxis dataKey="p" type="number" domain={[0, 1]} ticks={[0, 0.25, 0.5, 0.75, 1]} tickFormatter={(v: number) => v.toFixed(2)} stroke={palette.muted} width={52} />
        )}
        <Tooltip
          content={({ active, payload }) => {
            const r = active && payload?.[0] ? (payload[0].payload as Row) : undefined;
            if (!r) return null;
            return <TipBox title={formatUs(r.x_us)} rows={[{ name: "P(RTT ≤ x)", value: r.p.toFixed(5) }, { name: "P(RTT > x)", value: r.q.toExponential(2) }]} />;
          }}
        />
        {series.length > 1 && <Legend />}
        {data.map((s, i) => (
          <Line key={s.name} data={s.rows} dataKey={yKey} name={s.name} type="stepAfter" stroke={palette.series[i % palette.series.length]} dot={false} isAnimationActive={false} />
        ))}
      </LineChart>
    </ResponsiveContainer>
  );
}
