import { useQuery } from "@tanstack/react-query";
import { getMe } from "../api/session";

/** The signed-in caller's role, once /auth/me has answered. */
export function useRole(): "admin" | "viewer" | undefined {
  const me = useQuery({ queryKey: ["me"], queryFn: () => getMe(), staleTime: 300_000 });
  const role = me.data?.role;
  return role === "admin" || role === "viewer" ? role : undefined;
}

/**
 * Whether the signed-in caller may change things. Viewers get read-only pages: the API refuses
 * them every change (403), so the UI does not offer one. Nothing is offered until /auth/me answers.
 */
export function useIsAdmin(): boolean {
  return useRole() === "admin";
}
