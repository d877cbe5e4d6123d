import { describe, expect, it } from "vitest";
import { toExperiment, toSamples, type RegionPairVM } from "../api/throughput";
import { experiment, samples, START } from "../test/throughputFixtures";
import { formatBytesSI, formatMbps, levelMarks, pairGrid, timelineRows } from "./throughput";

const row = (src: string, dst: string, proto: "tcp" | "udp", meanBps: number | null): RegionPairVM => ({ srcRegion: src, dstRegion: dst, proto, meanBps, stdBps: null, cov: null, experiments: 1, asymmetry: null, forwardBps: null, reverseBps: null });

describe("throughput shaping", () => {
  it("writes rates in Mbit/s and volumes in decimal bytes as links and bills quote them", () => {
    expect(formatMbps(850e6 / 8)).toBe("850 Mbit/s");
    expect(formatMbps(12.5e6 / 8)).toBe("12.5 Mbit/s");
    expect(formatMbps(2.5e9 / 8)).toBe("2500 Mbit/s");
    expect(formatMbps(null)).toBe("–");
    expect(formatBytesSI(10.625e9)).toBe("10.6 GB");
    expect(formatBytesSI(999)).toBe("999 B");
    expect(formatBytesSI(1.5e12)).toBe("1.50 TB");
  });

  it("puts both directions on one time axis, forward first, each second once", () => {
    const rows = timelineRows(toSamples(samples(5, 2)));
    expect(rows).toHaveLength(10);
    expect(rows[0]).toEqual({ t: START + 1000, forward: 850, reverse: null, forwardLoss: null, reverseLoss: null });
    expect(rows[2]!.forward).toBe(400);
    expect(rows[5]).toEqual({ t: START + 6000, forward: null, reverse: 800, forwardLoss: null, reverseLoss: null });
    expect(rows.map((r) => r.t)).toEqual([...rows.map((r) => r.t)].sort((a, b) => a - b));
  });

  it("draws a transition's levels over its own direction only: from its first sample to its last", () => {
    const exp = toExperiment(experiment());
    const [m] = levelMarks(exp, toSamples(samples()));
    expect(m!.transition.atMs).toBe(START + 100_000);
    expect(m!.fromMs).toBe(START + 1000);
    expect(m!.toMs).toBe(START + 300_000);
    const base = experiment();
    const switchBack = { at: new Date(START + 420_000).toISOString(), offset_s: 120, level_before_bytes_per_s: 1e8, level_after_bytes_per_s: 5e7, bytes_before: 1.2e10 };
    const rev = toExperiment(experiment({ directions: [{ ...base.directions[0]!, transitions: [] }, { ...base.directions[1]!, transitions: [switchBack] }] }));
    expect(rev.transitions.map((t) => t.direction)).toEqual(["reverse"]);
    const [r] = levelMarks(rev, toSamples(samples()));
    expect(r!.fromMs).toBe(START + 301_000);
    expect(r!.toMs).toBe(START + 600_000);
  });

  it("keeps one protocol in the matrix and spans its colours over that protocol's means only", () => {
    const g = pairGrid([row("us-east-1", "eu-west-1", "tcp", 1e8), row("eu-west-1", "us-east-1", "tcp", 5e7), row("us-east-1", "ap-south-1", "udp", 9e9)], "tcp");
    expect(g.regions).toEqual(["eu-west-1", "us-east-1"]);
    expect([g.lo, g.hi]).toEqual([5e7, 1e8]);
    expect(g.at("us-east-1", "eu-west-1")!.meanBps).toBe(1e8);
    expect(g.at("eu-west-1", "eu-west-1")).toBeUndefined();
  });
});
