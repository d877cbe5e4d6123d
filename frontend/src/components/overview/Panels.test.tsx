// @vitest-environment jsdom
import { cleanup, screen, within } from "@testing-library/react";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../../test/apiServer";
import { setOrigin } from "../../test/dom";
import { AGENTS, alert } from "../../test/fixtures";
import { DEGRADATIONS } from "../../test/throughputFixtures";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { renderWithClient } = await import("../../test/render");
const { OverviewPanels } = await import("./Panels");

const NOW = Date.parse("2026-11-23T20:00:00Z");
const SOURCE = { resolution: "5m", exact: false, from: "2026-11-22T20:00:00Z", to: "2026-11-23T20:00:00Z" };
const shift = (time: string, step: number) => ({ time, window_index: 3, step, direction: step > 0 ? "up" : "down", level_before: 80_000, level_after: 80_000 + step, z: 9, confidence: 1 });

function mount() {
  renderWithClient(<OverviewPanels nowMs={NOW} />);
}

beforeEach(() => {
  api.seen.length = 0;
  const agents = AGENTS.map((a, i) => (i === 2 ? { ...a, status: "stale", last_seen: "2026-11-23T19:50:00Z" } : a));
  api.route("GET /api/v1/agents", () => agents);
  api.route("GET /api/v1/alerts", () => [alert()]);
  api.route("GET /api/v1/analytics/mesh/level-shifts", () => ({
    source: SOURCE, kind: "mesh", window_s: 300, group_by: "pair", noise: 0, cycles_removed_s: [], shifts: [], segments: [], medians: [],
    groups: [
      { group: ["a1", "a2"], noise: 100, cycles_removed_s: [], shifts: [shift("2026-11-23T18:00:00Z", 2_000)] },
      { group: ["a2", "a3"], noise: 100, cycles_removed_s: [], shifts: [shift("2026-11-23T17:00:00Z", -6_500)] },
      { group: ["a1", "a1"], noise: 100, cycles_removed_s: [], shifts: [shift("2026-11-23T16:00:00Z", 9_000)] },
    ],
  }));
  api.route("GET /api/v1/analytics/mesh/heatmap", () => ({
    source: SOURCE, kind: "mesh", level: "node", stat: "p99.99", rows: ["a1", "a2"], columns: ["a1", "a2"],
    cells: [
      { src: "a1", dst: "a2", value: 250_000, samples: 7_200, beyond: 0 },
      { src: "a2", dst: "a1", value: 90_000, samples: 720_000, beyond: 72 },
      { src: "a1", dst: "a1", value: 900_000, samples: 7_200, beyond: 0 },
    ],
  }));
  api.route("GET /api/v1/analytics/storage/comparison", (r) => ({
    source: SOURCE, by: "provider",
    rows: r.query.getAll("variant").includes("plain")
      ? [
          { provider: "s3", op: "put", size_bytes: 1024, samples: 100, failures: 4, median_latency_ms: 5, median_adj_latency_ms: 4, p90_latency_ms: 8, median_latency_per_bit_ns: 1, median_adj_latency_per_bit_ns: 1 },
          { provider: "gcs", op: "get", size_bytes: 1024, samples: 100, failures: 0, median_latency_ms: 5, median_adj_latency_ms: 4, p90_latency_ms: 8, median_latency_per_bit_ns: 1, median_adj_latency_per_bit_ns: 1 },
        ]
      : [],
  }));
  api.route("GET /api/v1/throughput/degradations", () => DEGRADATIONS);
});
afterEach(cleanup);
afterAll(() => api.close());

/** The text of each item of the named list, once it has some. */
async function items(name: string): Promise<string[]> {
  const list = await screen.findByRole("list", { name });
  return (await within(list).findAllByRole("listitem")).map((li) => li.textContent ?? "");
}

describe("Overview panels", () => {
  it("say what is firing, who is silent, the largest shifts, the worst tails with their support, storage failures and throughput drops", async () => {
    mount();
    expect(await items("Firing alerts")).toEqual([expect.stringContaining("EU p99, since 1 h ago")]);
    expect(await items("Silent agents")).toEqual(["aws-euw1-b-1 last heard 10 min ago"]);
    // Largest step first; the self-loop's is left out (it measures the host).
    await screen.findByText(/aws-euw1-a-1 → aws-euw1-b-1/);
    expect(await items("Largest level shifts")).toEqual([
      expect.stringMatching(/^aws-euw1-a-1 → aws-euw1-b-1 −6\.5\s?ms/),
      expect.stringMatching(/^aws-use1-a-1 → aws-euw1-a-1 \+2(\.0)?\s?ms/),
    ]);
    // The server fits the shifts' window to the data there is, and the panel says which.
    expect(api.seen.find((r) => r.path.endsWith("/level-shifts"))?.query.get("fit_window")).toBe("true");
    expect(screen.getByText("last 24 h, each pair's 5-minute medians")).toBeTruthy();
    const tails = await items("Worst tails");
    expect(tails).toHaveLength(2);
    expect(tails[0]).toMatch(/^aws-use1-a-1 → aws-euw1-a-1 250\s?ms 0 samples beyond: too few to support it$/);
    expect(tails[1]).toMatch(/72 samples beyond$/);
    expect(await items("Storage failures")).toEqual(["s3 PUT: 4 of 100 failed (4%)"]);
    expect((await items("Throughput drops"))[0]).toContain("aws-use1-a-1 → aws-euw1-b-1");
    const link = within(screen.getByRole("list", { name: "Largest level shifts" })).getAllByRole("link")[0]!;
    expect(link.getAttribute("href")).toContain("/pair?");
    expect(link.getAttribute("href")).toContain("src=a2");
  });
});
