// Backtests (POST /api/v1/alert-rules/backtest): a draft rule replayed over recorded data.
import { api as client, unwrap } from "./http";
import { toSeries } from "./alerts";
import { ruleBody, type RuleDraft } from "./alertRules";
import { arr, ms, num, obj, str } from "./decode";

export interface BacktestPoint {
  t: number;
  value: number | null;
  /** the threshold in force for this window: absolute value, k x baseline or null */
  threshold: number | null;
}

export interface BacktestSeries {
  key: string;
  name: string;
  points: BacktestPoint[];
}

export interface Firing {
  startMs: number;
  endMs: number | null;
  series: string;
  peak: number | null;
}

export interface BacktestVM {
  count: number;
  fromMs: number;
  toMs: number;
  firings: Firing[];
  /** the drawn series (the server picks the most telling ones when many match) */
  series: BacktestSeries[];
  seriesTotal: number;
  notes: string[];
}

export function toBacktest(v: unknown): BacktestVM {
  const b = obj(v);
  const firings = arr(b.firings).map((x): Firing => {
    const f = obj(x);
    const s = f.series;
    const series = typeof s === "string" ? s : Array.isArray(s) ? s.map((x) => toSeries(x).name).join(", ") : toSeries(s).name;
    return { startMs: ms(f.start ?? f.started_at) ?? 0, endMs: ms(f.end ?? f.resolved_at), series, peak: num(f.peak) };
  });
  return {
    count: num(b.count) ?? firings.length,
    fromMs: ms(b.from ?? b.start) ?? 0,
    toMs: ms(b.to ?? b.end) ?? 0,
    firings,
    seriesTotal: num(b.series_total) ?? arr(b.series).length,
    notes: arr(b.notes).map((n) => str(n)),
    series: arr(b.series).map((x) => {
      const s = obj(x);
      const named = toSeries(s);
      return {
        key: named.key,
        name: named.name,
        points: arr(s.points ?? s.windows).map((p) => {
          const o = obj(p);
          return { t: ms(o.t ?? o.time ?? o.start) ?? 0, value: num(o.value), threshold: num(o.threshold ?? o.baseline) };
        }),
      };
    }),
  };
}

// ---- calls ----

export async function backtestRule(d: RuleDraft, signal?: AbortSignal): Promise<BacktestVM> {
  return toBacktest(unwrap(await client.POST("/api/v1/alert-rules/backtest", { body: ruleBody(d), signal })));
}
