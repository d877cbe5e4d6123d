import { describe, expect, it } from "vitest";
import { metricOptions } from "../../api/alertRules";
import { toEvidence } from "../../api/alerts";
import { toBacktest } from "../../api/backtest";
import { BACKTEST, CATALOG } from "../../test/fixtures";
import { backtestRows } from "./BacktestChart";
import { formatValue, fromInput, inputUnit, toInput } from "./units";

describe("threshold units", () => {
  it("takes latency in ms and rates in % and sends the API's microseconds and ratios without float noise", () => {
    expect(fromInput("us", "20")).toBe(20_000);
    expect(fromInput("us", "0.3")).toBe(300);
    expect(fromInput("ratio", "0.1")).toBe(0.001);
    expect(fromInput("ratio", "7")).toBe(0.07);
    expect(toInput("ratio", 0.07)).toBe("7");
    expect(toInput("us", 1_500)).toBe("1.5");
    expect(inputUnit("bytes/s").label).toBe("Mbit/s");
    expect(fromInput("bytes/s", "100")).toBe(12_500_000);
  });

  it("takes each statistic's unit from the catalog: rates as ratios, silences as seconds", () => {
    const units = Object.fromEntries(metricOptions(CATALOG).flatMap((m) => m.statistics.map((s) => [`${m.id}.${s.id}`, s.unit])));
    expect(units["mesh_rtt.loss_rate"]).toBe("ratio");
    expect(units["agent_silence.silence_s"]).toBe("s");
    expect(units["mesh_rtt.p99.99"]).toBe("us");
    expect(formatValue("ratio", 0.0123)).toBe("1.23%");
    expect(formatValue("us", 91_000)).toBe("91 ms");
    expect(units["path_changed.changes"]).toBe("count");
    expect(units["mesh_stretch.p50"]).toBe("x");
    expect(formatValue("x", 2.5)).toBe("2.5×");
    expect(fromInput("x", "1.8")).toBe(1.8);
    expect(inputUnit("x").label).toBe("× floor");
  });
});

describe("backtest answer", () => {
  it("maps windows, firings and series names, and rows carry the threshold in force", () => {
    const bt = toBacktest(BACKTEST);
    expect(bt.count).toBe(2);
    expect(bt.seriesTotal).toBe(1);
    expect(bt.firings[1]).toEqual({ startMs: Date.parse("2026-11-24T04:00:00Z"), endMs: null, series: "aws-use1-a-1 → aws-euw1-a-1", peak: 120_500 });
    const { rows, columns } = backtestRows(bt.series);
    expect(columns).toEqual([{ key: "s0", name: "aws-use1-a-1 → aws-euw1-a-1" }]);
    expect(rows).toHaveLength(168);
    expect(rows[10]).toMatchObject({ s0: 95_000, threshold: 80_000 });
  });

  it("keeps every series' own value per time and draws the highest threshold when baselines differ", () => {
    const { rows } = backtestRows([
      { key: "a", name: "a", points: [{ t: 1, value: 5, threshold: 10 }] },
      { key: "b", name: "b", points: [{ t: 1, value: 7, threshold: 14 }, { t: 2, value: 8, threshold: null }] },
    ]);
    expect(rows).toEqual([
      { t: 1, s0: 5, s1: 7, threshold: 14 },
      { t: 2, s1: 8, threshold: null },
    ]);
  });
});

describe("evidence", () => {
  it("reads the agreeing series with their windows and the time range", () => {
    const e = toEvidence({
      value: 95_000,
      threshold: 80_000,
      baseline: null,
      agreeing: 2,
      series: [
        { key: "a1|a2", name: "x → y", src: { id: "a1", name: "x" }, dst: { id: "a2", name: "y" }, value: 95_000, threshold: 80_000, values: [{ start: "2026-11-23T18:00:00Z", value: 95_000, threshold: 80_000, breach: true }] },
        { key: "a1|a3", name: "x → z", src: { id: "a1", name: "x" }, dst: { id: "a3", name: "z" }, value: 91_000, threshold: 80_000, values: [] },
      ],
      time_range: { from: "2026-11-23T18:00:00+00:00", to: "2026-11-23T18:02:00+00:00" },
      dashboard_path: "/pair?src=a1&dst=a2",
    });
    expect(e.agreeing.map((s) => [s.name, s.src?.id, s.dst?.id, s.value])).toEqual([
      ["x → y", "a1", "a2", 95_000],
      ["x → z", "a1", "a3", 91_000],
    ]);
    expect(e.agreeing[0]!.values[0]).toEqual({ t: Date.parse("2026-11-23T18:00:00Z"), value: 95_000, threshold: 80_000, breach: true });
    expect([e.fromMs, e.toMs]).toEqual([Date.parse("2026-11-23T18:00:00Z"), Date.parse("2026-11-23T18:02:00Z")]);
    expect(e.dashboardPath).toBe("/pair?src=a1&dst=a2");
    expect(e.decidedEarly).toBe(false);
    expect(toEvidence({ decided_early: true }).decidedEarly).toBe(true);
  });
});
