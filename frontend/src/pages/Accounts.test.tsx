// @vitest-environment jsdom
import { cleanup, render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startApiServer } from "../test/apiServer";
import { setOrigin } from "../test/dom";
import { AGENTS, VOCABULARIES } from "../test/fixtures";

vi.setConfig({ testTimeout: 30_000 });
const api = await startApiServer();
setOrigin(api);
const { default: Settings } = await import("./Settings");
const { AcceptInvite, ForgotPassword, ResetPassword } = await import("./AccountLinks");
const { Login } = await import("./Login");
const { renderPage } = await import("../test/render");

const me = (role: string) => ({ user_id: "u1", email: "me@example.com", org_id: "o1", org_name: "acme", kind: "user", role });
const ORG = { id: "o1", name: "acme", slug: "acme", raw_retention_days: 7, rollup_retention_days: 400, mesh_settings: { enabled: true, rate_hz: 10, payload_bytes: 1024, timeout_ms: 1000 } };
const PENDING = { id: "i1", email: "ada@acme.test", role: "viewer", created_at: "2026-11-27T10:00:00Z", expires_at: "2026-12-04T10:00:00Z" };
const OIDC = { issuer_url: "https://login.acme.test", client_id: "stormwatch", default_role: "viewer", allowed_domains: ["acme.test"], has_client_secret: true, redirect_uri: "https://sw.acme.test/api/v1/auth/oidc/callback", updated_at: "2026-11-27T10:00:00Z" };
const sent = (method: string, path: string) => api.seen.filter((s) => s.method === method && s.path === path).map((s) => s.body as Record<string, unknown>);

beforeEach(() => {
  api.seen.length = 0;
  api.route("GET /api/v1/auth/me", () => me("admin"));
  api.route("GET /api/v1/agents", () => AGENTS);
  api.route("GET /api/v1/vocabularies", () => VOCABULARIES);
  api.route("GET /api/v1/org", () => ORG);
  api.route("GET /api/v1/storage-targets", () => []);
  api.route("GET /api/v1/api-keys", () => []);
  api.route("GET /api/v1/users", () => []);
  api.route("GET /api/v1/invitations", () => [PENDING]);
  api.route("GET /api/v1/oidc-config", () => ({ status: 404, body: { detail: "single sign-on is not set up" } }));
});
afterEach(cleanup);
afterAll(() => api.close());

