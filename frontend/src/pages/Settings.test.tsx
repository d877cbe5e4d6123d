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
const { default: Settings } = await import("./Settings");
const { renderPage } = await import("../test/render");
const mount = () => renderPage(Settings);

const me = (role: string) => ({ user_id: "u1", email: "me@example.com", org_id: "o1", org_name: "acme", kind: "user", role });
const ORG = { id: "o1", name: "acme", slug: "acme", raw_retention_days: 7, rollup_retention_days: 400, mesh_settings: { enabled: true, rate_hz: 10, payload_bytes: 1024, timeout_ms: 1000, path_trace_interval_s: 600, path_trace_proto: "tcp" } };
const TARGET = {
  id: "t1", name: "s3 east", provider: "s3", endpoint: "", region: "us-east-1", bucket: "probe", prefix: "stormwatch-probe/", path_style: false,
  interval_s: 600, op_timeout_ms: 120000, contents: ["binary"], sizes_bytes: { binary: [1024], text: [1024] }, variants: {}, enabled: true,
  assign_all: false, agent_ids: ["a1"], credentials: { source: "env", env_vars: { access_key_id: "AWS_KEY" }, has_secret: false }, created_at: "2026-11-27T00:00:00Z", updated_at: "2026-11-27T00:00:00Z",
};
const sent = (method: string, path: string) => api.seen.filter((s) => s.method === method && s.path === path).map((s) => s.body as Record<string, unknown>);

beforeEach(() => {
  api.seen.length = 0;
  api.route("GET /api/v1/auth/me", () => me("admin"));
  api.route("GET /api/v1/agents", () => AGENTS);
  api.route("GET /api/v1/vocabularies", () => VOCABULARIES);
  api.route("GET /api/v1/org", () => ORG);
  api.route("GET /api/v1/storage-targets", () => [TARGET]);
  api.route("GET /api/v1/api-keys", () => []);
  api.route("GET /api/v1/users", () => []);
  api.route("GET /api/v1/invitations", () => []);
  api.route("GET /api/v1/oidc-config", () => ({ status: 404, body: { detail: "single sign-on is not set up" } }));
  api.route("GET /api/v1/audit", () => ({ items: [], next_cursor: null }));
  api.route("GET /api/v1/export/otlp", () => ({ status: 404, body: { detail: "no OTLP export is configured for this org" } }));
});
afterEach(cleanup);
afterAll(() => api.close());

