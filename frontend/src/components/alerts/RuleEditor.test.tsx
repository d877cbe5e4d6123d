// @vitest-environment jsdom
import { cleanup, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../../test/apiServer";
import { setOrigin } from "../../test/dom";
import { AGENTS, BACKTEST, VOCABULARIES, rule } from "../../test/fixtures";

// Typing through user-event is slow on a busy machine; the assertions wait on conditions, not time.
vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { renderWithClient } = await import("../../test/render");
const { RuleEditor } = await import("./RuleEditor");

function mount(props: Partial<Parameters<typeof RuleEditor>[0]> = {}) {
  const saved: unknown[] = [];
  renderWithClient(<RuleEditor onSaved={(r) => saved.push(r)} {...props} />);
  return saved;
}

beforeEach(() => {
  api.seen.length = 0;
  api.route("GET /api/v1/vocabularies", () => VOCABULARIES);
  api.route("GET /api/v1/agents", () => AGENTS);
  api.route("GET /api/v1/channels", () => [{ id: "c1", name: "ops slack", kind: "slack", enabled: true, config: {}, created_at: "2026-11-23T00:00:00Z", updated_at: "2026-11-23T00:00:00Z" }]);
  api.route("POST /api/v1/alert-rules/backtest", () => BACKTEST);
  api.route("POST /api/v1/alert-rules", (r) => ({ status: 201, body: rule({ ...(r.body as Record<string, unknown>), id: "new" }) }));
});
afterEach(cleanup);
afterAll(() => api.close());

const posted = (path: string) => api.seen.filter((s) => s.method === "POST" && s.path === path);

describe("RuleEditor", () => {
  it("offers the API's topology classes, labelled, and backtests with the API's value", async () => {
    // A class only this answer names proves the picker has no list of its own.
    api.route("GET /api/v1/vocabularies", () => ({ ...VOCABULARIES, topology_classes: [...VOCABULARIES.topology_classes, "cross_planet"] }));
    const user = userEvent.setup({ delay: null });
    mount();
    const input = await screen.findByRole("combobox", { name: "Topology class" });
    await user.click(input);
    const picker = screen.getByRole("listbox", { name: "Topology class" });
    const options = await within(picker).findAllByRole("option");
    expect(options.map((o) => o.dataset.value)).toEqual([...VOCABULARIES.topology_classes, "cross_planet"]);
    expect(options.map((o) => o.textContent)).toEqual(["self", "same subnet", "cross subnet", "cross AZ", "cross region", "cross provider", "cross_planet"]);
    // Typing narrows the list; a pick becomes a chip and leaves the list.
    await user.type(input, "subn");
    expect(within(picker).getAllByRole("option").map((o) => o.textContent)).toEqual(["same subnet", "cross subnet"]);
    await user.click(within(picker).getByRole("option", { name: "cross subnet" }));
    const chips = screen.getByRole("list", { name: "Topology class: selected" });
    expect(within(chips).getAllByRole("listitem").map((c) => c.textContent)).toEqual(["cross subnet×"]);
    expect(within(picker).queryByRole("option", { name: "cross subnet" })).toBeNull();
    await user.type(screen.getByRole("spinbutton", { name: "Threshold (ms)" }), "80");
    await user.click(screen.getByRole("button", { name: "Run backtest" }));
    await screen.findByText(/Would have fired/);
    const body = posted("/api/v1/alert-rules/backtest").at(-1)?.body as { scope: Record<string, unknown> };
    expect(body.scope.topology_class).toEqual(["cross_subnet"]);
    expect(api.seen.filter((s) => s.path === "/api/v1/vocabularies")).toHaveLength(1);
  });

  it("backtests the draft in the API's units and shows the count, the firings and the marked timeline before it can save", async () => {
    const user = userEvent.setup({ delay: null });
    const saved = mount();
    const name = await screen.findByRole("textbox", { name: "Name" });
    await user.type(name, "EU p99");
    await user.selectOptions(screen.getByRole("combobox", { name: "Statistic" }), "p99");
    await user.click(screen.getByRole("combobox", { name: "Sources" }));
    await user.click(await within(screen.getByRole("listbox", { name: "Sources" })).findByRole("option", { name: "aws-use1-a-1" }));
    await user.type(screen.getByRole("spinbutton", { name: "Threshold (ms)" }), "80");
    await user.click(screen.getByRole("checkbox", { name: /ops slack/ }));
    const save = screen.getByRole("button", { name: "Save rule" });
    expect(save).toHaveProperty("disabled", true);

    await user.click(screen.getByRole("button", { name: "Run backtest" }));
    const status = await screen.findByText(/Would have fired/);
    expect(status.textContent).toContain("Would have fired 2 times in the last 7 days over 1 matched series");
    const body = posted("/api/v1/alert-rules/backtest")[0]!.body as Record<string, unknown>;
    expect(body).toMatchObject({ name: "EU p99", metric: "mesh_rtt", statistic: "p99", window_s: 60, condition: { type: "above", value: 80_000 }, scope: { src: ["a1"] }, channel_ids: ["c1"], m: null });
    expect(screen.getByRole("figure", { name: "Backtest timeline with 2 firings marked" })).toBeTruthy();
    const rows = within(screen.getByRole("table", { name: "Backtest firings" })).getAllByRole("row");
    expect(rows).toHaveLength(3);
    expect(rows[1]!.textContent).toContain("2026-11-20 10:00Z");
    expect(rows[1]!.textContent).toContain("91 ms");
    expect(rows[2]!.textContent).toContain("still firing");

    expect(save).toHaveProperty("disabled", false);
    await user.click(save);
    await waitFor(() => expect(saved).toHaveLength(1));
    expect(posted("/api/v1/alert-rules")[0]!.body).toEqual(body);
  });

  it("asks for a new backtest once a field changes after one ran", async () => {
    const user = userEvent.setup({ delay: null });
    mount();
    await user.type(await screen.findByRole("textbox", { name: "Name" }), "r");
    await user.type(screen.getByRole("spinbutton", { name: "Threshold (ms)" }), "80");
    await user.click(screen.getByRole("button", { name: "Run backtest" }));
    await screen.findByText(/Would have fired/);
    expect(screen.getByRole("button", { name: "Save rule" })).toHaveProperty("disabled", false);
    await user.type(screen.getByRole("spinbutton", { name: "Threshold (ms)" }), "5");
    expect(screen.getByRole("button", { name: "Save rule" })).toHaveProperty("disabled", true);
    expect(screen.queryByText(/Would have fired/)).toBeNull();
  });

  it("offers zones as provider/region/zone keys, so same-named zones of two regions stay apart", async () => {
    const azure = (id: string, region: string) => ({ ...AGENTS[0], id, name: `az-${region}`, provider: "azure", region, zone: "1" });
    api.route("GET /api/v1/agents", () => [...AGENTS, azure("z1", "westeurope"), azure("z2", "eastus")]);
    const user = userEvent.setup({ delay: null });
    mount();
    const input = await screen.findByRole("combobox", { name: "Zones" });
    await user.click(input);
    const picker = screen.getByRole("listbox", { name: "Zones" });
    const options = await within(picker).findAllByRole("option");
    expect(options.map((o) => o.dataset.value)).toEqual(["aws/eu-west-1/eu-west-1a", "aws/eu-west-1/eu-west-1b", "aws/us-east-1/us-east-1a", "azure/eastus/1", "azure/westeurope/1"]);
    expect(options.map((o) => o.textContent)).toEqual(["aws eu-west-1a", "aws eu-west-1b", "aws us-east-1a", "azure eastus 1", "azure westeurope 1"]);
    await user.click(within(picker).getByRole("option", { name: "azure westeurope 1" }));
    await user.type(screen.getByRole("spinbutton", { name: "Threshold (ms)" }), "80");
    await user.click(screen.getByRole("button", { name: "Run backtest" }));
    await screen.findByText(/Would have fired/);
    const body = posted("/api/v1/alert-rules/backtest").at(-1)?.body as { scope: Record<string, unknown> };
    expect(body.scope.zones).toEqual(["azure/westeurope/1"]);
  });

  it("shows each 422 message next to the field its location names", async () => {
    const user = userEvent.setup({ delay: null });
    api.route("POST /api/v1/alert-rules/backtest", () => ({
      status: 422,
      body: {
        detail: [
          { loc: ["body", "n"], msg: "n (4) is larger than the 2 series the scope matches", type: "value_error" },
          { loc: ["body", "scope", "regions"], msg: "no agent of this org is in region mars-1", type: "value_error" },
        ],
      },
    }));
    mount();
    await user.type(await screen.findByRole("textbox", { name: "Name" }), "r");
    await user.type(screen.getByRole("spinbutton", { name: "Threshold (ms)" }), "80");
    await user.click(screen.getByRole("button", { name: "Run backtest" }));
    const n = screen.getByRole("spinbutton", { name: "N series" });
    await waitFor(() => expect(n.getAttribute("aria-invalid")).toBe("true"));
    expect(document.getElementById(n.getAttribute("aria-describedby")!)!.textContent).toBe("n (4) is larger than the 2 series the scope matches");
    const regions = screen.getByRole("combobox", { name: "Regions" });
    expect(document.getElementById(regions.getAttribute("aria-describedby")!)!.textContent).toBe("no agent of this org is in region mars-1");
    expect(screen.getByRole("spinbutton", { name: "X windows" }).getAttribute("aria-invalid")).toBeNull();
    expect(screen.getByRole("button", { name: "Save rule" })).toHaveProperty("disabled", true);
  });

  it("edits a rule: fields start from it, thresholds in ms, and saving patches it", async () => {
    const user = userEvent.setup({ delay: null });
    api.route("PATCH /api/v1/alert-rules/r1", (r) => rule(r.body as Record<string, unknown>));
    const { toRule } = await import("../../api/alertRules");
    const saved = mount({ rule: toRule(rule({ condition: { type: "baseline", k: 3, baseline: "week_ago" }, m: 6, n: 2 })) });
    expect((await screen.findByRole("textbox", { name: "Name" })).getAttribute("value")).toBe("EU p99");
    expect((screen.getByRole("spinbutton", { name: "Factor k" }) as HTMLInputElement).value).toBe("3");
    expect((screen.getByRole("combobox", { name: "Baseline" }) as HTMLSelectElement).value).toBe("week_ago");
    await user.click(screen.getByRole("button", { name: "Run backtest" }));
    await screen.findByText(/Would have fired/);
    await user.click(screen.getByRole("button", { name: "Save changes" }));
    await waitFor(() => expect(saved).toHaveLength(1));
    const patch = api.seen.find((s) => s.method === "PATCH")!;
    expect(patch.body).toMatchObject({ condition: { type: "baseline", k: 3, baseline: "week_ago" }, n: 2, m: 6, labels: { team: "net" }, scope: { src: ["a1"], dst: ["a2"] } });
  });
});
