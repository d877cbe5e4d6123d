// End-to-end: the built UI served by the real API, data seeded through the ingest API,
// driven in headless Debian Chromium. Each test leaves a screenshot in e2e/screenshots/.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch } from "./support/browser.mjs";
import { createStorageTargets, enroll, seedMesh, seedStorage, smallFleet } from "./support/seed.mjs";
import { backfillRollups } from "./support/rollup.mjs";
import { FRONTEND, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const WAIT = 30_000;

let stack;
let browser;
let page;
let agents;
let base;
let targets = [];

async function shot(name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/** A test that leaves a "fail-..." screenshot of the page when it fails. */
function step(name, fn) {
  test(name, async (t) => {
    try {
      await fn(t);
    } catch (e) {
      await page?.screenshot({ path: join(SHOTS, `fail-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}.png`), fullPage: true }).catch(() => {});
      throw e;
    }
  });
}

describe("dashboard", { timeout: 600_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    if (!process.env.SW_SKIP_BUILD) {
      const b = spawnSync("npm", ["run", "build"], { cwd: FRONTEND, stdio: "inherit" });
      assert.equal(b.status, 0, "npm run build failed");
    }
    stack = await startStack({ log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    base = stack.info.url;
    agents = await enroll(base, stack.info.enrollment_token, smallFleet());
    const now = Date.now();
    await seedMesh(base, agents, now - 3 * 3600_000, now - 5_000, 2_000, {
      shiftPair: ["aws-use1-a-1", "aws-euw1-a-1"],
      payloads: [64, 1024, 8192],
    });
    targets = await createStorageTargets(base, stack.info.api_key, [
      { name: "s3-use1", provider: "s3" },
      { name: "azure-eastus", provider: "azure" },
      { name: "gcs-us-east4", provider: "gcs" },
    ]);
    await seedStorage(base, agents[0], targets, now - 7 * 86_400_000, now - 60_000, 3 * 3600_000);
    await backfillRollups(stack.info, now - 3 * 3600_000, now, ["mesh", "quorum"]);
    if (targets.length) await backfillRollups(stack.info, now - 7 * 86_400_000, now, ["storage"]);
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("a person logs in with the session cookie", async () => {
    await page.goto(`${base}/overview?range=6h`);
    await page.getByRole("heading", { name: "Stormwatch" }).waitFor();
    await page.getByLabel("Email").fill(stack.info.email);
    await page.getByLabel("Password").fill(stack.info.password);
    await shot("01-login");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("navigation", { name: "Main" }).waitFor();
    const cookies = await browser.context.cookies(base);
    assert.ok(cookies.some((c) => c.name === "sw_session" && c.httpOnly), "httpOnly session cookie set");
    assert.ok(cookies.some((c) => c.name === "sw_csrf" && !c.httpOnly), "readable CSRF cookie set");
    // Dark theme for the following screenshots; the settings test switches to light.
    const toggle = page.getByRole("button", { name: /Switch to (light|dark) theme/ });
    if ((await toggle.getAttribute("aria-label")) === "Switch to dark theme") await toggle.click();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "dark");
  });

  step("the overview heatmap shows the seeded regions", async () => {
    const table = page.getByRole("table", { name: /heatmap by region/ });
    await table.waitFor();
    for (const region of ["us-east-1", "eu-west-1", "asia-northeast1"]) {
      await table.getByRole("rowheader", { name: region }).waitFor();
    }
    const cell = table.getByRole("button", { name: /^us-east-1 → eu-west-1: p50 \d/ });
    await cell.waitFor();
    const label = await cell.getAttribute("aria-label");
    const ms = Number(/p50 ([\d.]+) ms/.exec(label ?? "")?.[1]);
    assert.ok(ms > 60 && ms < 80, `us-east-1 → eu-west-1 p50 is about 68-70 ms, got "${label}"`);
    await shot("02-overview-regions");
    await page.getByRole("button", { name: "p99.99" }).click();
    await page.waitForURL(/stat=p99_99/);
    await table.getByRole("button", { name: /^us-east-1 → eu-west-1: p99\.99 / }).waitFor();
    await page.getByRole("button", { name: "Nodes" }).click();
    await page.getByRole("table", { name: /heatmap by node/ }).getByRole("rowheader", { name: "aws-use1-a-1" }).waitFor();
    await shot("03-overview-nodes-p9999");
  });

  step("a click on a cell opens the pair with timeline, histogram, CDF and quorum", async () => {
    await page.getByRole("button", { name: "p50" }).click();
    const cell = page.getByRole("table", { name: /heatmap by node/ }).getByRole("button", { name: /^aws-use1-a-1 → aws-euw1-a-1:/ });
    await cell.click();
    await page.waitForURL(/\/pair\?/);
    await page.getByRole("heading", { name: /aws-use1-a-1 → aws-euw1-a-1/ }).waitFor();
    await page.getByRole("table", { name: "Summary statistics" }).first().waitFor();
    await page.locator("section[aria-label='RTT timeline'] .recharts-line").first().waitFor();
    await page.locator("section[aria-label='Histogram'] .recharts-bar-rectangle").first().waitFor();
    await page.locator("section[aria-label='CDF'] .recharts-line").first().waitFor();
    await page.getByText(/level shift/).first().waitFor();
    await page.getByRole("heading", { name: /zone-majority/ }).waitFor();
    await shot("04-pair-node");
    await page.getByRole("button", { name: "Tail zoom (top 5%)" }).click();
    await page.waitForURL(/tail=1/);
    await shot("05-pair-tail-zoom");
  });

  step("changing the range updates the URL and the view", async () => {
    const before = await page.getByRole("table", { name: "Summary statistics" }).first().locator("tbody td").first().innerText();
    await page.getByRole("button", { name: "15 min" }).click();
    await page.waitForURL(/range=15m/);
    await page.waitForFunction(
      (prev) => {
        const td = document.querySelector("table[aria-label='Summary statistics'] tbody td");
        return td && td.textContent !== prev;
      },
      before,
      { timeout: WAIT },
    );
    const after = await page.getByRole("table", { name: "Summary statistics" }).first().locator("tbody td").first().innerText();
    assert.notEqual(after, before, "sample count changes with the range");
    // The URL alone reproduces the view.
    const url = page.url();
    await page.goto(url);
    await page.getByRole("heading", { name: /aws-use1-a-1 → aws-euw1-a-1/ }).waitFor();
    assert.equal(await page.getByRole("button", { name: "15 min" }).getAttribute("aria-pressed"), "true");
    await page.getByRole("table", { name: "Summary statistics" }).first().waitFor();
    await page.locator("section[aria-label='RTT timeline'] .recharts-line").first().waitFor();
    await page.locator("section[aria-label='Histogram'] .recharts-bar-rectangle").first().waitFor();
    await page.locator("section[aria-label='CDF'] .recharts-line").first().waitFor();
    await shot("06-pair-range-15m");
  });

  step("distributions show box plots per topology class and payload size", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Distributions" }).click();
    await page.getByRole("heading", { name: "Distributions" }).waitFor();
    await page.locator("section[aria-label='RTT by topology class'] .recharts-bar-rectangle").first().waitFor();
    await page.locator("section[aria-label='Payload size'] .recharts-bar-rectangle").first().waitFor();
    await page.locator("section[aria-label='Node pairs over time'] .recharts-line").first().waitFor();
    const ticks = await page.locator("section[aria-label='RTT by topology class'] svg text").allTextContents();
    for (const c of ["self", "same subnet", "cross subnet", "cross AZ", "cross region"]) assert.ok(ticks.join("|").includes(c), `class ${c} among ${ticks}`);
    await shot("07-distributions");
  });

  step("storage compares providers by object size, raw and RTT-adjusted", async (t) => {
    if (targets.length === 0) {
      t.skip("this backend has no storage-target resource, so no storage samples can be ingested");
      return;
    }
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Storage" }).click();
    await page.getByRole("button", { name: "7 d" }).click();
    const put = page.getByRole("table", { name: "Median PUT latency by provider and object size" });
    await put.waitFor();
    for (const p of ["s3", "azure", "gcs"]) await put.getByRole("columnheader", { name: p }).waitFor();
    await put.getByRole("cell", { name: "10 MB" }).waitFor();
    await page.getByRole("table", { name: "Median GET latency by provider and object size" }).waitFor();
    await page.locator("section[aria-label='PUT CDF'] .recharts-line").first().waitFor();
    await page.locator("section[aria-label='Daily medians'] .recharts-line").first().waitFor();
    await shot("08-storage-raw");
    const rawCell = await put.locator("tbody tr").first().locator("td").nth(1).innerText();
    await page.getByRole("button", { name: "RTT-adjusted" }).click();
    await page.waitForURL(/adjust=rtt/);
    await page.getByRole("table", { name: "Median PUT latency by provider and object size" }).waitFor();
    const adjCell = await page.getByRole("table", { name: "Median PUT latency by provider and object size" }).locator("tbody tr").first().locator("td").nth(1).innerText();
    assert.notEqual(adjCell, rawCell, "RTT adjustment changes the medians");
    await shot("09-storage-adjusted");
  });

  step("the fleet lists the agents and hands out an enrollment command", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Fleet" }).click();
    const table = page.getByRole("table", { name: "Agents" });
    await table.waitFor();
    for (const a of agents) await table.getByRole("cell", { name: a.name, exact: true }).waitFor();
    await page.getByLabel("Token name").fill("e2e-token");
    await page.getByRole("button", { name: "Create enrollment token" }).click();
    const cmd = await page.getByLabel("Enrollment command").innerText();
    assert.match(cmd, /swe_/);
    await shot("10-fleet");
  });

  step("settings create, show once and revoke an API key; the light theme applies", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Settings" }).click();
    await page.getByLabel("Key name").fill("e2e-key");
    await page.getByRole("button", { name: "Create API key" }).click();
    const key = await page.getByLabel("New API key").innerText();
    assert.match(key, /^swk_/);
    const me = await fetch(`${base}/api/v1/auth/me`, { headers: { authorization: `Bearer ${key.trim()}` } });
    assert.equal(me.status, 200, "the new key authenticates");
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Revoke API key e2e-key" }).click();
    await page.getByRole("table", { name: "API key list" }).getByText("revoked").first().waitFor();
    const again = await fetch(`${base}/api/v1/auth/me`, { headers: { authorization: `Bearer ${key.trim()}` } });
    assert.equal(again.status, 401, "the revoked key no longer authenticates");
    await page.getByRole("table", { name: "User list" }).getByRole("cell", { name: stack.info.email, exact: true }).waitFor();
    await shot("11-settings");
    const toggle = page.getByRole("button", { name: /Switch to (light|dark) theme/ });
    if ((await toggle.getAttribute("aria-label")) === "Switch to light theme") await toggle.click();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "light");
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Overview" }).click();
    await page.getByRole("table", { name: /heatmap/ }).waitFor();
    await shot("12-overview-light");
  });

  step("keyboard reaches the heatmap cells and opens a pair with Enter", async () => {
    await page.goto(`${base}/overview?range=1h&level=region`);
    const first = page.getByRole("table", { name: /heatmap by region/ }).getByRole("button").first();
    await first.waitFor();
    for (let i = 0; i < 60; i++) {
      await page.keyboard.press("Tab");
      const isCell = await page.evaluate(() => document.activeElement?.closest("table.heatmap") !== null);
      if (isCell) break;
    }
    assert.ok(await page.evaluate(() => document.activeElement?.closest("table.heatmap") !== null), "Tab reaches a heatmap cell");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/pair\?/);
    await page.getByRole("table", { name: "Summary statistics" }).first().waitFor();
    await shot("13-pair-region-keyboard");
  });
});
