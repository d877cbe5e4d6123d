// Sequential colour scale for heatmaps (a viridis-like ramp, readable in both themes and
// for common colour-vision deficiencies). Latencies span decades, so the scale is logarithmic.

const STOPS: [number, number, number][] = [
  [68, 1, 84],
  [72, 40, 120],
  [62, 74, 137],
  [49, 104, 142],
  [38, 130, 142],
  [31, 158, 137],
  [53, 183, 121],
  [109, 205, 89],
  [180, 222, 44],
  [253, 231, 37],
];

/** Position 0..1 of v between lo and hi, on a log scale when asked and possible. */
export function scalePosition(v: number, lo: number, hi: number, log: boolean): number {
  if (!Number.isFinite(v)) return 0;
  if (hi <= lo) return 0.5;
  let t: number;
  if (log && lo > 0 && v > 0) t = (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo));
  else t = (v - lo) / (hi - lo);
  return Math.min(1, Math.max(0, t));
}

/** Colour for position t in 0..1 as an rgb() string. */
export function rampColor(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const a = STOPS[i]!;
  const b = STOPS[i + 1]!;
  const c = a.map((av, k) => Math.round(av + (b[k]! - av) * f));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

/** Black or white text, whichever reads better on the ramp colour at t. */
export function rampTextColor(t: number): string {
  return t > 0.55 ? "#111" : "#fff";
}

/** CSS gradient of the ramp for legends. */
export function rampGradient(): string {
  return `linear-gradient(to right, ${STOPS.map((_, i) => rampColor(i / (STOPS.length - 1))).join(", ")})`;
}
