// @vitest-environment jsdom
import { cleanup, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../../test/apiServer";
import { setOrigin } from "../../test/dom";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { renderWithClient } = await import("../../test/render");
const { RegionMap } = await import("./RegionMap");
const { mapOf } = await import("../../api/geography");

const SOURCE = { resolution: "raw", exact: true, start: "2026-11-29T02:00:00Z", end: "2026-11-29T03:00:00Z" };
const place = (provider: string, region: string, metro: string, lat: number, lon: number) => ({ provider, region, location: region, metro, lat, lon, source: "catalog" as const });
const PLACES = [
  place("aws", "eu-west-2", "london", 51.51, -0.13),
  place("gcp", "europe-west2", "london", 51.51, -0.13),
  place("aws", "us-east-1", "northern-virginia", 39.04, -77.49),
  place("aws", "ap-southeast-1", "singapore", 1.35, 103.82),
  place("gcp", "asia-southeast1", "singapore", 1.34, 103.71),
];
const pair = (sp: string, src: string, sm: string, dp: string, dst: string, dm: string, p50: number, km: number) => ({
  src_provider: sp, src, dst_provider: dp, dst, src_metro: sm, dst_metro: dm, distance_km: km, floor_us: km * 10, p50_us: p50, stretch: p50 / (km * 10),
});
const PAIRS = [
  pair("aws", "eu-west-2", "london", "aws", "ap-southeast-1", "singapore", 288_000, 10_860),
  pair("gcp", "europe-west2", "london", "gcp", "asia-southeast1", "singapore", 165_000, 10_860),
  pair("aws", "eu-west-2", "london", "aws", "us-east-1", "northern-virginia", 76_000, 5_920),
];
const DETOUR = {
  src: "eu-west-2", dst: "ap-southeast-1", src_place: "london", dst_place: "singapore", via: "northern-virginia", via_regions: ["aws/us-east-1"],
  src_provider: "aws", dst_provider: "aws", direct_us: 288_000, via_us: 291_000, legs_us: [76_000, 215_000], via_ratio: 1.01, evidence: ["comparison", "geography"],
  best_alternative_us: 165_000, alternative: { src: "europe-west2", dst: "asia-southeast1", src_provider: "gcp", dst_provider: "gcp" }, excess: 1.75, floor_us: 108_600, stretch: 2.65,
};

beforeEach(() => {
  api.seen.length = 0;
  api.route("GET /api/v1/geography/places", () => ({ catalog_as_of: "2026-11", fibre_rtt_us_per_km: 10, places: PLACES, unplaced: [] }));
  api.route("GET /api/v1/analytics/mesh/stretch", () => ({ source: SOURCE, fibre_rtt_us_per_km: 10, pairs: PAIRS, unplaced: [{ provider: "onprem", region: "lab-1" }] }));
  api.route("GET /api/v1/analytics/mesh/detours", () => ({ source: SOURCE, level: "region", tolerance: 0.05, min_excess: 1.25, max_stretch: 2, detours: [DETOUR] }));
});
afterEach(cleanup);
afterAll(() => api.close());

const range = () => ({ fromMs: Date.parse("2026-11-29T02:00:00Z"), toMs: Date.parse("2026-11-29T03:00:00Z") });

describe("Regions on the map", () => {
  it("lists the paths farthest from physics and the detours with their evidence, and names what it cannot place", async () => {
    renderWithClient(<RegionMap range={range} rangeKey="r" />);
    const card = await screen.findByRole("region", { name: "Regions on the map" });
    const stretch = await within(card).findByRole("list", { name: "Paths by stretch" });
    const rows = within(stretch).getAllByRole("listitem").map((li) => li.textContent ?? "");
    expect(rows[0]).toMatch(/^aws\/eu-west-2 → aws\/ap-southeast-1: 288\s?ms over 10,860 km, 2\.65× its floor of 109\s?ms$/);
    expect(rows).toHaveLength(3);
    const detours = await within(card).findByRole("list", { name: "Detours" });
    expect(within(detours).getByRole("listitem").textContent).toMatch(/goes through northern-virginia \(aws\/us-east-1\): 288\s?ms, the route through it 291\s?ms, 2\.65× its physical floor; evidence: comparison and geography$/);
    expect(within(card).getByText(/Not on the map \(no place for their region\): onprem\/lab-1/)).toBeTruthy();
    expect(api.seen.find((r) => r.path.endsWith("/mesh/detours"))?.query.get("start")).toBe("2026-11-29T02:00:00.000Z");
    // The colour choice says what the colours mean.
    await userEvent.click(within(card).getByRole("button", { name: "p50 RTT" }));
    expect(within(card).getByText(/Colour: p50 RTT from 76\s?ms to 288\s?ms/)).toBeTruthy();
  });

  it("draws one link per pair of metros, coloured by its slowest path", () => {
    const { metros, links } = mapOf(PLACES, PAIRS);
    expect(metros.map((m) => [m.metro, m.regions])).toEqual([
      ["london", ["aws/eu-west-2", "gcp/europe-west2"]],
      ["northern-virginia", ["aws/us-east-1"]],
      ["singapore", ["aws/ap-southeast-1", "gcp/asia-southeast1"]],
    ]);
    const london_sg = links.find((l) => l.a === "london" && l.b === "singapore")!;
    expect([london_sg.paths, london_sg.p50Us]).toEqual([2, 288_000]);
    expect(links).toHaveLength(2);
  });
});
