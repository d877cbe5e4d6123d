// Starts `python -m stormwatch.devtools.stack` (PostgreSQL, Redis, migrations, the API serving
// frontend/dist, a demo org) and resolves with the JSON line it prints when ready.
import { spawn, spawnSync } from "node:child_process";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const FRONTEND = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const REPO = join(FRONTEND, "..");

/** Builds the UI a feature file serves, unless the runner built it once for every file
 * (`SW_SKIP_BUILD=1`, as `npm run test:e2e` does). */
export function buildUnlessSkipped() {
  if (process.env.SW_SKIP_BUILD) return;
  const b = spawnSync("npm", ["run", "build"], { cwd: FRONTEND, stdio: "inherit" });
  assert.equal(b.status, 0, "npm run build failed");
}

function python() {
  const venv = join(REPO, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

/**
 * @param {{ port?: number, withWorker?: boolean, demo?: "fast" | "full", dataDir?: string, timeoutMs?: number, log?: (s: string) => void }} opts
 * @returns {Promise<{ info: any, pid: number, stop: (opts?: { signal?: NodeJS.Signals, graceMs?: number }) => Promise<{ code: number | null, sig: NodeJS.Signals | null }> }>}
 */
export function startStack(opts = {}) {
  const args = ["-m", process.env.SW_STACK_MODULE ?? "stormwatch.devtools.stack"];
  if (opts.port) args.push("--port", String(opts.port));
  if (opts.withWorker) args.push("--with-worker");
  if (opts.demo) args.push(opts.demo === "fast" ? "--demo-fast" : "--demo");
  if (opts.dataDir) args.push("--data-dir", opts.dataDir);
  const child = spawn(python(), args, {
    cwd: REPO,
    env: { ...process.env, PYTHONPATH: [join(REPO, "backend"), process.env.PYTHONPATH].filter(Boolean).join(":") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = opts.log ?? (() => {});
  let stderr = "";
  child.stderr.on("data", (d) => {
    const s = d.toString();
    stderr = (stderr + s).slice(-8000);
    log(s);
  });
  const exited = new Promise((resolve) => child.on("exit", (code, sig) => resolve({ code, sig })));

  /** Stops the stack with `signal` (SIGKILL after `graceMs`); resolves with how it exited. */
  const stop = async ({ signal = "SIGTERM", graceMs = 30_000 } = {}) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
      const t = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
    }
    return exited;
  };

  return new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`stack not ready within ${opts.timeoutMs ?? 180_000} ms\n${stderr}`));
    }, opts.timeoutMs ?? 180_000);
    child.stdout.on("data", (d) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line.startsWith("{")) continue;
        try {
          const info = JSON.parse(line);
          if (info.url) {
            clearTimeout(timer);
            resolve({ info, pid: child.pid, stop });
          }
        } catch {
          // not the ready line
        }
      }
    });
    void exited.then(({ code, sig }) => {
      clearTimeout(timer);
      reject(new Error(`stack exited (${code ?? sig}) before it was ready\n${stderr}`));
    });
  });
}