describe("Settings → invitations and single sign-on", () => {
  it("lets an admin invite by email, shows the link once when no mail carried it, and withdraw a pending invitation", async () => {
    const user = userEvent.setup({ delay: null });
    api.route("POST /api/v1/invitations", (r) => ({
      status: 201,
      body: { ...PENDING, id: "i2", ...(r.body as object), email_sent: false, invite_url: "http://sw.test/accept-invite#token=swi_abc", detail: "not mailed (no SMTP server is configured): pass this link on yourself; it is shown only this once" },
    }));
    api.route("DELETE /api/v1/invitations/i1", () => ({ status: 204 }));
    vi.spyOn(window, "confirm").mockReturnValue(true);
    renderPage(Settings);
    const list = await screen.findByRole("table", { name: "Pending invitations" });
    expect(within(list).getAllByRole("row")[1]!.textContent).toContain("ada@acme.test");
    const form = screen.getByRole("form", { name: "Invite a person" });
    await user.type(within(form).getByRole("textbox", { name: "Email" }), "bob@acme.test");
    await user.selectOptions(within(form).getByRole("combobox", { name: "Role" }), "admin");
    await user.click(within(form).getByRole("button", { name: "Send invitation" }));
    expect((await screen.findByLabelText("Invitation link")).textContent).toBe("http://sw.test/accept-invite#token=swi_abc");
    expect(sent("POST", "/api/v1/invitations")).toEqual([{ email: "bob@acme.test", role: "admin" }]);
    await user.click(screen.getByRole("button", { name: "Withdraw the invitation of ada@acme.test" }));
    await vi.waitFor(() => expect(sent("DELETE", "/api/v1/invitations/i1")).toHaveLength(1));
  });

  it("shows a viewer the pending invitations and the provider, with nothing to change", async () => {
    api.route("GET /api/v1/auth/me", () => me("viewer"));
    api.route("GET /api/v1/oidc-config", () => OIDC);
    renderPage(Settings);
    await screen.findByRole("table", { name: "Pending invitations" });
    expect(await screen.findByText(/People sign in through https:\/\/login\.acme\.test/)).toBeTruthy();
    expect(screen.getByText("Inviting people needs the admin role.")).toBeTruthy();
    expect(screen.queryByRole("form", { name: "Invite a person" })).toBeNull();
    expect(screen.queryByRole("button", { name: /Withdraw/ })).toBeNull();
    expect(screen.queryByRole("form", { name: "Single sign-on settings" })).toBeNull();
  });

  it("lets an admin set up single sign-on, with the server's 422 beside the issuer, and keeps the stored secret", async () => {
    const user = userEvent.setup({ delay: null });
    let reject = true;
    api.route("PUT /api/v1/oidc-config", (r) =>
      reject
        ? { status: 422, body: { detail: [{ loc: ["body", "issuer_url"], msg: "discovery: https://login.acme.test answered HTTP 404", type: "value_error" }] } }
        : { ...OIDC, ...(r.body as object), has_client_secret: true },
    );
    renderPage(Settings);
    const form = await screen.findByRole("form", { name: "Single sign-on settings" });
    await user.type(within(form).getByLabelText("Issuer URL"), "https://login.acme.test");
    await user.type(within(form).getByLabelText("Client ID"), "stormwatch");
    await user.type(within(form).getByLabelText("Client secret"), "s3cret");
    await user.type(within(form).getByLabelText(/Email domains/), "Acme.test, ops.acme.test");
    await user.click(within(form).getByRole("button", { name: "Save single sign-on" }));
    expect((await within(form).findByRole("alert")).textContent).toContain("discovery");
    expect(within(form).getByLabelText("Issuer URL").getAttribute("aria-invalid")).toBe("true");
    reject = false;
    await user.click(within(form).getByRole("button", { name: "Save single sign-on" }));
    await within(form).findByRole("status");
    expect(sent("PUT", "/api/v1/oidc-config").at(-1)).toEqual({ issuer_url: "https://login.acme.test", client_id: "stormwatch", client_secret: "s3cret", default_role: "viewer", allowed_domains: ["acme.test", "ops.acme.test"] });
    expect(await screen.findByText(OIDC.redirect_uri)).toBeTruthy();
    expect(within(form).getByLabelText(/Client secret \(stored/)).toBeTruthy();
  });
});

describe("the pages of mailed links", () => {
  it("accepts an invitation with the link's token and signs the person in", async () => {
    const user = userEvent.setup({ delay: null });
    window.history.replaceState(null, "", "/accept-invite#token=swi_tok123");
    api.route("POST /api/v1/auth/invitations/accept", () => ({ ...me("viewer"), email: "ada@acme.test" }));
    const onDone = vi.fn();
    render(<AcceptInvite onDone={onDone} />);
    await user.type(screen.getByLabelText(/New password/), "a long enough password");
    await user.type(screen.getByLabelText("The same again"), "a different password!");
    await user.click(screen.getByRole("button", { name: "Set password and sign in" }));
    expect(screen.getByRole("alert").textContent).toContain("differ");
    await user.clear(screen.getByLabelText("The same again"));
    await user.type(screen.getByLabelText("The same again"), "a long enough password");
    await user.click(screen.getByRole("button", { name: "Set password and sign in" }));
    await vi.waitFor(() => expect(onDone).toHaveBeenCalledWith({ email: "ada@acme.test", org_name: "acme", role: "viewer" }));
    expect(sent("POST", "/api/v1/auth/invitations/accept")).toEqual([{ token: "swi_tok123", password: "a long enough password" }]);
  });

  it("shows why a used or expired reset link is refused", async () => {
    const user = userEvent.setup({ delay: null });
    window.history.replaceState(null, "", "/reset-password#token=swr_used");
    api.route("POST /api/v1/auth/password-reset/confirm", () => ({ status: 410, body: { detail: "this password reset link was already used; links work once" } }));
    const onDone = vi.fn();
    render(<ResetPassword onDone={onDone} />);
    await user.type(screen.getByLabelText(/New password/), "a long enough password");
    await user.type(screen.getByLabelText("The same again"), "a long enough password");
    await user.click(screen.getByRole("button", { name: "Set new password" }));
    expect((await screen.findByRole("alert")).textContent).toContain("already used");
    expect(onDone).not.toHaveBeenCalled();
  });

  it("asks for a reset link and shows the server's one answer", async () => {
    const user = userEvent.setup({ delay: null });
    const answer = "if an account has this email, a link to set a new password is on its way; it works once, within 60 minutes";
    api.route("POST /api/v1/auth/password-reset", () => ({ status: 202, body: { detail: answer } }));
    render(<ForgotPassword />);
    await user.type(screen.getByRole("textbox", { name: "Email" }), "who@acme.test");
    await user.click(screen.getByRole("button", { name: "Email me a link" }));
    expect((await screen.findByRole("status")).textContent).toBe(answer);
    expect(sent("POST", "/api/v1/auth/password-reset")).toEqual([{ email: "who@acme.test" }]);
  });

  it("sends the browser to the org's provider from the login page", async () => {
    const user = userEvent.setup({ delay: null });
    const go = vi.fn();
    render(<Login onLoggedIn={vi.fn()} go={go} />);
    expect(screen.getByRole("link", { name: "Forgot your password?" }).getAttribute("href")).toBe("/forgot-password");
    await user.click(screen.getByRole("button", { name: "Sign in with SSO" }));
    await user.type(screen.getByRole("textbox", { name: "Organisation or email" }), "ada@acme.test");
    await user.click(screen.getByRole("button", { name: "Continue to your provider" }));
    expect(go).toHaveBeenCalledWith("/api/v1/auth/oidc/start?org=ada%40acme.test");
  });
});
