// @vitest-environment jsdom
import { cleanup, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../test/apiServer";
import { setOrigin } from "../test/dom";
import { AGENTS, VOCABULARIES, alert, rule } from "../test/fixtures";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { renderWithClient } = await import("../test/render");
const { default: Alerts } = await import("./Alerts");
const { navigate } = await import("../lib/router");

function mount() {
  renderWithClient(<Alerts />);
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
  api.route("GET /api/v1/auth/me", () => me("admin"));
  api.route("GET /api/v1/vocabularies", () => VOCABULARIES);
});

function me(role: "admin" | "viewer") {
  return { user_id: "u1", email: `${role}@example.test`, org_id: "o1", org_name: "Test org", kind: "user", role, csrf_token: null };
}
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

  it("offers the channel kinds the API lists, with each kind's fields, and posts only what was filled", async () => {
    const user = userEvent.setup({ delay: null });
    const opsgenie = { name: "opsgenie", title: "Opsgenie", fields: [{ name: "api_key", label: "API key", input: "password", required: true, choices: [], secret: true, default: null }] };
    api.route("GET /api/v1/vocabularies", () => ({ ...VOCABULARIES, channel_kinds: [...VOCABULARIES.channel_kinds, opsgenie] }));
    api.route("POST /api/v1/channels", (r) => ({ status: 201, body: { id: "c7", ...(r.body as object), enabled: true, config: {}, created_at: "2026-11-23T18:00:00Z", updated_at: "2026-11-23T18:00:00Z", signing_secret: null } }));
    navigate("/alerts?tab=channels");
    mount();
    const form = await screen.findByRole("form", { name: "New channel" });
    const type = within(form).getByRole("combobox", { name: "Type" });
    await waitFor(() => expect(within(type).getAllByRole("option").map((o) => o.textContent)).toEqual(["Email", "Slack", "Webhook", "PagerDuty", "Opsgenie"]));
    await user.selectOptions(type, "pagerduty");
    expect(within(form).getByLabelText("Events API URL").getAttribute("placeholder")).toBe("https://events.pagerduty.com/v2/enqueue");
    await user.type(within(form).getByRole("textbox", { name: "Channel name" }), "pd");
    await user.type(within(form).getByLabelText("Routing key"), "R0UT1NG");
    expect(within(form).getByLabelText("Routing key").getAttribute("type")).toBe("password");
    await user.click(within(form).getByRole("button", { name: "Add channel" }));
    await waitFor(() => expect(api.seen.some((s) => s.method === "POST" && s.path === "/api/v1/channels")).toBe(true));
    const posted = api.seen.find((s) => s.method === "POST" && s.path === "/api/v1/channels")!.body;
    expect(posted).toEqual({ name: "pd", kind: "pagerduty", enabled: true, config: { routing_key: "R0UT1NG" } });
  });

  it("adds a recurring maintenance window in a timezone scoped to a rule, and lists its next start", async () => {
    const user = userEvent.setup({ delay: null });
    const windows: unknown[] = [];
    api.route("GET /api/v1/maintenance-windows", () => windows);
    api.route("POST /api/v1/maintenance-windows", (r) => {
      const w = { id: "m1", ...(r.body as Record<string, unknown>), ends_at: null, created_by: "ops@example.com", created_at: "2026-11-23T18:00:00Z", active_now: false, next_start: "2026-11-29T01:00:00Z" };
      windows.push(w);
      return { status: 201, body: w };
    });
    navigate("/alerts?tab=silences");
    mount();
    const form = await screen.findByRole("form", { name: "New maintenance window" });
    await user.type(within(form).getByRole("textbox", { name: "Name" }), "Sunday patching");
    await user.click(within(form).getByRole("button", { name: "Recurring" }));
    const first = within(form).getByLabelText("First occurrence");
    await user.type(first, "2026-11-29T02:00");
    const rrule = within(form).getByRole("textbox", { name: "RRULE (RFC 5545)" });
    await user.clear(rrule);
    await user.type(rrule, "FREQ=WEEKLY;BYDAY=SU");
    const duration = within(form).getByRole("spinbutton", { name: "Duration (min)" });
    await user.clear(duration);
    await user.type(duration, "90");
    const tz = within(form).getByRole("textbox", { name: "Timezone" });
    await user.clear(tz);
    await user.type(tz, "Europe/Berlin");
    await user.selectOptions(within(form).getByRole("combobox", { name: "Rule" }), "r1");
    await user.click(within(form).getByRole("button", { name: "Add window" }));
    const table = await screen.findByRole("table", { name: "Maintenance windows" });
    expect(api.seen.find((x) => x.method === "POST")!.body).toEqual({
      name: "Sunday patching",
      timezone: "Europe/Berlin",
      rule_ids: ["r1"],
      matchers: [],
      comment: "",
      rrule: "FREQ=WEEKLY;BYDAY=SU",
      duration_s: 5400,
      starts_at: "2026-11-29T02:00",
    });
    expect(table.textContent).toContain("FREQ=WEEKLY;BYDAY=SU for 90 min, next 2026-11-29 01:00Z");
    expect(table.textContent).toContain("EU p99");
  });

  it("shows a channel's delivery log with the receiver's reply and a failure's error", async () => {
    const user = userEvent.setup({ delay: null });
    const ch = { id: "c1", name: "ops mail", kind: "email", enabled: true, config: { host: "smtp.example.com", to_addresses: ["ops@example.com"] }, created_at: "2026-11-23T00:00:00Z", updated_at: "2026-11-23T00:00:00Z" };
    api.route("GET /api/v1/channels", () => [ch]);
    const row = (over: Record<string, unknown>) => ({
      id: "d1", notification_id: "n1", notification_kind: "firing", channel_id: "c1", channel_name: "ops mail", channel_kind: "email", rule_id: "r1", rule_name: "EU p99",
      alert_ids: ["al1"], state: "sent", attempts: 1, next_attempt_at: "2026-11-23T18:01:00Z", last_error: null, response: "250 2.0.0 Ok: queued as 4F1", sent_at: "2026-11-23T18:01:03Z", created_at: "2026-11-23T18:01:01Z", ...over,
    });
    api.route("GET /api/v1/channels/c1/deliveries", () => [row({}), row({ id: "d2", notification_kind: "resolved", state: "failed", attempts: 3, last_error: "550 5.1.1 <ops@example.com>: Recipient address rejected", response: null, sent_at: null })]);
    navigate("/alerts?tab=channels");
    mount();
    const channels = await screen.findByRole("table", { name: "Channels" });
    expect(channels.textContent).toContain("smtp.example.com → ops@example.com");
    await user.click(within(channels).getByRole("button", { name: "Delivery log of ops mail" }));
    await waitFor(() => expect(screen.getByRole("table", { name: "Delivery log" }).textContent).toContain("Recipient address rejected"));
    const rows = within(screen.getByRole("table", { name: "Delivery log" })).getAllByRole("row");
    expect(rows[1]!.textContent).toContain("firing EU p99");
    expect(rows[1]!.textContent).toContain("250 2.0.0 Ok: queued as 4F1");
    expect(rows[2]!.textContent).toContain("failed");
    expect(rows[2]!.textContent).toContain("550 5.1.1 <ops@example.com>: Recipient address rejected");
  });

  it("lists rules with how many of their alerts fire now, linking each to its editor", async () => {
    api.route("GET /api/v1/alert-rules", () => [rule({ firing: 2 }), rule({ id: "r2", name: "quiet", enabled: false })]);
    navigate("/alerts?tab=rules");
    mount();
    const table = await screen.findByRole("table", { name: "Alert rules" });
    const rows = within(table).getAllByRole("row");
    expect(rows[1]!.textContent).toContain("2 firing");
    expect(rows[2]!.textContent).toContain("disabled");
    expect(within(table).getByRole("link", { name: "quiet" }).getAttribute("href")).toBe("/alerts/rule?id=r2");
  });

  it("offers a viewer no changes: no new rule, no deletes, no silence or channel forms", async () => {
    api.route("GET /api/v1/auth/me", () => me("viewer"));
    api.route("GET /api/v1/channels", () => [{ id: "c1", name: "ops slack", type: "slack", enabled: true, config: { url_host: "hooks.slack.com" }, created_at: "2026-11-23T18:00:00Z" }]);
    navigate("/alerts?tab=rules");
    mount();
    const table = await screen.findByRole("table", { name: "Alert rules" });
    expect(within(table).queryByRole("button", { name: /^Delete rule/ })).toBeNull();
    expect(screen.queryByRole("link", { name: "New rule" })).toBeNull();
    cleanup();
    navigate("/alerts?tab=silences");
    mount();
    expect(await screen.findByText("Creating a silence needs the admin role.")).toBeTruthy();
    expect(screen.queryByRole("form", { name: "New silence" })).toBeNull();
    cleanup();
    navigate("/alerts?tab=channels");
    mount();
    expect(await screen.findByText("Adding a channel needs the admin role.")).toBeTruthy();
    expect(screen.queryByRole("button", { name: /^Delete channel/ })).toBeNull();
  });
});
