import { describe, expect, it } from "vitest";
import { formatAgo, formatBitsPerS, formatBytes, formatClock, formatCount, formatDay, formatInstant, formatPercent, formatSpan, formatUs, timeAxis, usAxis } from "./format";

describe("formatUs", () => {
  it("keeps microseconds below a millisecond", () => {
    expect(formatUs(412)).toBe("412 µs");
    expect(formatUs(7.25)).toBe("7.25 µs");
  });
  it("switches to milliseconds and seconds with about three significant digits", () => {
    expect(formatUs(1500)).toBe("1.5 ms");
    expect(formatUs(15_230)).toBe("15.2 ms");
    expect(formatUs(152_300)).toBe("152 ms");
    expect(formatUs(2_500_000)).toBe("2.5 s");
  });
  it("shows a dash for missing values", () => {
    expect(formatUs(null)).toBe("–");
    expect(formatUs(Number.NaN)).toBe("–");
  });
});

describe("other units", () => {
  it("formats loss ratios as percentages without losing tiny rates", () => {
    expect(formatPercent(0)).toBe("0%");
    expect(formatPercent(0.0123)).toBe("1.23%");
    expect(formatPercent(0.000001)).toBe("0.00010%");
  });
  it("formats sizes in binary units as seed 000 does", () => {
    expect(formatBytes(1024)).toBe("1 kB");
    expect(formatBytes(10 * 1024 * 1024)).toBe("10 MB");
    expect(formatBytes(512)).toBe("512 B");
  });
  it("formats counts, rates and ages", () => {
    expect(formatCount(1234)).toBe("1,234");
    expect(formatCount(52_300_000)).toBe("52.3M");
    expect(formatBitsPerS(125_000_000)).toBe("1 Gbit/s");
    expect(formatAgo(0, 90_000)).toBe("1 min ago");
  });
});

describe("formatSpan", () => {
  it("says a backtest's range in the unit people use", () => {
    expect(formatSpan(8 * 60_000)).toBe("8 min");
    expect(formatSpan(150 * 60_000)).toBe("2.5 h");
    expect(formatSpan(24 * 3_600_000)).toBe("24 h");
    expect(formatSpan(36 * 3_600_000)).toBe("1.5 days");
    expect(formatSpan(7 * 86_400_000)).toBe("7 days");
  });
});

describe("usAxis", () => {
  it("writes every tick of an axis in the unit of its largest value", () => {
    const ms = usAxis(80_000);
    expect([0, 20_000, 40_000, 80_000].map(ms)).toEqual(["0ms", "20ms", "40ms", "80ms"]);
    expect(ms(500)).toBe("0.5ms");
    const us = usAxis(900);
    expect([0, 250, 900].map(us)).toEqual(["0µs", "250µs", "900µs"]);
    expect(usAxis(2_500_000)(500_000)).toBe("0.5s");
  });
  it("keeps the small ticks of a log axis readable in its unit", () => {
    const f = usAxis(100_000);
    expect([10, 100, 1_000, 12_500].map(f)).toEqual(["0.01ms", "0.1ms", "1ms", "12.5ms"]);
  });
});

describe("timeAxis", () => {
  const t0 = Date.parse("2026-11-28T05:10:00Z");
  it("gives distinct labels to the ticks of a short span", () => {
    const a = timeAxis(t0, t0 + 90_000);
    const labels = a.ticks.map(a.format);
    expect(new Set(labels).size).toBe(labels.length);
    expect(labels[0]).toBe("05:10:00");
    expect(a.ticks.length).toBeGreaterThan(2);
  });
  it("names days by date and keeps ticks inside the span", () => {
    const day = Date.parse("2026-11-20T00:00:00Z");
    const a = timeAxis(day, day + 6 * 86_400_000);
    expect(a.ticks.map(a.format)).toEqual(["11-20", "11-21", "11-22", "11-23", "11-24", "11-25", "11-26"]);
    const h = timeAxis(t0, t0 + 6 * 3_600_000);
    for (const t of h.ticks) expect(t >= t0 && t <= t0 + 6 * 3_600_000).toBe(true);
    expect(new Set(h.ticks.map(h.format)).size).toBe(h.ticks.length);
  });
  it("dates the hours of a span over midnight", () => {
    const a = timeAxis(Date.parse("2026-11-27T20:00:00Z"), Date.parse("2026-11-28T08:00:00Z"));
    const labels = a.ticks.map(a.format);
    expect(new Set(labels).size).toBe(labels.length);
    expect(labels).toContain("11-28 00:00");
  });
});

describe("instants", () => {
  const t = Date.parse("2026-11-23T22:01:40.600Z");
  it("are written in UTC with a Z, from an instant or the API's ISO strings with any offset", () => {
    expect(formatInstant(t)).toBe("2026-11-23 22:01:40Z");
    expect(formatInstant(t, "minute")).toBe("2026-11-23 22:01Z");
    expect(formatInstant("2026-11-24T00:30:00+02:00", "minute")).toBe("2026-11-23 22:30Z");
  });
  it("give a time of day to the nearest second, or truncated to the minute, and a UTC day", () => {
    expect(formatClock(t)).toBe("22:01:41Z");
    expect(formatClock(t, "minute")).toBe("22:01Z");
    expect(formatDay(Date.parse("2026-11-23T23:59:59Z"))).toBe("11-23");
  });
});
