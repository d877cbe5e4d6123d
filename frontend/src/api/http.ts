// The typed client over the generated schema. Cookies go with every request; unsafe
// methods echo the readable sw_csrf cookie in X-CSRF-Token, as docs/api.md requires.
import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "./schema";

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export function readCookie(name: string, cookie: string = typeof document === "undefined" ? "" : document.cookie): string | null {
  for (const part of cookie.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return null;
}

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
    /** The server's error body, e.g. FastAPI's {detail: [{loc, msg}]} for a 422. */
    public body?: unknown,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

type Listener = () => void;
const unauthorizedListeners = new Set<Listener>();
/** Called when any request answers 401, so the shell can show the login page. */
export function onUnauthorized(l: Listener): () => void {
  unauthorizedListeners.add(l);
  return () => unauthorizedListeners.delete(l);
}

const middleware: Middleware = {
  onRequest({ request }) {
    if (UNSAFE.has(request.method)) {
      const token = readCookie("sw_csrf");
      if (token) request.headers.set("X-CSRF-Token", token);
    }
    return request;
  },
  onResponse({ response, request }) {
    if (response.status === 401 && !request.url.includes("/auth/login")) {
      for (const l of unauthorizedListeners) l();
    }
    return response;
  },
};

export const api = createClient<paths>({
  baseUrl: typeof window === "undefined" ? "http://localhost" : window.location.origin,
  credentials: "include",
});
api.use(middleware);

/** Human-readable message from a FastAPI error body ({detail: string | [{msg, loc}]}). */
export function errorMessage(status: number, body: unknown): string {
  if (body && typeof body === "object" && "detail" in body) {
    const d = (body as { detail: unknown }).detail;
    if (typeof d === "string") return d;
    if (Array.isArray(d)) {
      return d
        .map((e: unknown) => {
          if (e && typeof e === "object") {
            const o = e as { msg?: unknown; loc?: unknown };
            const loc = Array.isArray(o.loc) ? o.loc.join(".") : "";
            return `${loc ? `${loc}: ` : ""}${String(o.msg ?? "")}`;
          }
          return String(e);
        })
        .join("; ");
    }
  }
  return `request failed (${status})`;
}

/** Unwrap an openapi-fetch result: the data, or an ApiError with the server's message. */
export function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.error !== undefined || !r.response.ok) {
    throw new ApiError(r.response.status, errorMessage(r.response.status, r.error), r.error);
  }
  return r.data as T;
}

/** Field errors of a 422, keyed by the path after "body" (e.g. "window_s", "scope.regions"). */
export function fieldErrors(err: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!(err instanceof ApiError) || err.status !== 422) return out;
  const d = err.body && typeof err.body === "object" && "detail" in err.body ? (err.body as { detail: unknown }).detail : undefined;
  if (!Array.isArray(d)) return out;
  for (const e of d) {
    if (!e || typeof e !== "object") continue;
    const o = e as { loc?: unknown; msg?: unknown };
    const loc = Array.isArray(o.loc) ? o.loc.map(String) : [];
    const path = (loc[0] === "body" || loc[0] === "query" ? loc.slice(1) : loc).join(".");
    const msg = String(o.msg ?? "invalid");
    out[path] = out[path] ? `${out[path]}; ${msg}` : msg;
  }
  return out;
}
