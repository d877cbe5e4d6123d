import { describe, expect, it } from "vitest";
import { rampColor, scalePosition } from "./color";
import { buildGrid } from "./heatmap";
import { boxRows, ecdf, histRows, interpolatePx, logTicks, niceStep, pivot, tailOfCdf, timelineRows } from "./shape";
import { failureRates, sizeTable, variantCompare } from "./storage";
import { resolveRange, windowSecondsFor } from "./timeRange";
import { readCookie } from "../api/http";
import type { StorageRow } from "../api/models";

describe("timeline shaping", () => {
  it("attaches the covering level-shift segment, the band and loss marks", () => {
    const pts = [0, 30_000, 60_000, 90_000].map((t, i) => ({ t, p50: 100 + i, p99: 200 + i, p9999: 300, count: 10, loss: i === 2 ? 0.1 : 0 }));
    const rows = timelineRows(pts, [
      { startMs: 0, endMs: 45_000, level_us: 100 },
      { startMs: 45_000, endMs: 90_000, level_us: 150 },
    ]);
    expect(rows.map((r) => r.level)).toEqual([100, 100, 150, 150]);
    expect(rows[0]!.band).toEqual([100, 200]);
    expect(rows[1]!.tailBand).toEqual([201, 300]);
    expect(rows.map((r) => r.lossMark)).toEqual([null, null, 0.97, null]);
  });
  it("leaves a band open where a percentile is missing", () => {
    const rows = timelineRows([{ t: 0, p50: 100, p99: null, p9999: 300, count: 1, loss: null }], []);
    expect([rows[0]!.band, rows[0]!.tailBand]).toEqual([null, null]);
  });
});

describe("distributions", () => {
  it("builds an empirical CDF with ties collapsed and cuts its tail", () => {
    const c = ecdf([3, 1, 2, 2]);
    expect(c).toEqual([
      { x_us: 1, p: 0.25 },
      { x_us: 2, p: 0.75 },
      { x_us: 3, p: 1 },
    ]);
    const many = ecdf(Array.from({ length: 100 }, (_, i) => i + 1));
    const tail = tailOfCdf(many, 0.05);
    expect(tail[0]!.p).toBeLessThan(0.95);
    expect(tail[1]!.p).toBeGreaterThanOrEqual(0.95);
    expect(tail).toHaveLength(7);
  });
  it("gives histogram bins their mid-points and shares", () => {
    const h = histRows([
      { lo_us: 0, hi_us: 100, count: 3 },
      { lo_us: 100, hi_us: 200, count: 1 },
    ]);
    expect(h.map((b) => [b.mid_us, b.share])).toEqual([
      [50, 0.75],
      [150, 0.25],
    ]);
  });
  it("fills empty histogram buckets between occupied ones", () => {
    const h = histRows([
      { lo_us: 0, hi_us: 10, count: 1 },
      { lo_us: 30, hi_us: 40, count: 1 },
    ]);
    expect(h.map((b) => b.count)).toEqual([1, 0, 0, 1]);
    expect(niceStep(0.0031)).toBeCloseTo(0.005);
    expect(niceStep(170)).toBe(200);
  });
  it("gathers the slowest buckets past the clip value into one overflow bucket", () => {
    const h = histRows(
      [
        { lo_us: 0, hi_us: 10, count: 5 },
        { lo_us: 10, hi_us: 20, count: 3 },
        { lo_us: 500, hi_us: 510, count: 1 },
        { lo_us: 900, hi_us: 910, count: 1 },
      ],
      20,
    );
    expect(h.map((b) => [b.lo_us, b.count, Boolean(b.overflow)])).toEqual([
      [0, 5, false],
      [10, 3, false],
      [500, 2, true],
    ]);
  });
  it("orders box plots by topology class and spans p5 to p95", () => {
    const b = (group: string) => ({ group, p5: 1, p25: 2, p50: 3, p75: 4, p95: 5, mean: 3.2, count: 9 });
    const rows = boxRows([b("cross_region"), b("self"), b("cross_az")], ["self", "same_subnet", "cross_az", "cross_region"]);
    expect(rows.map((r) => r.group)).toEqual(["self", "cross_az", "cross_region"]);
    expect(rows[0]!.span).toEqual([1, 5]);
  });
  it("places values between pixels on a log scale", () => {
    expect(interpolatePx(10, 1, 100, 200, 0, true)).toBeCloseTo(100);
    expect(interpolatePx(50, 0, 100, 200, 0, false)).toBeCloseTo(100);
  });
  it("puts log ticks at 1-2-5 of each decade", () => {
    expect(logTicks(30, 900)).toEqual([50, 100, 200, 500]);
    expect(logTicks(30, 1200)).toEqual([30, 100, 300, 1000]);
    expect(logTicks(1, 1e6)).toEqual([1, 10, 100, 1000, 10000, 100000, 1000000]);
    expect(logTicks(57_100, 86_900)).toEqual([57000, 63000, 70000, 78000, 87000].filter((v) => v >= 57_100 * 0.98 && v <= 86_900 * 1.02));
  });
  it("pivots long rows into one row per x", () => {
    const p = pivot(
      [
        { x: 2, s: "b", y: 5 },
        { x: 1, s: "a", y: 1 },
        { x: 2, s: "a", y: 2 },
      ],
      (r) => r.x,
      (r) => r.s,
      (r) => r.y,
    );
    expect(p.series).toEqual(["a", "b"]);
    expect(p.rows).toEqual([
      { x: 1, a: 1 },
      { x: 2, b: 5, a: 2 },
    ]);
  });
});