describe("Settings", () => {
  it("lets an admin change the mesh rate, payload, timeout and retention in the API's units, with a 422 beside its field", async () => {
    const user = userEvent.setup({ delay: null });
    let reject = true;
    api.route("PATCH /api/v1/org", (r) =>
      reject ? { status: 422, body: { detail: [{ loc: ["body", "mesh_settings", "rate_hz"], msg: "Input should be less than or equal to 1000", type: "less_than_equal" }] } } : { ...ORG, ...(r.body as object) },
    );
    mount();
    const form = await screen.findByRole("form", { name: "Measurement settings" });
    const rate = within(form).getByRole("spinbutton", { name: /Mesh rounds per second/ });
    expect((rate as HTMLInputElement).value).toBe("10");
    await user.clear(rate);
    await user.type(rate, "5000");
    await user.click(within(form).getByRole("button", { name: "Save measurement settings" }));
    expect((await within(form).findByRole("alert")).textContent).toContain("less than or equal to 1000");
    expect(rate.getAttribute("aria-invalid")).toBe("true");
    reject = false;
    await user.clear(rate);
    await user.type(rate, "2");
    const raw = within(form).getByRole("spinbutton", { name: "Keep raw samples (days)" });
    await user.clear(raw);
    await user.type(raw, "14");
    await user.click(within(form).getByRole("button", { name: "Save measurement settings" }));
    await within(form).findByRole("status");
    expect(sent("PATCH", "/api/v1/org").at(-1)).toEqual({ mesh_settings: { enabled: true, rate_hz: 2, payload_bytes: 1024, timeout_ms: 1000, path_trace_interval_s: 600, path_trace_proto: "tcp" }, raw_retention_days: 14, rollup_retention_days: 400 });
  });

  it("lets an admin create, edit and delete a storage target and choose the agents that probe it", async () => {
    const user = userEvent.setup({ delay: null });
    api.route("POST /api/v1/storage-targets", (r) => ({ status: 201, body: { ...TARGET, id: "t2", ...(r.body as object) } }));
    api.route("PATCH /api/v1/storage-targets/t1", (r) => ({ ...TARGET, ...(r.body as object) }));
    api.route("DELETE /api/v1/storage-targets/t1", () => ({ status: 204 }));
    vi.spyOn(window, "confirm").mockReturnValue(true);
    mount();
    const list = await screen.findByRole("table", { name: "Storage target list" });
    expect(within(list).getAllByRole("row")[1]!.textContent).toContain("s3 east");
    await within(list).findByText("aws-use1-a-1");

    await user.click(screen.getByRole("button", { name: "Add storage target" }));
    const form = screen.getByRole("form", { name: "New storage target" });
    await user.type(within(form).getByRole("textbox", { name: "Name" }), "gcs central");
    const provider = within(form).getByRole("combobox", { name: "Provider" });
    // The providers come from the API's vocabularies.
    await within(provider).findByRole("option", { name: "gcs" });
    await user.selectOptions(provider, "gcs");
    await user.type(within(form).getByRole("textbox", { name: "Bucket" }), "probe-bucket");
    await user.type(within(form).getByRole("textbox", { name: /Region/ }), "us-central1");
    await user.selectOptions(within(form).getByRole("combobox", { name: "Source" }), "env");
    await user.type(within(form).getByRole("textbox", { name: "Service account JSON: variable name" }), "GCS_KEY_JSON");
    await user.click(within(form).getByRole("checkbox", { name: "Every agent of the org" }));
    await user.click(within(form).getByRole("checkbox", { name: "aws-euw1-a-1" }));
    await user.click(within(form).getByRole("button", { name: "Create target" }));
    await vi.waitFor(() => expect(sent("POST", "/api/v1/storage-targets")).toHaveLength(1));
    expect(sent("POST", "/api/v1/storage-targets")[0]).toMatchObject({
      name: "gcs central", provider: "gcs", bucket: "probe-bucket", region: "us-central1", interval_s: 600, op_timeout_ms: 120000,
      assign_all: false, agent_ids: ["a2"], credentials: { source: "env", service_account_json_var: "GCS_KEY_JSON" },
    });

    // The new-target form closes once the API answered; editing before then would be undone.
    await vi.waitFor(() => expect(screen.queryByRole("form", { name: "New storage target" })).toBeNull());
    await user.click(await screen.findByRole("button", { name: "Edit s3 east" }));
    const edit = screen.getByRole("form", { name: "Edit storage target s3 east" });
    const every = within(edit).getByRole("spinbutton", { name: "Probe every (s)" });
    await user.clear(every);
    await user.type(every, "120");
    await user.click(within(edit).getByRole("button", { name: "Save target" }));
    await vi.waitFor(() => expect(sent("PATCH", "/api/v1/storage-targets/t1")).toHaveLength(1));
    const patch = sent("PATCH", "/api/v1/storage-targets/t1")[0]!;
    expect(patch).toMatchObject({ interval_s: 120, agent_ids: ["a1"] });
    expect(patch).not.toHaveProperty("credentials"); // "keep the stored ones"

    await user.click(screen.getByRole("button", { name: "Delete s3 east" }));
    await vi.waitFor(() => expect(api.seen.some((s) => s.method === "DELETE" && s.path === "/api/v1/storage-targets/t1")).toBe(true));
  });

  it("creates a read-scoped API key by default and lists each key's access", async () => {
    const user = userEvent.setup({ delay: null });
    const KEY = { id: "k1", name: "prometheus", prefix: "swk_abcdefgh", scope: "read", created_at: "2026-11-27T00:00:00Z", last_used_at: null, revoked_at: null };
    api.route("POST /api/v1/api-keys", (r) => ({ status: 201, body: { ...KEY, ...(r.body as object), key: "swk_abcdefghsecret" } }));
    mount();
    await user.type(await screen.findByLabelText("Key name"), "prometheus");
    await user.click(screen.getByRole("button", { name: "Create API key" }));
    expect((await screen.findByLabelText("New API key")).textContent).toBe("swk_abcdefghsecret");
    expect(sent("POST", "/api/v1/api-keys").at(-1)).toEqual({ name: "prometheus", scope: "read" });
    await user.type(screen.getByLabelText("Key name"), "automation");
    await user.selectOptions(screen.getByLabelText("Access"), "admin");
    await user.click(screen.getByRole("button", { name: "Create API key" }));
    await vi.waitFor(() => expect(sent("POST", "/api/v1/api-keys").at(-1)).toEqual({ name: "automation", scope: "admin" }));
    api.route("GET /api/v1/api-keys", () => [KEY]);
    cleanup();
    mount();
    const list = await screen.findByRole("table", { name: "API key list" });
    expect(within(list).getAllByRole("row")[1]!.textContent).toContain("read");
  });

  it("shows a viewer the settings read-only, with no way to change them", async () => {
    api.route("GET /api/v1/auth/me", () => me("viewer"));
    mount();
    const form = await screen.findByRole("form", { name: "Measurement settings" });
    expect(within(form).getByRole("spinbutton", { name: /Mesh rounds per second/ })).toHaveProperty("disabled", true);
    expect(within(form).queryByRole("button")).toBeNull();
    await screen.findByRole("table", { name: "Storage target list" });
    expect(screen.queryByRole("button", { name: /Edit|Delete|Add storage target/ })).toBeNull();
    expect(screen.getByText("Changing storage targets needs the admin role.")).toBeTruthy();
  });

  describe("audit log", () => {
    const EVENT = (id: string, at: string, extra: object = {}) => ({
      id, at, actor_kind: "api_key", actor_id: "k1", actor_label: "ci (swk_ab…)", action: "channel.update", target_type: "channel",
      target_id: "c1", target_label: "mail", changes: { name: ["mail", "mail 2"], password: ["••••", "••••"] }, request_id: null, ...extra,
    });

    it("shows an admin who changed what, in UTC, with masked secrets, filters and older pages", async () => {
      const user = userEvent.setup({ delay: null });
      api.route("GET /api/v1/audit", (r) =>
        r.query.get("cursor") === "next"
          ? { items: [EVENT("e2", "2026-11-27T08:00:00Z", { action: "user.create", actor_kind: "user", actor_label: "me@example.com", target_label: "v@example.com", changes: { role: [null, "viewer"] } })], next_cursor: null }
          : { items: [EVENT("e1", "2026-11-28T09:30:05Z")], next_cursor: "next" },
      );
      mount();
      const table = await screen.findByRole("table", { name: "Audit log" });
      const row = within(table).getAllByRole("row")[1]!;
      expect(row.textContent).toContain("2026-11-28 09:30:05Z");
      expect(row.textContent).toContain("ci (swk_ab…)");
      expect(row.textContent).toContain("channel.update");
      expect(row.textContent).toContain("mail → mail 2");
      expect(row.textContent).toContain("password: •••• → ••••");
      await user.click(screen.getByRole("button", { name: "Older entries" }));
      await within(table).findByText("user.create");
      expect(within(table).getAllByRole("row")).toHaveLength(3);
      expect(screen.queryByRole("button", { name: "Older entries" })).toBeNull();

      const form = screen.getByRole("form", { name: "Audit log filters" });
      await user.type(within(form).getByRole("textbox", { name: /Target type/ }), "channel");
      await user.click(within(form).getByRole("button", { name: "Filter" }));
      await vi.waitFor(() => expect(api.seen.some((s) => s.path === "/api/v1/audit" && s.query.get("target_type") === "channel")).toBe(true));
    });

    it("shows a viewer no audit log and never asks for it", async () => {
      api.route("GET /api/v1/auth/me", () => me("viewer"));
      mount();
      await screen.findByRole("table", { name: "Storage target list" });
      expect(screen.queryByRole("region", { name: "Audit log" })).toBeNull();
      expect(screen.queryByRole("table", { name: "Audit log" })).toBeNull();
      expect(api.seen.filter((s) => s.path === "/api/v1/audit")).toHaveLength(0);
    });
  });

  describe("OpenTelemetry export", () => {
    const SAVED = {
      endpoint_url: "https://otel.example.com:4318", header_names: ["x-api-key"], level: "pair", kinds: ["mesh", "quorum"], interval_s: 30, enabled: true,
      last_attempt_at: null, last_success_at: null, last_error: null, failures_in_a_row: 0, last_data_points: null, updated_at: "2026-11-29T00:00:00Z",
    };

    it("lets an admin point it at a collector, with the refusal beside the URL, then push now", async () => {
      const user = userEvent.setup({ delay: null });
      let saved: typeof SAVED | null = null;
      api.route("GET /api/v1/export/otlp", () => saved ?? { status: 404, body: { detail: "none" } });
      api.route("PUT /api/v1/export/otlp", (r) => {
        const body = r.body as { endpoint_url: string };
        if (body.endpoint_url.includes("169.254")) return { status: 422, body: { detail: [{ loc: ["body", "endpoint_url"], msg: "refused by the egress policy: 169.254.169.254 is link-local", type: "egress_refused" }] } };
        saved = SAVED;
        return SAVED;
      });
      // Wrapped: the fake server reads a bare object with a `status` key as the reply's status.
      api.route("POST /api/v1/export/otlp/test", () => ({ body: { ok: true, detail: "HTTP 200", status: 200, data_points: 42, transient: false } }));
      mount();
      const form = await screen.findByRole("form", { name: "OpenTelemetry export settings" });
      const url = within(form).getByRole("textbox", { name: /Collector URL/ });
      await user.type(url, "http://169.254.169.254/v1/metrics");
      await user.type(within(form).getByRole("textbox", { name: /Headers/ }), "x-api-key: k1");
      await user.selectOptions(within(form).getByRole("combobox", { name: "Series" }), "pair");
      await user.click(within(form).getByRole("checkbox", { name: "storage" }));
      await user.click(within(form).getByRole("checkbox", { name: "throughput" }));
      const every = within(form).getByRole("spinbutton", { name: /Push every/ });
      await user.clear(every);
      await user.type(every, "30");
      await user.click(within(form).getByRole("button", { name: "Save OpenTelemetry export" }));
      expect((await within(form).findByRole("alert")).textContent).toContain("link-local");
      expect(url.getAttribute("aria-invalid")).toBe("true");
      await user.clear(url);
      await user.type(url, "https://otel.example.com:4318");
      await user.click(within(form).getByRole("button", { name: "Save OpenTelemetry export" }));
      await within(form).findByRole("status");
      expect(sent("PUT", "/api/v1/export/otlp").at(-1)).toEqual({
        endpoint_url: "https://otel.example.com:4318", level: "pair", kinds: ["mesh", "quorum"], interval_s: 30, enabled: true, headers: { "x-api-key": "k1" },
      });
      expect(within(form).getByRole("textbox", { name: /Headers \(stored: x-api-key/ })).toBeTruthy();
      await user.click(within(form).getByRole("button", { name: "Push now" }));
      await vi.waitFor(() => expect(document.body.textContent).toContain("The collector took 42 data points (HTTP 200)."));

      // Saving again without typing headers keeps the stored ones: no headers key is sent.
      await user.click(within(form).getByRole("button", { name: "Save OpenTelemetry export" }));
      await vi.waitFor(() => expect(sent("PUT", "/api/v1/export/otlp")).toHaveLength(3));
      expect(sent("PUT", "/api/v1/export/otlp").at(-1)).not.toHaveProperty("headers");
    });

    it("shows a viewer how the pushes go, and no form", async () => {
      api.route("GET /api/v1/auth/me", () => me("viewer"));
      api.route("GET /api/v1/export/otlp", () => ({ ...SAVED, last_error: "HTTP 503: overloaded", failures_in_a_row: 2 }));
      mount();
      const dl = await screen.findByLabelText("OpenTelemetry export status");
      // The status list can first show an earlier answer (a clean-clone run saw "none yet").
      await vi.waitFor(() => expect(dl.textContent).toContain("HTTP 503: overloaded (2 in a row)"));
      expect(screen.queryByRole("form", { name: "OpenTelemetry export settings" })).toBeNull();
    });
  });
});
