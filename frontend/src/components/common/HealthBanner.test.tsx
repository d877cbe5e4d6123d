// @vitest-environment jsdom
import { cleanup, screen, within } from "@testing-library/react";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../../test/apiServer";
import { setOrigin } from "../../test/dom";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { renderWithClient } = await import("../../test/render");
const { HealthBanner } = await import("./HealthBanner");

function mount() {
  renderWithClient(
    <>
      <HealthBanner />
      <p>page</p>
    </>,
  );
}

const part = { ok: true, detail: "reachable" };
const job = (over: Record<string, unknown>) => ({
  job: "roll-up-recent-samples", ok: true, detail: "ok", cadence_s: 60, last_start: null, last_success: null, last_failure: null, last_error: null, failures_in_a_row: 0, ...over,
});
const health = (jobs: ReturnType<typeof job>[], over: Record<string, unknown> = {}) => ({
  ok: jobs.every((j) => j.ok), database: part, redis: part, worker: part, beat: part, rollups: { ok: true, detail: "", kinds: {} },
  worker_metrics: { ok: true, detail: "", workers: [] }, alerts: { ok: true, detail: "every rule evaluated", failing: [] as unknown[] },
  jobs: { ok: jobs.every((j) => j.ok), detail: "", jobs }, ...over,
});

afterEach(cleanup);
afterAll(() => api.close());

describe("HealthBanner", () => {
  it("names each failing job with its reason and each part that is down", async () => {
    api.route("GET /api/v1/health", () => ({
      status: 503,
      body: health([job({ ok: false, detail: "failed its last 3 runs: UndefinedTable: relation \"rollup_watermarks\" does not exist", failures_in_a_row: 3 }), job({ job: "evaluate-alert-rules" })], {
        worker: { ok: false, detail: "last heartbeat 80 s ago" },
        alerts: { ok: false, detail: "1 rule failing", failing: [{ rule_id: "r1", org_id: "o1", failures_in_a_row: 3, last_error: "KeyError: 'value'", last_failure: null }] },
      }),
    }));
    mount();
    const banner = await screen.findByRole("region", { name: "Service health" });
    const items = within(banner).getAllByRole("listitem").map((li) => li.textContent);
    expect(items).toEqual([
      "worker: last heartbeat 80 s ago",
      "alert rule r1: failed its last 3 evaluations: KeyError: 'value'",
      'job roll-up-recent-samples: failed its last 3 runs: UndefinedTable: relation "rollup_watermarks" does not exist',
    ]);
  });

  it("shows nothing when every part is ok", async () => {
    api.route("GET /api/v1/health", () => health([job({})]));
    mount();
    await screen.findByText("page");
    await vi.waitFor(() => expect(api.seen.some((s) => s.path === "/api/v1/health")).toBe(true));
    expect(screen.queryByRole("region", { name: "Service health" })).toBeNull();
  });
});
