import { describe, expect, it } from "vitest";
import { formatAgo, formatBitsPerS, formatBytes, formatCount, formatPercent, formatSpan, formatUs } from "./format";

describe("formatUs", () => {
  it("keeps microseconds below a millisecond", () => {
    expect(formatUs(412)).toBe("412 us");
    expect(formatUs(7.25)).toBe("7.25 us");
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
