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
const { PathView } = await import("./PathView");

const SRC = "00000000-0000-4000-8000-000000000001";
const DST = "00000000-0000-4000-8000-000000000002";
const hop = (ttl: number, addrs: string[], med: number, reached = false) => ({
  ttl, addrs, sent: 3, lost: addrs.length ? 0 : 3, rtt_min_us: addrs.length ? med - 20 : null, rtt_med_us: addrs.length ? med : null, rtt_max_us: addrs.length ? med + 30 : null, reached,
});
const OLD = [hop(1, ["10.0.0.1"], 400), hop(2, ["10.0.1.1"], 2_000), hop(3, ["203.0.113.9"], 4_000, true)];
const NEW = [hop(1, ["10.0.0.1"], 400), hop(2, ["10.9.9.1"], 6_000), hop(3, ["10.9.9.2"], 8_000), hop(4, ["203.0.113.9"], 9_000, true)];
const path = (id: string, hops: typeof OLD, first: string, last: string, traces: number) => ({ id, src_agent_id: SRC, dst_agent_id: DST, first_seen: first, last_seen: last, traces, reached: true, hops });
const P_OLD = path("p-old", OLD, "2026-11-29T08:00:00Z", "2026-11-29T08:10:00Z", 2);
const P_NEW = path("p-new", NEW, "2026-11-29T08:20:00Z", "2026-11-29T08:30:00Z", 2);
const trace = (id: string, at: string, hops: typeof OLD, pathId: string) => ({
  id, src_agent_id: SRC, dst_agent_id: DST, dst_address: "203.0.113.9", started_at: at, proto: "tcp", trigger: "schedule", reached: true, elapsed_ms: 30, path_id: pathId, hops,
});
const TRACES = [
  trace("t4", "2026-11-29T08:30:00Z", NEW, "p-new"),
  trace("t3", "2026-11-29T08:20:00Z", NEW, "p-new"),
  trace("t2", "2026-11-29T08:10:00Z", OLD, "p-old"),
  trace("t1", "2026-11-29T08:00:00Z", OLD, "p-old"),
];

const me = (role: string) => ({ user_id: "u1", email: "me@example.com", org_id: "o1", org_name: "acme", kind: "user", role });

beforeEach(() => {
  api.seen.length = 0;
  api.route("GET /api/v1/auth/me", () => me("admin"));
  api.route("POST /api/v1/analytics/paths/requests", () => ({ status: 202, body: { id: "r1", expires_at: "2026-11-29T09:10:00Z" } }));
  api.route("GET /api/v1/analytics/paths/current", () => ({ path: P_NEW }));
  api.route("GET /api/v1/analytics/paths/traces", () => ({ traces: TRACES }));
  // The server's diff: t2 (old path) against t3 (new) differs from hop 2; traces of one path do not.
  api.route("GET /api/v1/analytics/paths/diff", ({ query: q }) => {
    const oldPath = (id: string | null) => id === "t1" || id === "t2";
    const same = oldPath(q.get("a")) === oldPath(q.get("b"));
    return { a: q.get("a"), b: q.get("b"), same_path: same, diff_ttl: same ? null : 2, differing_ttls: same ? [] : [2, 3, 4], added_rtt_us: same ? null : 4_000 };
  });
  api.route("GET /api/v1/analytics/paths/changes", () => ({
    changes: [{ at: "2026-11-29T08:20:00Z", src_agent_id: SRC, dst_agent_id: DST, from_path: P_OLD, to_path: P_NEW, diff_ttl: 2, differing_ttls: [2, 3, 4], parting_after: ["10.0.0.1"], added_rtt_us: 4_000 }],
  }));
});
afterEach(cleanup);
afterAll(() => api.close());

const pair = () => ({ fromMs: Date.parse("2026-11-29T08:00:00Z"), toMs: Date.parse("2026-11-29T09:00:00Z"), src: SRC, dst: DST });

describe("Path", () => {
  it("shows the current path hop by hop, the change in range, and the traces either side of it compared", async () => {
    renderWithClient(<PathView pair={pair} rangeKey="r" refetchInterval={false} />);
    const card = await screen.findByRole("region", { name: "Path" });
    const current = await within(card).findByRole("table", { name: "Current path" });
    const rows = within(current).getAllByRole("row").slice(1).map((r) => within(r).getAllByRole("cell").map((c) => c.textContent));
    expect(rows.map((r) => r[1])).toEqual(["10.0.0.1", "10.9.9.1", "10.9.9.2", "203.0.113.9 (destination)"]);
    const changes = await within(card).findByRole("list", { name: "Path changes" });
    expect(within(changes).getByRole("listitem").textContent).toMatch(/the path changed from hop 2 \(after 10\.0\.0\.1\), \+4(\.0)?\s?ms there$/);
    const compared = await within(card).findByRole("table", { name: "Two traces compared" });
    // The defaults are the last trace of the old path and the first of the new.
    expect((within(card).getByRole("combobox", { name: "Earlier trace" }) as HTMLSelectElement).value).toBe("t2");
    expect((within(card).getByRole("combobox", { name: "Later trace" }) as HTMLSelectElement).value).toBe("t3");
    await within(card).findByText(/3 hops differ, \+4(\.0)?\s?ms at hop 2/);
    expect(within(compared).getAllByRole("row", { name: /differs/ }).map((r) => r.getAttribute("aria-label"))).toEqual(["hop 2 differs", "hop 3 differs", "hop 4 differs"]);
    // Two traces of one path: nothing differs.
    await userEvent.selectOptions(within(card).getByRole("combobox", { name: "Earlier trace" }), "t3");
    await userEvent.selectOptions(within(card).getByRole("combobox", { name: "Later trace" }), "t4");
    expect(await within(card).findByText(/the same path/)).toBeTruthy();
    expect(within(compared).queryAllByRole("row", { name: /differs/ })).toHaveLength(0);
  });

  it("lets an admin ask for a trace now, and offers a viewer none", async () => {
    renderWithClient(<PathView pair={pair} rangeKey="r3" refetchInterval={false} />);
    const card = await screen.findByRole("region", { name: "Path" });
    await userEvent.click(await within(card).findByRole("button", { name: "Trace now" }));
    expect(await within(card).findByRole("status")).toHaveProperty("textContent", "Asked: the agent traces at its next config poll (within 30 s).");
    expect(api.seen.find((r) => r.method === "POST")?.body).toEqual({ src: SRC, dst: DST });
    cleanup();
    api.route("GET /api/v1/auth/me", () => me("viewer"));
    renderWithClient(<PathView pair={pair} rangeKey="r4" refetchInterval={false} />);
    await screen.findByRole("table", { name: "Current path" });
    expect(screen.queryByRole("button", { name: "Trace now" })).toBeNull();
  });

  it("says when the pair has not been traced yet", async () => {
    api.route("GET /api/v1/analytics/paths/current", () => ({ path: null }));
    api.route("GET /api/v1/analytics/paths/traces", () => ({ traces: [] }));
    api.route("GET /api/v1/analytics/paths/changes", () => ({ changes: [] }));
    renderWithClient(<PathView pair={pair} rangeKey="r2" refetchInterval={false} />);
    expect(await screen.findByText(/No trace of this pair yet/)).toBeTruthy();
  });
});
