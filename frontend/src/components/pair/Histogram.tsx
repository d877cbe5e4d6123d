import { Bar, BarChart, CartesianGrid, Cell, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { HistBin } from "../../api/models";
import { formatCount, formatPercent, formatUs, usAxis } from "../../lib/format";
import { histRows } from "../../lib/shape";
import { useTheme } from "../../lib/theme";
import { TipBox } from "../common/ChartTooltip";

/** Histogram with a chosen bucket width; counts on a log axis so rare tail buckets stay visible. */
export function Histogram({ bins, logCounts, clipAbove }: { bins: HistBin[]; logCounts: boolean; clipAbove?: number }) {
  const { palette } = useTheme();
  const rows = histRows(bins, clipAbove).map((r) => ({ ...r, plotted: logCounts && r.count === 0 ? null : r.count }));
  const axisUs = usAxis(Math.max(0, ...rows.map((r) => r.mid_us)));
  return (
    <ResponsiveContainer width="100%" height={260}>
      <BarChart data={rows} margin={{ top: 8, right: 12, bottom: 4, left: 8 }} barCategoryGap={0}>
        <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
        <XAxis dataKey="mid_us" tickFormatter={(v: number, i: number) => (rows[i]?.overflow ? `≥${axisUs(v)}` : axisUs(v))} stroke={palette.muted} minTickGap={24} />
        <YAxis scale={logCounts ? "log" : "linear"} domain={logCounts ? [0.8, "auto"] : [0, "auto"]} allowDataOverflow tickFormatter={(v: number) => formatCount(v)} stroke={palette.muted} width={56} />
        <Tooltip
          content={({ active, payload }) => {
            const r = active && payload?.[0] ? (payload[0].payload as (typeof rows)[number]) : undefined;
            if (!r) return null;
            return <TipBox title={r.overflow ? `≥ ${formatUs(r.lo_us)} (slowest 0.1%)` : `${formatUs(r.lo_us)} – ${formatUs(r.hi_us)}`} rows={[{ name: "samples", value: formatCount(r.count) }, { name: "share", value: formatPercent(r.share) }]} />;
          }}
        />
        <Bar dataKey="plotted" name="samples" fill={palette.series[0]} isAnimationActive={false}>
          {rows.map((r) => (
            <Cell key={r.lo_us} fill={r.overflow ? palette.series[2] : palette.series[0]} />
          ))}
        </Bar>
      </BarChart>
    </ResponsiveContainer>
  );
}
