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
    { src: "us-east-1", dst: "eu-west-1", value: 95_000, count: 1200 },
    { src: "eu-west-1", dst: "us-east-1", value: 69_000, count: 1200 },
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
