// @vitest-environment jsdom
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../test/apiServer";
import { useOrigin } from "../test/dom";
import { AGENTS, alert, rule } from "../test/fixtures";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
useOrigin(api);
const { default: Alerts } = await import("./Alerts");
const { navigate } = await import("../lib/router");

function mount() {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={qc}>
      <Alerts />
    </QueryClientProvider>,
  );
}

beforeEach(() => {
  api.seen.length = 0;
  navigate("/alerts");
  api.route("GET /api/v1/alert-rules", () => [rule()]);
  api.route("GET /api/v1/agents", () => AGENTS);
  api.route("GET /api/v1/alerts", (r) => (r.query.get("state") === "firing" ? [alert()] : [alert(), alert({ id: "al0", state: "resolved", resolved_at: "2026-11-22T03:00:00Z", started_at: "2026-11-22T02:00:00Z" })]));
  api.route("GET /api/v1/alerts/*", () => ({
    ...alert(),
    events: [{ id: "e1", kind: "firing", at: "2026-11-23T18:01:00Z", created_at: "2026-11-23T18:01:02Z", evidence: {} }],
  }));
  api.route("GET /api/v1/silences", () => []);
  api.route("GET /api/v1/maintenance-windows", () => []);
  api.route("GET /api/v1/channels", () => []);
  api.route("GET /api/v1/deliveries", () => []);
});
afterEach(cleanup);
afterAll(() => api.close());

