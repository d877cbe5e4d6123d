// @vitest-environment jsdom
import { act, cleanup, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../test/apiServer";
import { setOrigin } from "../test/dom";
import { AGENTS, VOCABULARIES } from "../test/fixtures";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { default: Distributions } = await import("./Distributions");
const { navigate } = await import("../lib/router");
const { renderPage } = await import("../test/render");
const { queryClient } = await import("../api/queryClient");
const { agentsQuery } = await import("../api/agents");

// Two minutes of a fresh fleet inside the default hour: four 30 s windows, cross-region RTTs in ms.
const T0 = Date.parse("2026-11-28T05:10:00Z");
const SOURCE = { resolution: "raw", start: "2026-11-28T04:12:00Z", end: "2026-11-28T05:12:00Z", exact: true };
const box = (group: string, p50: number) => ({ group, p5: p50 * 0.9, p25: p50 * 0.95, p50, p75: p50 * 1.05, p95: p50 * 1.2, mean: p50, count: 240, loss_rate: 0 });

// jsdom lays nothing out: give the charts' containers a size so Recharts draws its axes.
const rect = HTMLElement.prototype.getBoundingClientRect;
beforeAll(() => {
  HTMLElement.prototype.getBoundingClientRect = function (this: HTMLElement) {
    if (this.classList.contains("recharts-responsive-container")) return { x: 0, y: 0, top: 0, left: 0, right: 800, bottom: 300, width: 800, height: 300, toJSON: () => ({}) } as DOMRect;
    return rect.call(this);
  };
});
afterAll(async () => {
  HTMLElement.prototype.getBoundingClientRect = rect;
  await api.close();
});

beforeEach(() => {
  api.seen.length = 0;
  navigate("/distributions?scale=linear");
  api.route("GET /api/v1/agents", () => AGENTS);
  api.route("GET /api/v1/vocabularies", () => VOCABULARIES);
  api.route("GET /api/v1/analytics/mesh/boxplots", () => ({ source: SOURCE, kind: "mesh", group_by: "topology_class", boxes: [box("cross_az", 1_200), box("cross_region", 68_000)] }));
  api.route("GET /api/v1/analytics/mesh/series", () => SERIES);
});
afterEach(cleanup);

const SERIES = {
    source: SOURCE,
    kind: "mesh",
    window_s: 30,
    percentiles: ["p50"],
    groups: [
      { group: ["a1", "a2"], windows: [0, 1, 2, 3].map((i) => ({ start: new Date(T0 + i * 30_000).toISOString(), samples: 60, count: 60, p50: 68_000 + i * 500, beyond: { p50: 29 } })) },
      { group: ["a1", "a3"], windows: [0, 1, 2, 3].map((i) => ({ start: new Date(T0 + i * 30_000).toISOString(), samples: 60, count: 60, p50: 70_000 - i * 400, beyond: { p50: 29 } })) },
    ],
};

function ticks(card: HTMLElement, axis: "x" | "y"): string[] {
  return [...card.querySelectorAll(`.recharts-${axis}Axis-tick-labels .recharts-cartesian-axis-tick-value`)].map((t) => t.textContent ?? "");
}

/** A request the test holds open until it lets it go. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

const seriesAsked = () => api.seen.filter((r) => r.path === "/api/v1/analytics/mesh/series").length;

function mount() {
  renderPage(Distributions);
}

describe("Distributions page", () => {
  it("labels the time axis of the pairs chart with distinct times", async () => {
    mount();
    const card = await screen.findByRole("region", { name: "Node pairs over time" });
    await waitFor(() => expect(ticks(card, "x").length).toBeGreaterThan(1));
    const labels = ticks(card, "x");
    expect(new Set(labels).size, `x ticks ${labels.join(", ")}`).toBe(labels.length);
    // The windows start on whole half-minutes: the labels name them to the second.
    expect(labels).toContain("05:10:30");
  });

  it("writes every RTT tick of a ms axis in ms, its zero included", async () => {
    mount();
    const card = await screen.findByRole("region", { name: "Node pairs over time" });
    await waitFor(() => expect(ticks(card, "y").length).toBeGreaterThan(1));
    const labels = ticks(card, "y");
    expect(labels[0]).toBe("0ms");
    for (const l of labels) expect(l, `y ticks ${labels.join(", ")}`).toMatch(/^[\d.]+ms$/);
    const boxes = await screen.findByRole("region", { name: "RTT by topology class" });
    await waitFor(() => expect(ticks(boxes, "y").length).toBeGreaterThan(1));
    for (const l of ticks(boxes, "y")) expect(l, `box y ticks ${ticks(boxes, "y").join(", ")}`).toMatch(/^[\d.]+ms$/);
  });

  it("never shows the previous class's pairs while the new ones load, and offers a Retry that asks again after an error", async () => {
    const user = userEvent.setup({ delay: null });
    mount();
    const card = await screen.findByRole("region", { name: "Node pairs over time" });
    await waitFor(() => expect(ticks(card, "x").length).toBeGreaterThan(1));
    const held = gate();
    let fail = true;
    api.route("GET /api/v1/analytics/mesh/series", async (r) => {
      if (r.query.get("topology_class") !== "cross_az") return SERIES;
      await held.opened;
      return fail ? { status: 503, body: { detail: "database unavailable" } } : SERIES;
    });
    act(() => navigate("/distributions?scale=linear&class=cross_az"));
    await waitFor(() => expect(api.seen.some((r) => r.path === "/api/v1/analytics/mesh/series" && r.query.get("topology_class") === "cross_az")).toBe(true));
    // The cross-region chart is gone as soon as the question changes.
    expect(within(card).getByRole("status").textContent).toContain("Loading");
    expect(ticks(card, "x")).toEqual([]);
    held.open();
    expect((await within(card).findByRole("alert")).textContent).toContain("database unavailable");
    fail = false;
    const before = seriesAsked();
    await user.click(within(card).getByRole("button", { name: "Retry" }));
    await waitFor(() => expect(ticks(card, "x").length).toBeGreaterThan(1));
    expect(seriesAsked()).toBeGreaterThan(before);
    expect(within(card).queryByRole("alert")).toBeNull();
  });

  it("keeps the chart on screen while an auto-refresh reloads it", async () => {
    navigate("/distributions?scale=linear&refresh=10s");
    mount();
    const card = await screen.findByRole("region", { name: "Node pairs over time" });
    await waitFor(() => expect(ticks(card, "x").length).toBeGreaterThan(1));
    const held = gate();
    const before = seriesAsked();
    api.route("GET /api/v1/analytics/mesh/series", async () => {
      await held.opened;
      return SERIES;
    });
    // The 10 s refresh asks again on its own; the old answer stays while it is pending.
    await waitFor(() => expect(seriesAsked()).toBeGreaterThan(before), { timeout: 25_000 });
    expect(ticks(card, "x").length).toBeGreaterThan(1);
    expect(within(card).queryByRole("status")).toBeNull();
    held.open();
  });

  it("names the pairs from the one cached agent list, asked for once across questions", async () => {
    mount();
    const card = await screen.findByRole("region", { name: "Node pairs over time" });
    await waitFor(() => expect(ticks(card, "x").length).toBeGreaterThan(1));
    expect(queryClient.getQueryData(agentsQuery.queryKey)?.map((a) => a.id)).toEqual(AGENTS.map((a) => a.id));
    act(() => navigate("/distributions?scale=linear&class=cross_az"));
    await waitFor(() => expect(api.seen.some((r) => r.path === "/api/v1/analytics/mesh/series" && r.query.get("topology_class") === "cross_az")).toBe(true));
    await waitFor(() => expect(ticks(card, "x").length).toBeGreaterThan(1));
    expect(api.seen.filter((r) => r.method === "GET" && r.path === "/api/v1/agents")).toHaveLength(1);
  });
});
