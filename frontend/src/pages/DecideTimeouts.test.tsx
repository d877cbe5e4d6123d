// @vitest-environment jsdom
import { cleanup, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../test/apiServer";
import { setOrigin } from "../test/dom";
import { AGENTS, VOCABULARIES } from "../test/fixtures";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { default: DecideTimeouts } = await import("./DecideTimeouts");
const { renderPage } = await import("../test/render");
const mount = () => renderPage(DecideTimeouts);

const SOURCE = { resolution: "raw", exact: true, from: "2026-11-27T00:00:00Z", to: "2026-11-28T00:00:00Z" };
const answer = (over: Record<string, unknown>) => ({
  status: "ok", scope: "topology_class", what: "every cross_region link", source: SOURCE, hourly_source: SOURCE, target_probability: 1 / 1_800_000,
  msg_rate_per_s: 500, false_timeouts_per_hour: 1, samples: 14_400, losses: 0, tail_samples_expected: 0.008, exact: true, quantile: 1, achievable: true,
  timeout_us: 252_000, timeout_ms: 252, warning: "only 0.008 of 14400 samples are expected beyond T", p50_ms: 180, p99_ms: 240, max_ms: 252, by_hour: [], ...over,
});

beforeEach(() => {
  api.seen.length = 0;
  api.route("GET /api/v1/auth/me", () => ({ user_id: "u1", email: "me@example.com", org_id: "o1", org_name: "acme", kind: "user", role: "viewer" }));
  api.route("GET /api/v1/agents", () => AGENTS);
  api.route("GET /api/v1/vocabularies", () => VOCABULARIES);
});
afterEach(cleanup);
afterAll(() => api.close());

describe("Timeouts page", () => {
  it("on a young fleet, gives the best rate the data supports and how long the asked one needs", async () => {
    const user = userEvent.setup({ delay: null });
    // Wrapped: the answer has a `status` field the stand-in server would take for the HTTP status.
    api.route("POST /api/v1/advisors/timeout", () => ({
      body: answer({ samples_needed: 18_000_000, time_needed_s: 18_000_000 / 14_400 * 900, best_probability: 10 / 14_400, best_timeout_us: 231_000, best_timeout_ms: 231, best_false_timeouts_per_hour: 1250, best_msg_rate_per_s: 0.4 }),
    }));
    mount();
    await user.click(await screen.findByRole("button", { name: "Find T" }));
    const note = await screen.findByRole("note", { name: "What the data supports" });
    expect(note.textContent).toContain("T = 231 ms at 1250 false timeouts per hour at 500 messages/s");
    expect(note.textContent).toContain("up to 0.4 messages/s");
    expect(note.textContent).toContain("needs 18M samples: about 13 days of data");
  });

  it("says that no amount of data helps when the losses alone exceed the asked rate", async () => {
    const user = userEvent.setup({ delay: null });
    // Wrapped: the answer has a `status` field the stand-in server would take for the HTTP status.
    api.route("POST /api/v1/advisors/timeout", () => ({
      body: answer({ achievable: false, timeout_us: null, timeout_ms: null, quantile: null, losses: 3, samples_needed: null, warning: "the loss rate (0.000208) alone exceeds the tolerated probability", best_probability: 13 / 14_400, best_timeout_us: 250_000, best_timeout_ms: 250, best_false_timeouts_per_hour: 1625, best_msg_rate_per_s: 0.31 }),
    }));
    mount();
    await user.click(await screen.findByRole("button", { name: "Find T" }));
    const note = await screen.findByRole("note", { name: "What the data supports" });
    expect(within(note).getByText(/No amount of data meets the asked rate/)).toBeTruthy();
    expect(screen.getByText("No timeout meets this rate")).toBeTruthy();
  });
});
