// @vitest-environment jsdom
import { cleanup, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../test/apiServer";
import { setOrigin } from "../test/dom";
import { AGENTS } from "../test/fixtures";
import { AZ_PAIRS, BUDGET, DEGRADATIONS, PAIRS, SETTINGS, experiment, listed, samples } from "../test/throughputFixtures";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { renderWithClient } = await import("../test/render");
const { default: Throughput } = await import("./Throughput");
const { navigate } = await import("../lib/router");

function mount() {
  renderWithClient(<Throughput />);
}

const me = (role: string) => ({ user_id: "u1", email: "me@example.com", org_id: "o1", org_name: "acme", kind: "user", role });

beforeEach(() => {
  api.seen.length = 0;
  navigate("/throughput?range=7d");
  api.route("GET /api/v1/auth/me", () => me("admin"));
  api.route("GET /api/v1/agents", () => AGENTS);
  api.route("GET /api/v1/throughput/pairs", () => PAIRS);
  api.route("GET /api/v1/throughput/experiments", () => [listed(), listed({ id: "e2", initiator_agent_id: "a2", responder_agent_id: "a3", start_at: "2026-11-22T10:00:00Z", origin: "manual" })]);
  // Wrapped: an experiment has a `status` field the stand-in server would take for the HTTP status.
  api.route("GET /api/v1/throughput/experiments/e1", () => ({ body: experiment() }));
  api.route("GET /api/v1/throughput/experiments/e1/samples", () => samples());
  api.route("GET /api/v1/throughput/az-pairs", () => AZ_PAIRS);
  api.route("GET /api/v1/throughput/degradations", () => DEGRADATIONS);
  api.route("GET /api/v1/throughput/budget", () => BUDGET);
  api.route("GET /api/v1/throughput/settings", () => SETTINGS);
});
afterEach(cleanup);
afterAll(() => api.close());

describe("Throughput page", () => {
  it("draws the region-pair matrix per protocol with labelled cells, and a cell opens the pair's experiments", async () => {
    const user = userEvent.setup({ delay: null });
    mount();
    const matrix = await screen.findByRole("table", { name: "TCP throughput by region pair" });
    const cell = within(matrix).getByRole("button", { name: "us-east-1 → eu-west-1: TCP mean 550 Mbit/s, σ 40.0 Mbit/s, CoV 0.073, 6 experiments" });
    expect(cell.textContent).toBe("550");
    expect(within(matrix).getByRole("button", { name: /^eu-west-1 → us-east-1: TCP mean 800 Mbit\/s/ })).toBeTruthy();
    // Both experiments listed before a pair is chosen; the intra-region one goes when the pair is.
    expect(within(await screen.findByRole("table", { name: "Experiments" })).getAllByRole("row")).toHaveLength(3);
    cell.focus();
    await user.keyboard("{Enter}");
    expect(new URLSearchParams(window.location.search).get("src")).toBe("us-east-1");
    expect(new URLSearchParams(window.location.search).get("dst")).toBe("eu-west-1");
    await screen.findByRole("heading", { name: /Experiments us-east-1 ⇄ eu-west-1/ });
    const rows = within(await screen.findByRole("table", { name: "Experiments" })).getAllByRole("row");
    expect(rows).toHaveLength(2);
    expect(rows[1]!.textContent).toBe("2026-11-23 20:00:00Zaws-use1-a-1 → aws-euw1-a-1TCP2 × 300 sdone52.0 GB, $1.04schedulerTimeline");
    expect(screen.getByText(/Agent pairs: aws-use1-a-1 → aws-euw1-a-1 TCP 4 experiments/)).toBeTruthy();

    await user.click(screen.getByRole("button", { name: "UDP" }));
    const udp = await screen.findByRole("table", { name: "UDP throughput by region pair" });
    expect(within(udp).getAllByRole("button")).toHaveLength(1);
    expect(within(udp).getByRole("button").getAttribute("aria-label")).toContain("UDP mean 480 Mbit/s");
  });

  it("opens an experiment: its timeline names the high→low switch at its second with both levels, and its stats per direction", async () => {
    const user = userEvent.setup({ delay: null });
    mount();
    await user.click(await screen.findByRole("button", { name: "Open experiment aws-use1-a-1 → aws-euw1-a-1 at 2026-11-23 20:00:00Z" }));
    expect(new URLSearchParams(window.location.search).get("exp")).toBe("e1");
    const chart = await screen.findByRole("img", { name: /Per-second throughput of aws-use1-a-1 ⇄ aws-euw1-a-1/ });
    expect(chart.getAttribute("aria-label")).toContain("forward aws-use1-a-1 → aws-euw1-a-1: at 20:01:40Z (100 s in), 850 Mbit/s → 400 Mbit/s, after 10.6 GB");
    const transitions = screen.getByRole("list", { name: "Transitions" });
    expect(within(transitions).getAllByRole("listitem")).toHaveLength(1);
    const stats = screen.getByRole("table", { name: "Experiment statistics" });
    const [, fwd, rev] = within(stats).getAllByRole("row");
    expect(fwd!.textContent).toBe("forward aws-use1-a-1 → aws-euw1-a-1550 Mbit/s850 Mbit/s400 Mbit/s0.3820.6 GB");
    expect(rev!.textContent).toContain("reverse aws-euw1-a-1 → aws-use1-a-1800 Mbit/s");
    expect(rev!.textContent).toContain("30.0 GB");
  });

  it("says why a missed experiment stored nothing", async () => {
    const why = "the initiator aws-use1-a-1 has its throughput probe off";
    api.route("GET /api/v1/throughput/experiments", () => [listed({ status: "missed", missed_reason: why })]);
    mount();
    const table = await screen.findByRole("table", { name: "Experiments" });
    const row = (await within(table).findAllByRole("row"))[1]!;
    expect(within(row).getByText(why)).toBeTruthy();
    expect(row.textContent).toContain(`missed${why}`);
  });

  it("shows the asymmetry, AZ-pair and degradation tables", async () => {
    mount();
    const asym = await screen.findByRole("table", { name: "Direction asymmetry" });
    const rows = within(asym).getAllByRole("row");
    expect(rows[1]!.textContent).toBe("us-east-1 → eu-west-1TCP550 Mbit/s800 Mbit/s0.688");
    expect(within(rows[1]!).getByText("0.688").className).toContain("warn");
    const az = await screen.findByRole("table", { name: "AZ pairs" });
    expect(within(az).getAllByRole("row")[1]!.textContent).toBe(
      "us-east-1 → eu-west-1TCPus-east-1a → eu-west-1a: 550 Mbit/s (4); us-east-1a → eu-west-1b: 700 Mbit/s (2)us-east-1a → eu-west-1a vs us-east-1a → eu-west-1b: 0.21 over 2 h",
    );
    const deg = await screen.findByRole("table", { name: "Long degradations" });
    expect(within(deg).getAllByRole("row")[1]!.textContent).toBe("aws-use1-a-1 → aws-euw1-b-1 (us-east-1 → eu-west-1)TCP2026-11-22 02:00:00Z2026-11-22 07:00:00Z200 Mbit/s700 Mbit/s5");
  });

  it("shows the month's budget used, scheduled and left in bytes and cost, and what the scheduler refused", async () => {
    mount();
    const card = await screen.findByRole("region", { name: "Egress budget" });
    await within(card).findByText(/^120 GB/);
    expect(card.textContent).toContain("used120 GB, $2.40");
    expect(card.textContent).toContain("scheduled30.0 GB, $0.60");
    expect(card.textContent).toContain("left350 GB");
    expect(card.textContent).toContain("estimated cost$3.00 of $10.00");
    expect(card.textContent).toContain("cost left$7.00");
    expect((within(card).getByRole("meter", { name: "Budget used and scheduled" }) as HTMLMeterElement).value).toBeCloseTo(0.3);
    expect(within(card).getByRole("list", { name: "Refused experiments" }).textContent).toBe("aws-use1-a-1 → aws-euw1-b-1 TCP (2 experiments): over the monthly budget");
  });

  it("shows a viewer no admin controls and never asks for the settings", async () => {
    api.route("GET /api/v1/auth/me", () => me("viewer"));
    mount();
    await screen.findByRole("region", { name: "Egress budget" });
    await screen.findByRole("table", { name: "TCP throughput by region pair" });
    expect((await screen.findByRole("note")).textContent).toBe("Experiment settings and manual runs need the admin role.");
    expect(screen.queryByRole("form", { name: "Throughput settings" })).toBeNull();
    expect(screen.queryByRole("form", { name: "Run an experiment now" })).toBeNull();
    expect(screen.queryByRole("button", { name: /Run an experiment now|Save settings/ })).toBeNull();
    expect(api.seen.some((s) => s.path === "/api/v1/throughput/settings")).toBe(false);
  });

  it("saves the settings in the API's units and shows a 422 beside its field", async () => {
    const user = userEvent.setup({ delay: null });
    let reject = true;
    api.route("PUT /api/v1/throughput/settings", (r) =>
      reject ? { status: 422, body: { detail: [{ loc: ["body", "monthly_budget_bytes"], msg: "below the 120 GB already used this month", type: "value_error" }] } } : (r.body as object),
    );
    mount();
    const form = await screen.findByRole("form", { name: "Throughput settings" });
    const budget = within(form).getByRole("spinbutton", { name: "Monthly budget (GB)" });
    expect((budget as HTMLInputElement).value).toBe("500");
    await user.clear(budget);
    await user.type(budget, "250");
    await user.selectOptions(within(form).getByRole("combobox", { name: "Protocol" }), "both");
    const rate = within(form).getByRole("spinbutton", { name: "UDP rate (Mbit/s)" });
    await user.clear(rate);
    await user.type(rate, "800");
    const streams = within(form).getByRole("spinbutton", { name: "TCP streams" });
    await user.clear(streams);
    await user.type(streams, "8");
    await user.click(within(form).getByRole("checkbox", { name: "Schedule experiments" }));
    await user.click(within(form).getByRole("button", { name: "Save settings" }));
    const err = await within(form).findByRole("alert");
    expect(err.textContent).toBe("below the 120 GB already used this month");
    expect(budget.getAttribute("aria-invalid")).toBe("true");
    const { updated_at: _stamp, ...body } = SETTINGS;
    expect(api.seen.filter((s) => s.method === "PUT").at(-1)!.body).toEqual({ ...body, enabled: false, monthly_budget_bytes: 250e9, default_proto: "both", udp_rate_bits_per_s: 800_000_000, streams: 8 });

    reject = false;
    await user.clear(budget);
    await user.type(budget, "150");
    await user.click(within(form).getByRole("button", { name: "Save settings" }));
    expect((await within(form).findByRole("status")).textContent).toBe("Saved.");
    expect(within(form).queryByRole("alert")).toBeNull();
    expect((api.seen.filter((s) => s.method === "PUT").at(-1)!.body as { monthly_budget_bytes: number }).monthly_budget_bytes).toBe(150e9);
  });

  it("runs an experiment now between two agents, and shows why the server refused one", async () => {
    const user = userEvent.setup({ delay: null });
    let refuse = true;
    api.route("POST /api/v1/throughput/experiments", (r) =>
      refuse
        ? { status: 422, body: { detail: "aws-use1-a-1 is in another experiment until 2026-11-23T20:10:00Z" } }
        : { status: 201, body: listed({ id: "e9", ...(r.body as object), start_at: "2026-11-23T21:00:05Z", status: "scheduled", origin: "manual" }) },
    );
    api.route("GET /api/v1/throughput/experiments/e9", () => ({ body: experiment({ id: "e9", proto: "udp", status: "scheduled", directions: [], asymmetry: null }) }));
    api.route("GET /api/v1/throughput/experiments/e9/samples", () => ({ directions: [] }));
    mount();
    const form = await screen.findByRole("form", { name: "Run an experiment now" });
    // The fleet's three agents and the placeholder.
    await waitFor(() => expect(within(within(form).getByRole("combobox", { name: "Initiator" })).getAllByRole("option")).toHaveLength(4));
    await user.selectOptions(within(form).getByRole("combobox", { name: "Initiator" }), "a1");
    await user.selectOptions(within(form).getByRole("combobox", { name: "Responder" }), "a2");
    await user.selectOptions(within(form).getByRole("combobox", { name: "Protocol" }), "udp");
    await user.click(within(form).getByRole("button", { name: "Run an experiment now" }));
    expect((await within(form).findByRole("alert")).textContent).toBe("Not scheduled: aws-use1-a-1 is in another experiment until 2026-11-23T20:10:00Z");
    expect(api.seen.find((s) => s.method === "POST")!.body).toEqual({ initiator_agent_id: "a1", responder_agent_id: "a2", proto: "udp", start_at: null });

    refuse = false;
    await user.click(within(form).getByRole("button", { name: "Run an experiment now" }));
    expect((await within(form).findByRole("status")).textContent).toContain("Scheduled aws-use1-a-1 → aws-euw1-a-1 (UDP) at 2026-11-23 21:00:05Z");
    await waitFor(() => expect(new URLSearchParams(window.location.search).get("exp")).toBe("e9"));
  });
});
