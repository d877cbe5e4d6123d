import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { CartesianGrid, LabelList, ResponsiveContainer, Scatter, ScatterChart, XAxis, YAxis } from "recharts";
import type { RangeQuery } from "../../api/analytics";
import { getDetours, getPlaces, getStretch, mapOf, type Detour, type LinkVM } from "../../api/geography";
import { rampColor, scalePosition } from "../../lib/color";
import { formatUs } from "../../lib/format";
import { useTheme } from "../../lib/theme";
import { Card } from "../common/State";

type ColourBy = "p50" | "stretch";
// Stretch from 1x (physics) to 3x: well-routed paths measure 1.4-2x (docs/analysis.md).
const STRETCH_SPAN: [number, number] = [1, 3];

function linkColour(l: LinkVM, by: ColourBy, p50Span: [number, number]): string {
  if (by === "stretch") return l.stretch === null ? "#888" : rampColor(scalePosition(l.stretch, ...STRETCH_SPAN, false));
  return rampColor(scalePosition(l.p50Us, ...p50Span, true));
}

/** Stretch to two decimals: the floor's own precision (10 µs per km, metros to ~0.1°). */
const formatStretch = (x: number | null) => (x === null ? "–" : x.toFixed(2));

function detourText(d: Detour): string {
  const evidence = d.evidence.join(" and ");
  const stretch = d.stretch === null ? "" : `, ${formatStretch(d.stretch)}× its physical floor`;
  return `${d.src_provider}/${d.src} → ${d.dst_provider}/${d.dst} goes through ${d.via} (${d.via_regions.join(", ")}): ${formatUs(d.direct_us)}, the route through it ${formatUs(d.via_us)}${stretch}; evidence: ${evidence}`;
}

/** The fleet's metros on a map (longitude across, latitude up) with the links between them
 * coloured by p50 RTT or by stretch (p50 / the fibre floor over the great circle), and the
 * detours found by comparison and geography (docs/analysis.md). */
export function RegionMap({ range, rangeKey }: { range: () => RangeQuery; rangeKey: unknown }) {
  const { palette } = useTheme();
  const [by, setBy] = useState<ColourBy>("stretch");
  const places = useQuery({ queryKey: ["geography", "places"], queryFn: ({ signal }) => getPlaces(signal), staleTime: 300_000 });
  const stretch = useQuery({ queryKey: ["mesh", "stretch", rangeKey], queryFn: ({ signal }) => getStretch(range(), signal) });
  const detours = useQuery({ queryKey: ["mesh", "detours", rangeKey], queryFn: ({ signal }) => getDetours(range(), signal) });
  const error = places.error ?? stretch.error ?? detours.error;
  const map = places.data && stretch.data ? mapOf(places.data.places, stretch.data.pairs) : null;
  const p50s = map?.links.map((l) => l.p50Us) ?? [];
  const p50Span: [number, number] = p50s.length ? [Math.min(...p50s), Math.max(...p50s)] : [1, 1];
  const worst = (stretch.data?.pairs ?? []).filter((p) => p.stretch !== null).slice(0, 5);
  return (
    <Card
      title="Regions on the map"
      note="links coloured by the slowest path between two metros"
      actions={
        <span className="group" role="group" aria-label="Colour links by">
          {(["stretch", "p50"] as const).map((b) => (
            <button key={b} type="button" aria-pressed={b === by} onClick={() => setBy(b)}>
              {b === "stretch" ? "Stretch" : "p50 RTT"}
            </button>
          ))}
        </span>
      }
    >
      {error ? (
        <p className="state error">{error.message}</p>
      ) : !map ? (
        <p className="muted">Loading…</p>
      ) : map.metros.length === 0 ? (
        <p className="muted">No mesh samples between placed regions in this range.</p>
      ) : (
        <>
          <ResponsiveContainer width="100%" height={320}>
            <ScatterChart margin={{ top: 12, right: 16, bottom: 4, left: 4 }}>
              <CartesianGrid stroke={palette.grid} strokeDasharray="3 3" />
              <XAxis dataKey="lon" type="number" domain={[-180, 180]} ticks={[-180, -120, -60, 0, 60, 120, 180]} stroke={palette.muted} tickFormatter={(v: number) => `${v}°`} />
              <YAxis dataKey="lat" type="number" domain={[-60, 75]} ticks={[-60, -30, 0, 30, 60]} stroke={palette.muted} tickFormatter={(v: number) => `${v}°`} width={40} />
              {map.links.map((l) => {
                const a = map.metros.find((m) => m.metro === l.a)!;
                const b = map.metros.find((m) => m.metro === l.b)!;
                return <Scatter key={`${l.a}|${l.b}`} data={[a, b]} line={{ stroke: linkColour(l, by, p50Span), strokeWidth: 2 }} shape={() => <g />} isAnimationActive={false} />;
              })}
              <Scatter data={map.metros} fill={palette.text} isAnimationActive={false}>
                <LabelList dataKey="metro" position="top" fill={palette.text} fontSize={11} />
              </Scatter>
            </ScatterChart>
          </ResponsiveContainer>
          <p className="muted">
            {by === "stretch" ? "Colour: stretch from 1× (the fibre floor) to 3× and beyond; well-routed paths measure 1.4–2×." : `Colour: p50 RTT from ${formatUs(p50Span[0])} to ${formatUs(p50Span[1])} (log scale).`}
            {stretch.data && stretch.data.unplaced.length > 0 && ` Not on the map (no place for their region): ${stretch.data.unplaced.map((u) => `${u.provider}/${u.region}`).join(", ")}.`}
          </p>
          <div className="grid2">
            <div>
              <h3>Farthest from physics</h3>
              <ul aria-label="Paths by stretch">
                {worst.map((p) => (
                  <li key={`${p.src_provider}/${p.src}|${p.dst_provider}/${p.dst}`}>
                    {p.src_provider}/{p.src} → {p.dst_provider}/{p.dst}: {formatUs(p.p50_us)} over {Math.round(p.distance_km).toLocaleString("en")} km, {formatStretch(p.stretch)}× its floor of {formatUs(p.floor_us)}
                  </li>
                ))}
              </ul>
            </div>
            <div>
              <h3>Detours</h3>
              {detours.data && detours.data.detours.length > 0 ? (
                <ul aria-label="Detours">
                  {detours.data.detours.map((d) => (
                    <li key={`${d.src_provider}/${d.src}|${d.dst_provider}/${d.dst}`}>{detourText(d)}</li>
                  ))}
                </ul>
              ) : (
                <p className="muted">{detours.isPending ? "Loading…" : "No path goes around: none matches the route through a third place with the evidence to say so."}</p>
              )}
            </div>
          </div>
        </>
      )}
    </Card>
  );
}
