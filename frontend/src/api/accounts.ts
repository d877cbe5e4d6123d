// Accounts: users, API keys, invitations, password resets and the org's single sign-on.
import { api, unwrap } from "./http";
import type { Me } from "./models";
import type { components } from "./schema";

type S = components["schemas"];
export type Invitation = S["InvitationPublic"];
export type InvitationCreated = S["InvitationCreated"];
export type OidcConfig = S["OidcConfigPublic"];
export type OidcConfigUpdate = S["OidcConfigUpdate"];

const asMe = (me: S["Me"]): Me => ({ email: me.email ?? "", org_name: me.org_name, role: me.role });

export async function listInvitations(signal?: AbortSignal): Promise<Invitation[]> {
  return unwrap(await api.GET("/api/v1/invitations", { signal }));
}

export async function createInvitation(email: string, role: string): Promise<InvitationCreated> {
  return unwrap(await api.POST("/api/v1/invitations", { body: { email, role } }));
}

export async function revokeInvitation(id: string): Promise<void> {
  unwrap(await api.DELETE("/api/v1/invitations/{invitation_id}", { params: { path: { invitation_id: id } } }));
}

export async function acceptInvitation(token: string, password: string): Promise<Me> {
  return asMe(unwrap(await api.POST("/api/v1/auth/invitations/accept", { body: { token, password } })));
}

export async function requestPasswordReset(email: string): Promise<string> {
  return unwrap(await api.POST("/api/v1/auth/password-reset", { body: { email } })).detail;
}

export async function confirmPasswordReset(token: string, password: string): Promise<Me> {
  return asMe(unwrap(await api.POST("/api/v1/auth/password-reset/confirm", { body: { token, password } })));
}

/** The org's provider, or null while single sign-on is not set up. */
export async function getOidcConfig(signal?: AbortSignal): Promise<OidcConfig | null> {
  const r = await api.GET("/api/v1/oidc-config", { signal });
  if (r.response.status === 404) return null;
  return unwrap(r);
}

export async function saveOidcConfig(body: OidcConfigUpdate): Promise<OidcConfig> {
  return unwrap(await api.PUT("/api/v1/oidc-config", { body }));
}

export async function deleteOidcConfig(): Promise<void> {
  unwrap(await api.DELETE("/api/v1/oidc-config"));
}

/** Where the browser goes to sign in through the provider of the org named by slug or email. */
export function ssoStartUrl(org: string): string {
  return `/api/v1/auth/oidc/start?${new URLSearchParams({ org: org.trim() }).toString()}`;
}

/** The token of a mailed link: after `#token=`, which browsers never send to a server. */
export function linkToken(hash: string = typeof window === "undefined" ? "" : window.location.hash): string {
  return new URLSearchParams(hash.replace(/^#/, "")).get("token") ?? "";
}

export async function listApiKeys(signal?: AbortSignal): Promise<S["ApiKeyPublic"][]> {
  return unwrap(await api.GET("/api/v1/api-keys", { signal }));
}

export async function createApiKey(name: string, scope: "admin" | "read" = "admin"): Promise<S["ApiKeyCreated"]> {
  return unwrap(await api.POST("/api/v1/api-keys", { body: { name, scope } }));
}

export async function revokeApiKey(id: string): Promise<void> {
  unwrap(await api.DELETE("/api/v1/api-keys/{key_id}", { params: { path: { key_id: id } } }));
}

export async function listUsers(signal?: AbortSignal): Promise<S["UserPublic"][]> {
  return unwrap(await api.GET("/api/v1/users", { signal }));
}

export async function createUser(email: string, password: string, role: string): Promise<void> {
  unwrap(await api.POST("/api/v1/users", { body: { email, password, role } }));
}

export async function deleteUser(id: string): Promise<void> {
  unwrap(await api.DELETE("/api/v1/users/{user_id}", { params: { path: { user_id: id } } }));
}
