/// <reference types="node" />
// A real HTTP server on a loopback port standing in for the API in component tests: each
// route answers what the test gives it and every request is recorded with its body, so tests
// assert what the UI sent. The browser test (e2e/alerts.test.mjs) runs against the real API.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  body: unknown;
}

/** An answer, or a promise of one (a test holds a request open until it resolves). */
export type Handler = (req: Seen) => { status?: number; body?: unknown } | unknown;

export interface ApiServer {
  url: string;
  seen: Seen[];
  /** Routes as "METHOD /api/v1/path" (path without query; `*` matches one segment). */
  route: (key: string, h: Handler) => void;
  close: () => Promise<void>;
}

function match(pattern: string, path: string): boolean {
  const a = pattern.split("/");
  const b = path.split("/");
  return a.length === b.length && a.every((s, i) => s === "*" || s === b[i]);
}

export async function startApiServer(): Promise<ApiServer> {
  // The caller is an admin unless a test routes /auth/me to a viewer (later routes win).
  const routes: [string, string, Handler][] = [
    ["GET", "/api/v1/auth/me", () => ({ user_id: "u1", email: "admin@example.test", org_id: "o1", org_name: "Test org", kind: "user", role: "admin", csrf_token: null })],
  ];
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const u = new URL(req.url ?? "/", "http://x");
      const raw = Buffer.concat(chunks).toString("utf8");
      const s: Seen = { method: req.method ?? "GET", path: u.pathname, query: u.searchParams, body: raw ? JSON.parse(raw) : undefined };
      seen.push(s);
      // Later routes win, so a test can override a default answer.
      const r = [...routes].reverse().find(([m, p]) => m === s.method && match(p, s.path));
      if (!r) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ detail: `no route ${s.method} ${s.path}` }));
        return;
      }
      const out: unknown = await r[2](s);
      const shaped = out && typeof out === "object" && ("status" in out || "body" in out) ? (out as { status?: number; body?: unknown }) : { body: out };
      const status = shaped.status ?? 200;
      if (status === 204) {
        res.writeHead(204);
        res.end();
        return;
      }
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(shaped.body ?? null));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    route: (key, h) => {
      const sp = key.indexOf(" ");
      routes.push([key.slice(0, sp), key.slice(sp + 1), h]);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
