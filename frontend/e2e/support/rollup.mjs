// Backfills rollups for seeded history with the worker's own task (roll_up_window), run
// in-process against the stack's database, so queries over hours and days have their
// 1-minute/1-hour/1-day buckets without waiting for the periodic passes.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO } from "./stack.mjs";

const SCRIPT = `
import sys
from stormwatch.worker.tasks.rollups import roll_up_window
start, end, kinds = sys.argv[1], sys.argv[2], sys.argv[3:]
for kind in kinds:
    print(kind, roll_up_window(kind, start, end), flush=True)
`;

/** @param {{ database_url: string, redis_url?: string }} info */
export function backfillRollups(info, startMs, endMs, kinds = ["mesh", "quorum", "storage"]) {
  const py = existsSync(join(REPO, ".venv", "bin", "python")) ? join(REPO, ".venv", "bin", "python") : "python3";
  const iso = (ms) => new Date(ms).toISOString().replace("Z", "+00:00");
  return new Promise((resolve, reject) => {
    const child = spawn(py, ["-c", SCRIPT, iso(Math.floor(startMs / 60_000) * 60_000), iso(Math.ceil(endMs / 60_000) * 60_000 + 60_000), ...kinds], {
      cwd: REPO,
      env: { ...process.env, PYTHONPATH: join(REPO, "backend"), DATABASE_URL: info.database_url, REDIS_URL: info.redis_url ?? "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err = (err + d).slice(-4000)));
    child.on("exit", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`rollup backfill failed (${code}): ${err}`))));
  });
}