describe("Alerts page", () => {
  it("shows what fires now with why: values against the threshold, the agreeing series, transitions and a link to the dashboard view", async () => {
    const user = userEvent.setup({ delay: null });
    mount();
    const firing = await screen.findByRole("list", { name: "Firing alerts" });
    const item = within(firing).getByRole("listitem");
    expect(item.textContent).toContain("EU p99");
    expect(item.textContent).toContain("aws-use1-a-1 → aws-euw1-a-1");
    await user.click(within(item).getByText("EU p99"));
    const series = await within(item).findByRole("table", { name: "Agreeing series" });
    expect(series.textContent).toContain("95 ms");
    expect(series.textContent).toContain("80 ms");
    expect(series.textContent).toContain("70 ms, 95 ms ▲");
    const transitions = await within(item).findByRole("list", { name: "Transitions" });
    expect(transitions.textContent).toContain("2026-11-23 18:01:00Z firing");
    const link = within(item).getByRole("link", { name: "Open the dashboard view" });
    expect(link.getAttribute("href")).toContain("/pair?level=node&src=a1&dst=a2");
    expect(link.getAttribute("href")).toContain("range=custom");
    const history = screen.getByRole("list", { name: "Alert history" });
    expect(within(history).getAllByRole("listitem")).toHaveLength(2);
    expect(history.textContent).toContain("resolved 2026-11-22 03:00:00Z");
  });

  it("silences a firing alert's rule until an end time with a comment", async () => {
    const user = userEvent.setup({ delay: null });
    api.route("POST /api/v1/silences", (r) => ({ status: 201, body: { id: "s1", ...(r.body as object), created_by: "me@example.com", created_at: "2026-11-23T18:05:00Z", state: "active" } }));
    mount();
    await user.click(await screen.findByRole("button", { name: "Silence EU p99" }));
    const form = screen.getByRole("form", { name: "New silence" });
    expect((within(form).getByRole("combobox", { name: "Rule" }) as HTMLSelectElement).value).toBe("r1");
    await user.selectOptions(within(form).getByRole("combobox", { name: "For" }), "120");
    await user.type(within(form).getByRole("textbox", { name: "Comment" }), "known provider incident");
    const before = Date.now();
    await user.click(within(form).getByRole("button", { name: "Create silence" }));
    await waitFor(() => expect(api.seen.some((s) => s.method === "POST" && s.path === "/api/v1/silences")).toBe(true));
    const body = api.seen.find((s) => s.method === "POST")!.body as { rule_ids: string[]; ends_at: string; starts_at: string; comment: string; matchers: unknown[] };
    expect(body.rule_ids).toEqual(["r1"]);
    expect(body.matchers).toEqual([]);
    expect(body.comment).toBe("known provider incident");
    const span = Date.parse(body.ends_at) - Date.parse(body.starts_at);
    expect(span).toBe(120 * 60_000);
    expect(Date.parse(body.starts_at)).toBeGreaterThanOrEqual(before - 1000);
    await waitFor(() => expect(screen.queryByRole("form", { name: "New silence" })).toBeNull());
  });

  it("lists silences with who and why, and expires one", async () => {
    const user = userEvent.setup({ delay: null });
    let state = "active";
    api.route("GET /api/v1/silences", () => [
      { id: "s1", rule_ids: [], matchers: [{ label: "team", op: "=", value: "net" }], starts_at: "2026-11-23T18:00:00Z", ends_at: "2099-01-01T00:00:00Z", comment: "upgrade", created_by: "ops@example.com", created_at: "2026-11-23T18:00:00Z", state },
    ]);
    api.route("DELETE /api/v1/silences/s1", () => {
      state = "expired";
      return { id: "s1", rule_ids: [], matchers: [], starts_at: "2026-11-23T18:00:00Z", ends_at: "2026-11-23T18:10:00Z", comment: "upgrade", created_by: "ops@example.com", created_at: "2026-11-23T18:00:00Z", state };
    });
    navigate("/alerts?tab=silences");
    mount();
    const table = await screen.findByRole("table", { name: "Silences" });
    expect(table.textContent).toContain("team=net");
    expect(table.textContent).toContain("ops@example.com");
    await user.click(within(table).getByRole("button", { name: "Expire silence upgrade" }));
    await waitFor(() => expect(within(screen.getByRole("table", { name: "Silences" })).queryByRole("button", { name: /Expire/ })).toBeNull());
    expect(screen.getByRole("table", { name: "Silences" }).textContent).toContain("expired");
  });

  it("creates a webhook channel, shows its signing secret once, and shows a test send's reply verbatim", async () => {
    const user = userEvent.setup({ delay: null });
    const channels: unknown[] = [];
    api.route("GET /api/v1/channels", () => channels);
    api.route("POST /api/v1/channels", (r) => {
      const c = { id: "c9", ...(r.body as object), enabled: true, config: { url: "https://hooks.example.com/in" }, created_at: "2026-11-23T18:00:00Z", updated_at: "2026-11-23T18:00:00Z" };
      channels.push(c);
      return { status: 201, body: { ...c, signing_secret: "whsec_c2VjcmV0c2VjcmV0" } };
    });
    api.route("POST /api/v1/channels/c9/test", () => ({ ok: false, permanent: true, detail: "HTTP 401 Unauthorized: {\"error\":\"bad signature\"}" }));
    navigate("/alerts?tab=channels");
    mount();
    const form = await screen.findByRole("form", { name: "New channel" });
    await user.selectOptions(within(form).getByRole("combobox", { name: "Type" }), "webhook");
    await user.type(within(form).getByRole("textbox", { name: "Channel name" }), "receiver");
    await user.type(within(form).getByRole("textbox", { name: "Webhook URL" }), "https://hooks.example.com/in");
    await user.click(within(form).getByRole("button", { name: "Add channel" }));
    expect((await screen.findByLabelText("Webhook signing secret")).textContent).toBe("whsec_c2VjcmV0c2VjcmV0");
    const posted = api.seen.find((s) => s.method === "POST" && s.path === "/api/v1/channels")!.body;
    expect(posted).toEqual({ name: "receiver", kind: "webhook", enabled: true, config: { url: "https://hooks.example.com/in" } });
    await user.click(screen.getByRole("button", { name: "I have copied it" }));
    expect(screen.queryByLabelText("Webhook signing secret")).toBeNull();

    const table = await screen.findByRole("table", { name: "Channels" });
    await user.click(within(table).getByRole("button", { name: "Test send to receiver" }));
    const result = await within(table).findByRole("status", { name: "Test send to receiver" });
    expect(result.textContent).toContain("failed");
    expect(result.textContent).toContain('HTTP 401 Unauthorized: {"error":"bad signature"}');
  });
});
