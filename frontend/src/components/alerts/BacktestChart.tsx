import { CartesianGrid, ComposedChart, Legend, Line, ReferenceArea, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { Unit } from "../../api/alertRules";
import type { BacktestSeries, Firing } from "../../api/backtest";
import { formatInstant, formatTime, maxOf, usAxis } from "../../lib/format";
import { useTheme } from "../../lib/theme";
import { TipBox } from "../common/ChartTooltip";
import { formatValue } from "./units";

export interface BacktestRow {
  t: number;
  threshold: number | null;
  [series: string]: number | null;
}

/** One row per window time: each series' value under its own column, plus the threshold in force. */
export function backtestRows(series: BacktestSeries[]): { rows: BacktestRow[]; columns: { key: string; name: string }[] } {
  const byT = new Map<number, BacktestRow>();
  const columns = series.map((s, i) => ({ key: `s${i}`, name: s.name }));
  series.forEach((s, i) => {
    for (const p of s.points) {
      let row = byT.get(p.t);
      if (!row) {
        row = { t: p.t, threshold: null };
        byT.set(p.t, row);
      }
      row[`s${i}`] = p.value;
      // Series share a threshold unless the condition is relative: draw the highest so every mark sits above it.
      if (p.threshold !== null && (row.threshold === null || p.threshold > row.threshold)) row.threshold = p.threshold;
    }
  });
  return { rows: [...byT.values()].sort((a, b) => a.t - b.t), columns };
}

/** The series' windowed values over the backtest range (steps: each point holds its span's worst value), the threshold as a dashed line and each would-be firing as a shaded band. */
export function BacktestChart({ series, firings, unit, fromMs, toMs }: { series: BacktestSeries[]; firings: Firing[]; unit: Unit; fromMs: number; toMs: number }) {
  const { palette } = useTheme();
  const { rows, columns } = backtestRows(series.slice(0, 6));
  // Start where the data starts: a new fleet has hours, not the whole 7 days, to show.
  const first = rows.find((r) => columns.some((c) => r[c.key] !== null && r[c.key] !== undefined))?.t ?? rows[0]?.t ?? fromMs;
  const last = rows[rows.length - 1]?.t ?? toMs;
  const span = last - first;
  return (
    <figure className="backtest" aria-label={`Backtest timeline with ${firings.length} firing${firings.length === 1 ? "" : "s"} marked`} style={{ margin: 0 }}>
      <ResponsiveContainer width="100%" height={260}>
        <ComposedChart data={rows.filter((r) => r.t >= first)} margin={{ top: 8, right: 12, bottom: 4, left: 8 }}>
          <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
          <XAxis dataKey="t" type="number" scale="time" domain={[first, last]} tickFormatter={(v: number) => formatTime(v, span)} stroke={palette.muted} />
          <YAxis tickFormatter={unit === "us" ? usAxis(maxOf(rows, [...columns.map((c) => c.key), "threshold"])) : (v: number) => formatValue(unit, v).replace(" ", "")} stroke={palette.muted} width={64} />
          <Tooltip
            content={({ active, payload }) => {
              const row = active && payload?.[0] ? (payload[0].payload as BacktestRow) : undefined;
              if (!row) return null;
              return (
                <TipBox
                  title={formatInstant(row.t)}
                  rows={[
                    ...columns.map((c, i) => ({ name: c.name, value: formatValue(unit, row[c.key]), color: palette.series[i % palette.series.length] })),
                    { name: "threshold", value: formatValue(unit, row.threshold), color: palette.danger },
                  ]}
                />
              );
            }}
          />
          <Legend />
          {firings.map((f, i) => (
            <ReferenceArea
              key={i}
              x1={Math.max(f.startMs, first)}
              x2={Math.min(f.endMs ?? last, last)}
              fill={palette.danger}
              fillOpacity={0.18}
              stroke={palette.danger}
              strokeOpacity={0.6}
              ifOverflow="hidden"
            />
          ))}
          {columns.map((c, i) => (
            <Line key={c.key} dataKey={c.key} name={c.name} type="stepAfter" stroke={palette.series[i % palette.series.length]} dot={false} strokeWidth={1.5} isAnimationActive={false} connectNulls={false} />
          ))}
          <Line dataKey="threshold" name="threshold" stroke={palette.danger} strokeDasharray="6 4" dot={false} strokeWidth={1.5} isAnimationActive={false} type="stepAfter" connectNulls />
        </ComposedChart>
      </ResponsiveContainer>
    </figure>
  );
}
