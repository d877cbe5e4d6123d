// @vitest-environment jsdom
import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { HeatmapVM } from "../../api/models";
import { Heatmap } from "./Heatmap";

afterEach(cleanup);

const VM: HeatmapVM = {
  level: "region",
  stat: "p99",
  keys: ["us-east-1", "eu-west-1"],
  labels: { "us-east-1": "us-east-1", "eu-west-1": "eu-west-1" },
  cells: [
    { src: "us-east-1", dst: "eu-west-1", value: 95_000, count: 1200, beyond: 12 },
    { src: "eu-west-1", dst: "us-east-1", value: 69_000, count: 1200, beyond: 12 },
  ],
};

describe("Heatmap", () => {
  it("names the firing rules in the cell they fire on and outlines only that cell", () => {
    render(<Heatmap vm={VM} onOpen={() => {}} firing={new Map([["us-east-1|eu-west-1", [{ ruleName: "EU p99" }, { ruleName: "tail" }]]])} />);
    const hot = screen.getByRole("button", { name: /us-east-1 → eu-west-1/ });
    expect(hot.getAttribute("aria-label")).toMatch(/; firing: EU p99, tail$/);
    expect(hot.className).toBe("alerting");
    const calm = screen.getByRole("button", { name: /eu-west-1 → us-east-1/ });
    expect(calm.getAttribute("aria-label")).not.toContain("firing");
    expect(calm.className).toBe("");
  });
});

describe("Heatmap tail support", () => {
  it("greys a percentile cell with fewer than 10 samples beyond it and says why", () => {
    const vm: HeatmapVM = {
      level: "region",
      stat: "p99_99",
      keys: ["eu-west-1", "ap-northeast-2"],
      labels: { "eu-west-1": "eu-west-1", "ap-northeast-2": "ap-northeast-2" },
      cells: [
        // Two minutes of two pairs: nothing beyond p99.99.
        { src: "eu-west-1", dst: "eu-west-1", value: 1_450, count: 240, beyond: 0 },
        // A day of them: 17 samples beyond it.
        { src: "ap-northeast-2", dst: "ap-northeast-2", value: 1_900, count: 172_800, beyond: 17 },
      ],
    };
    render(<Heatmap vm={vm} onOpen={() => {}} />);
    const weak = screen.getByRole("button", { name: /^eu-west-1 → eu-west-1: p99\.99 1\.45 ms/ });
    expect(weak.getAttribute("aria-label")).toMatch(/0 samples beyond: too few to support it$/);
    expect(weak.className).toContain("weak");
    const strong = screen.getByRole("button", { name: /^ap-northeast-2 → ap-northeast-2: p99\.99 1\.9 ms/ });
    expect(strong.getAttribute("aria-label")).toMatch(/17 samples beyond$/);
    expect(strong.className).not.toContain("weak");
    // Greyed (by its class), not drawn on the colour ramp like the supported cell.
    expect(weak.style.background).toBe("");
    expect(strong.style.background).toMatch(/^rgb\(/);
    expect(screen.getByLabelText("Colour legend").textContent).toContain("grey: fewer than 10 samples beyond the percentile");
  });

  it("keeps statistics without a percentile (jitter, loss) on the colour ramp", () => {
    render(<Heatmap vm={{ ...VM, stat: "jitter", cells: VM.cells.map((c) => ({ ...c, beyond: null })) }} onOpen={() => {}} />);
    for (const b of screen.getAllByRole("button")) expect(b.className).not.toContain("weak");
  });
});
