// Fails when the committed client is stale: openapi.json must equal the backend app's
// OpenAPI (as `make client` dumps it) and src/api/schema.ts must equal what
// `npm run client` generates from it. Run by `npm test`.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { OPENAPI, ROOT, SCHEMA_TS, generate } from "./gen-client.mjs";

const REPO = join(ROOT, "..");
const venv = join(REPO, ".venv", "bin", "python");
const python = existsSync(venv) ? venv : "python3";

/** The first JSON path where two documents differ, for a readable failure. */
function firstDifference(a, b, path = "$") {
  if (a === b) return null;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object" || Array.isArray(a) !== Array.isArray(b)) return path;
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
  for (const k of keys) {
    if (!(k in a)) return `${path}.${k} (only in the app)`;
    if (!(k in b)) return `${path}.${k} (only in openapi.json)`;
    const d = firstDifference(a[k], b[k], `${path}.${k}`);
    if (d) return d;
  }
  return JSON.stringify(Object.keys(a)) === JSON.stringify(Object.keys(b)) ? null : `${path} (key order)`;
}

const dump = spawnSync(python, ["-c", "import json; from stormwatch.main import app; print(json.dumps(app.openapi()))"], {
  cwd: REPO,
  env: { ...process.env, PYTHONPATH: join(REPO, "backend") },
  encoding: "utf8",
  maxBuffer: 64 * 1024 * 1024,
});
if (dump.status !== 0) {
  console.error(`check-client: could not load the backend app's OpenAPI with ${python}:\n${dump.stderr}`);
  process.exit(1);
}
const live = JSON.parse(dump.stdout);
const committed = JSON.parse(readFileSync(OPENAPI, "utf8"));
const where = firstDifference(committed, live);
if (where) {
  console.error(`check-client: frontend/openapi.json is stale against the backend's OpenAPI (first difference at ${where}); run \`make client\``);
  process.exit(1);
}
const expected = await generate(committed);
if (readFileSync(SCHEMA_TS, "utf8") !== expected) {
  console.error("check-client: src/api/schema.ts differs from what `npm run client` generates from openapi.json; run `make client`");
  process.exit(1);
}
console.log(`check-client: openapi.json and schema.ts match the backend (${Object.keys(live.paths ?? {}).length} paths)`);