describe("heatmap", () => {
  it("collects every key and a log colour domain from the cells", () => {
    const g = buildGrid({
      level: "region",
      stat: "p50",
      keys: ["us-east-1"],
      labels: {},
      cells: [
        { src: "us-east-1", dst: "eu-west-1", value: 80_000, count: 5, beyond: null },
        { src: "eu-west-1", dst: "eu-west-1", value: 800, count: 5, beyond: null },
      ],
    });
    expect(g.rows).toEqual(["eu-west-1", "us-east-1"]);
    expect([g.lo, g.hi, g.log]).toEqual([800, 80_000, true]);
    expect(g.at("us-east-1", "eu-west-1")!.value).toBe(80_000);
    expect(g.at("eu-west-1", "us-east-1")).toBeUndefined();
    expect(scalePosition(8000, 800, 80_000, true)).toBeCloseTo(0.5);
    expect(rampColor(0)).toBe("rgb(68, 1, 84)");
  });
});

describe("storage tables", () => {
  const row = (provider: string, op: string, variant: string, size: number, p50: number, failures = 0): StorageRow => ({
    provider,
    target: provider,
    op,
    variant,
    size_bytes: size,
    count: 10,
    failures,
    p50_us: p50,
    p50_adjusted_us: p50 - 100,
    p90_us: null,
    per_bit_ns: null,
    per_bit_adjusted_ns: null,
  });
  const rows = [row("s3", "put", "plain", 1024, 1000, 1), row("azure", "put", "plain", 1024, 2000), row("s3", "put", "gzip9", 1024, 900), row("s3", "get", "plain", 1024, 500, 2)];
  it("pivots medians into a size × provider table, raw or RTT-adjusted", () => {
    const t = sizeTable(rows, "put", "plain", false);
    expect(t.providers).toEqual(["azure", "s3"]);
    expect(t.value(1024, "s3")).toBe(1000);
    expect(sizeTable(rows, "put", "plain", true).value(1024, "s3")).toBe(900);
  });
  it("sums failures per provider and op", () => {
    expect(failureRates(rows).find((f) => f.provider === "s3" && f.op === "put")).toMatchObject({ count: 20, failures: 1, rate: 0.05 });
  });
  it("compares variants side by side, raw or RTT-adjusted", () => {
    expect(variantCompare(rows, "put", "plain", "gzip9", false)).toEqual([{ provider: "s3", size_bytes: 1024, a_us: 1000, b_us: 900 }]);
    expect(variantCompare(rows, "put", "plain", "gzip9", true)).toEqual([{ provider: "s3", size_bytes: 1024, a_us: 900, b_us: 800 }]);
  });
});

describe("time ranges and cookies", () => {
  it("resolves presets relative to now and rejects inverted custom ranges", () => {
    expect(resolveRange({ range: "1h" }, 10_000_000)).toMatchObject({ fromMs: 10_000_000 - 3_600_000, toMs: 10_000_000 });
    const bad = resolveRange({ range: "custom", from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z" }, 10_000_000);
    expect(bad.label).toBe("last 1 h");
  });
  it("uses 30 s windows unless the range would give too many points", () => {
    expect(windowSecondsFor(3_600_000)).toBe(30);
    expect(windowSecondsFor(86_400_000)).toBe(300);
  });
  it("reads the CSRF cookie among others", () => {
    expect(readCookie("sw_csrf", "a=1; sw_csrf=abc%3D; b=2")).toBe("abc=");
    expect(readCookie("sw_csrf", "a=1")).toBeNull();
  });
});
