// The Content-Security-Policy the API sends is enforced by Chromium on every page of the app
// (signed out and in, with charts drawn from seeded data) and on /docs: not one violation.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe } from "node:test";
import { launch, signIn, stackLogs, steps } from "./support/browser.mjs";
import { backfillRollups } from "./support/rollup.mjs";
import { createStorageTargets, enroll, seedMesh, seedStorage, smallFleet } from "./support/seed.mjs";
import { FRONTEND, buildUnlessSkipped, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const WAIT = 60_000;

// Every route of App.tsx's router (and one it does not know), with the query a page needs
// to draw its charts.
const PAGES = [
  "/overview?range=1h",
  "/overview?range=1h&level=node",
  "/pair?level=region&src=us-east-1&dst=eu-west-1&range=1h",
  "/distributions?range=1h",
  "/storage?range=7d",
  "/throughput",
  "/fleet",
  "/settings",
  "/decide",
  "/decide/compression",
  "/decide/replication",
  "/decide/placement",
  "/decide/timeouts",
  "/decide/rankings",
  "/decide/pricing",
  "/alerts",
  "/alerts/rule",
  "/no-such-page",
];

let stack;
let browser;
let page;
let base;
/** Every violation seen, with the page it happened on. */
const violations = [];
let current = "(before the first page)";
const charts = new Map();
const { step } = steps({
  dir: SHOTS,
  page: () => page,
  failPrefix: "csp-",
  explain: () => stack && stackLogs(stack.info.data_dir ?? "", ["api"]),
});

/** The violations since index `from`, one a line. */
function since(from) {
  return violations.slice(from);
}
function report(list) {
  return list.map((v) => `${v.page}: ${v.text}`).join("\n");
}

/** Loads `path` afresh (so its document gets the policy), waits until it has settled. */
async function visit(path, ready) {
  current = path;
  await page.goto(`${base}${path}`, { waitUntil: "load" });
  await ready();
  // Lazy page chunks, queries and the charts they draw have all arrived.
  await page.waitForLoadState("networkidle", { timeout: WAIT });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(undefined)))));
}

describe("content security policy", { timeout: 900_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    buildUnlessSkipped();
    stack = await startStack({ log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    base = stack.info.url;
    const agents = await enroll(base, stack.info.enrollment_token, smallFleet());
    const now = Date.now();
    await seedMesh(base, agents, now - 3600_000, now - 5_000, 10_000, { payloads: [64, 1024] });
    const targets = await createStorageTargets(base, stack.info.api_key, [{ name: "s3-use1", provider: "s3" }]);
    await seedStorage(base, agents[0], targets, now - 2 * 86_400_000, now - 60_000, 3 * 3600_000);
    await backfillRollups(stack.info, now - 3600_000, now, ["mesh", "quorum"]);
    await backfillRollups(stack.info, now - 2 * 86_400_000, now, ["storage"]);

    browser = await launch();
    // Reported from inside each document through a binding, which the policy does not govern.
    await browser.context.exposeBinding("__swViolation", (_source, text) => violations.push({ page: current, text }));
    await browser.context.addInitScript(() => {
      document.addEventListener("securitypolicyviolation", (e) =>
        window.__swViolation(`securitypolicyviolation: ${e.effectiveDirective} blocked ${e.blockedURI || "(inline)"} at ${e.sourceFile}:${e.lineNumber} (${e.disposition})`),
      );
    });
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
    // Chromium also reports a violation on the console, the one place a blocked
    // document-level resource may show before any listener runs.
    page.on("console", (msg) => {
      if (/Content.Security.Policy/i.test(msg.text())) violations.push({ page: current, text: `console ${msg.type()}: ${msg.text()}` });
    });
    page.on("pageerror", (e) => {
      if (/Content.Security.Policy|unsafe-eval|unsafe-inline/i.test(e.message)) violations.push({ page: current, text: `page error: ${e.message}` });
    });
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("the sign-in page and signing in raise no violation", async () => {
    const from = violations.length;
    current = "/login";
    const r = await page.request.get(`${base}/overview`);
    assert.match(r.headers()["content-security-policy"] ?? "", /script-src 'self'(;|$)/, "the UI is served with the app's policy");
    await signIn(page, `${base}/overview?range=1h`, stack.info.email, stack.info.password, 120_000, {
      beforeSubmit: () => page.getByRole("heading", { name: "Stormwatch" }).waitFor(),
    });
    await page.getByRole("navigation", { name: "Main" }).waitFor();
    await page.waitForLoadState("networkidle", { timeout: WAIT });
    assert.deepEqual(since(from), [], report(since(from)));
  });

  step("every page of the app raises no violation", async () => {
    const from = violations.length;
    for (const path of PAGES) {
      await visit(path, async () => {
        await page.getByRole("navigation", { name: "Main" }).waitFor();
        await page.locator("main h1").first().waitFor();
      });
      charts.set(path, await page.locator(".recharts-surface").count());
    }
    assert.deepEqual(since(from), [], report(since(from)));
    // The pages were really drawn: Recharts' own styling went through the policy too.
    const drawn = [...charts].filter(([, n]) => n > 0).map(([p]) => p);
    assert.ok(drawn.length >= 3, `charts on at least three pages, got ${JSON.stringify([...charts])}`);
  });

  step("the API docs raise no violation and their inline script runs", async () => {
    const from = violations.length;
    await visit("/docs", () => page.locator(".swagger-ui .info .title").filter({ hasText: "Stormwatch API" }).waitFor());
    await page.locator(".opblock").first().waitFor();
    assert.deepEqual(since(from), [], report(since(from)));
  });
});
