// End-to-end: the demo fleet of `make run` (on a test's schedule) as a newcomer sees it:
// twelve real agents meshing through the WAN emulator fill the Overview heatmap within 60 s
// of the stack printing its URL, with the table's round trips; the Distributions page's
// "Node pairs over time" draws the class's pairs that have data; Storage compares the three
// emulated providers. Screenshots land in e2e/screenshots/demo-e2e-*.png.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch, signIn, stackLogs, steps } from "./support/browser.mjs";
import { FRONTEND, REPO, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const TABLE = JSON.parse(readFileSync(join(REPO, "agents", "internal", "wanem", "rtt_table.json"), "utf8"));

let stack;
let browser;
let page;
let readyAt = 0;
const { step, shot } = steps({ dir: SHOTS, page: () => page, failPrefix: "demo-", explain: () => (stack?.info.data_dir ? stackLogs(stack.info.data_dir) : "") });

/** The table's round trip between two regions (agents' region names), in ms. */
function tableMs(a, b) {
  const row = TABLE.pairs.find((p) => (p.a.endsWith(`/${a}`) && p.b.endsWith(`/${b}`)) || (p.a.endsWith(`/${b}`) && p.b.endsWith(`/${a}`)));
  assert.ok(row, `a table row for ${a} - ${b}`);
  return row.rtt_ms;
}

describe("demo fleet", { timeout: 600_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    if (!process.env.SW_SKIP_BUILD) {
      const b = spawnSync("npm", ["run", "build"], { cwd: FRONTEND, stdio: "inherit" });
      assert.equal(b.status, 0, "npm run build failed");
      const a = spawnSync("make", ["-s", "-C", join(REPO, "agents"), "build", "wanem"], { stdio: "inherit" });
      assert.equal(a.status, 0, "building the agent and the WAN emulator failed");
    }
    stack = await startStack({ withWorker: true, demo: "fast", timeoutMs: 600_000, log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    readyAt = Date.now();
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(60_000);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("the overview heatmap shows the demo fleet's regions within 60 s of start", async () => {
    await signIn(page, `${stack.info.url}/overview`, stack.info.email, stack.info.password, 55_000);
    const table = page.getByRole("table", { name: /heatmap by region/ });
    const regions = ["ap-northeast-2", "eu-west-1", "sa-east-1", "ap-south-1", "us-east4", "asia-southeast1"];
    // The default 1-hour range reads minute rollups; the newest minutes come raw.
    const deadline = readyAt + 60_000;
    for (;;) {
      const left = deadline - Date.now();
      assert.ok(left > 0, "the heatmap did not show every demo region within 60 s of start");
      try {
        await table.waitFor({ timeout: Math.min(left, 5_000) });
        let all = (await table.getByRole("button", { name: /^ap-northeast-2 → eu-west-1: p50 / }).count()) > 0;
        for (const r of regions) all &&= (await table.getByRole("rowheader", { name: r }).count()) > 0;
        if (all) break;
      } catch {
        // not drawn yet
      }
      await page.reload();
    }
    console.log(`heatmap with the demo fleet ${((Date.now() - readyAt) / 1000).toFixed(1)} s after start`);
    const cell = table.getByRole("button", { name: /^ap-northeast-2 → eu-west-1: p50 / });
    const label = await cell.getAttribute("aria-label");
    const ms = Number(/p50 ([\d.]+) ms/.exec(label ?? "")?.[1]);
    const want = tableMs("ap-northeast-2", "eu-west-1");
    assert.ok(Math.abs(ms / want - 1) <= 0.1, `Seoul → Dublin p50 within 10% of ${want} ms: "${label}"`);
    await shot("demo-e2e-overview");
  });

  step("node pairs over time draws cross-region pairs that have data, from one request", async () => {
    const seen = [];
    page.on("request", (r) => r.url().includes("/analytics/mesh/series") && seen.push(r.url()));
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Distributions" }).click();
    const card = page.getByRole("region", { name: "Node pairs over time", exact: true });
    // Right after start a pair may hold a single window: its line is drawn but has no length.
    await card.locator(".recharts-legend-item").first().waitFor();
    const lines = await card.locator(".recharts-legend-item").count();
    assert.ok(lines >= 2 && lines <= 8, `2-8 ranked pairs drawn, got ${lines}`);
    assert.equal(seen.filter((u) => u.includes("group_by=pair")).length, 1, `one series request for the pairs: ${seen.join("\n")}`);
    await shot("demo-e2e-distributions");
  });
});
