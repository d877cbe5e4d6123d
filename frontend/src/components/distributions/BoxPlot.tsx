import { Bar, CartesianGrid, ComposedChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { BoxVM } from "../../api/models";
import { formatCount, formatUs, usAxis } from "../../lib/format";
import { boxRows, interpolatePx } from "../../lib/shape";
import { useTheme } from "../../lib/theme";
import { TipBox } from "../common/ChartTooltip";

interface ShapeProps {
  x?: number;
  y?: number;
  width?: number;
  height?: number;
  payload?: BoxVM;
}

/** Box plots as in seed 003 Fig. 3: box p25–p75, median line, whiskers p5/p95, mean marker. */
export function BoxPlot({ boxes, order, log, height = 320, labels }: { boxes: BoxVM[]; order?: string[]; log: boolean; height?: number; labels?: Record<string, string> }) {
  const { palette } = useTheme();
  const rows = boxRows(boxes, order);
  const color = palette.series[0]!;
  const mean = palette.series[2]!;

  function Shape(props: ShapeProps) {
    const { x = 0, y = 0, width = 0, height: h = 0, payload } = props;
    if (!payload) return null;
    // The bar spans p5 (bottom, y+h) to p95 (top, y); the other marks are placed between them.
    const at = (v: number) => interpolatePx(v, payload.p5, payload.p95, y + h, y, log);
    const cx = x + width / 2;
    const bw = Math.max(8, width * 0.6);
    const q1 = at(payload.p25);
    const q3 = at(payload.p75);
    return (
      <g>
        <line x1={cx} x2={cx} y1={y} y2={y + h} stroke={color} />
        <line x1={cx - bw / 4} x2={cx + bw / 4} y1={y} y2={y} stroke={color} />
        <line x1={cx - bw / 4} x2={cx + bw / 4} y1={y + h} y2={y + h} stroke={color} />
        <rect x={cx - bw / 2} y={q3} width={bw} height={Math.max(1, q1 - q3)} fill={color} fillOpacity={0.25} stroke={color} />
        <line x1={cx - bw / 2} x2={cx + bw / 2} y1={at(payload.p50)} y2={at(payload.p50)} stroke={color} strokeWidth={2.5} />
        <circle cx={cx} cy={at(payload.mean)} r={4} fill="none" stroke={mean} strokeWidth={2} />
      </g>
    );
  }

  return (
    <ResponsiveContainer width="100%" height={height}>
      <ComposedChart data={rows} margin={{ top: 8, right: 12, bottom: 4, left: 8 }}>
        <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
        <XAxis dataKey="group" stroke={palette.muted} tickFormatter={(g: string) => labels?.[g] ?? g} interval={0} />
        <YAxis scale={log ? "log" : "linear"} domain={log ? ["auto", "auto"] : [0, "auto"]} tickFormatter={usAxis(Math.max(0, ...boxes.map((b) => b.p95)))} stroke={palette.muted} width={64} />
        <Tooltip
          cursor={{ fill: palette.grid, fillOpacity: 0.3 }}
          content={({ active, payload }) => {
            const b = active && payload?.[0] ? (payload[0].payload as BoxVM) : undefined;
            if (!b) return null;
            return (
              <TipBox
                title={labels?.[b.group] ?? b.group}
                rows={[
                  { name: "p95", value: formatUs(b.p95) },
                  { name: "p75", value: formatUs(b.p75) },
                  { name: "p50", value: formatUs(b.p50) },
                  { name: "p25", value: formatUs(b.p25) },
                  { name: "p5", value: formatUs(b.p5) },
                  { name: "mean", value: formatUs(b.mean), color: mean },
                  { name: "samples", value: formatCount(b.count) },
                ]}
              />
            );
          }}
        />
        <Bar dataKey="span" shape={(p: unknown) => <Shape {...(p as ShapeProps)} />} isAnimationActive={false} />
      </ComposedChart>
    </ResponsiveContainer>
  );
}
