// The session (/api/v1/auth): who is signed in, signing in and out.
import { api, unwrap } from "./http";
import type { Me } from "./models";

export type { Me } from "./models";

export async function getMe(): Promise<Me | null> {
  const r = await api.GET("/api/v1/auth/me");
  if (r.response.status === 401) return null;
  const me = unwrap(r);
  return { email: me.email ?? "", org_name: me.org_name, role: me.role };
}

export async function login(email: string, password: string): Promise<Me> {
  const me = unwrap(await api.POST("/api/v1/auth/login", { body: { email, password } }));
  return { email: me.email ?? email, org_name: me.org_name, role: me.role };
}

export async function logout(): Promise<void> {
  await api.POST("/api/v1/auth/logout");
}
