// End-to-end alerts: the built UI on the real API with a Celery worker and beat evaluating
// rules. A person writes a p99 rule in the editor, sees its backtest find the spike injected
// into the stored history, saves it, sees it fire on a live spike posted through the ingest
// API (alerts page, heatmap cell, pair banner) and silences it. Screenshots in e2e/screenshots/.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch, pick, steps, signIn, unpickAll } from "./support/browser.mjs";
import { enroll, postBatch, seedMesh, smallFleet } from "./support/seed.mjs";
import { backfillRollups } from "./support/rollup.mjs";
import { FRONTEND, buildUnlessSkipped, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const WAIT = 30_000;
// A p99 needs 100 samples in a window: rounds every 500 ms give 120 per minute and pair.
const ROUND_MS = 500;
const SPIKE_US = 50_000;
const RULE = "e2e p99 spike";
const SRC = "aws-use1-a-1";
const DST = "aws-use1-a-2";

let stack;
let browser;
let page;
let agents;
let base;
let spikeFrom = 0;
const { step, shot } = steps({ dir: SHOTS, page: () => page, failPrefix: "alerts-" });

/** Mesh samples of one pair at a fixed RTT every stepMs over [fromMs, toMs) — the injected spike. */
async function postSpike(src, dst, fromMs, toMs, stepMs) {
  const mesh = { peers: [dst.id], time_us: [], peer_idx: [], round: [], payload_bytes: [], rtt_us: [], status: [] };
  for (let t = fromMs, i = 0; t < toMs; t += stepMs, i++) {
    // Off the seeded rounds' microseconds and round numbers, so no sample collides with one.
    mesh.time_us.push(t * 1000 + 777);
    mesh.peer_idx.push(0);
    mesh.round.push(900_000_000 + Math.floor(t / stepMs));
    mesh.payload_bytes.push(1024);
    mesh.rtt_us.push(SPIKE_US);
    mesh.status.push(0);
  }
  if (mesh.time_us.length) await postBatch(base, src, { mesh });
  return mesh.time_us.length;
}

describe("alerts", { timeout: 900_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    buildUnlessSkipped();
    stack = await startStack({ withWorker: true, log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    base = stack.info.url;
    // All six agents make every topology class a pair of the fleet; three of them measure.
    agents = (await enroll(base, stack.info.enrollment_token, smallFleet())).slice(0, 3);
    const now = Date.now();
    await seedMesh(base, agents, now - 90 * 60_000, now - 5_000, ROUND_MS, { lossRate: 0 });
    // The history's spike: 5 minutes of 50 ms on one pair, 45 minutes ago.
    const [src, dst] = [agents.find((a) => a.name === SRC), agents.find((a) => a.name === DST)];
    await postSpike(src, dst, now - 45 * 60_000, now - 40 * 60_000, 250);
    await backfillRollups(stack.info, now - 90 * 60_000, now, ["mesh"]);
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("a person logs in and opens the alerts page from the navigation", async () => {
    await signIn(page, `${base}/overview?range=1h`, stack.info.email, stack.info.password);
    const toggle = page.getByRole("button", { name: /Switch to (light|dark) theme/ });
    if ((await toggle.getAttribute("aria-label")) === "Switch to dark theme") await toggle.click();
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Alerts" }).click();
    await page.getByRole("heading", { name: "Alerts", level: 1 }).waitFor();
    await page.getByText("Nothing is firing.").waitFor();
  });

  step("the rule editor backtests a p99 rule over stored data and marks the one spike", async () => {
    await page.getByRole("link", { name: "New rule" }).click();
    await page.getByRole("heading", { name: "New alert rule" }).waitFor();
    await page.getByRole("textbox", { name: "Name" }).fill(RULE);
    await page.getByRole("combobox", { name: "Metric" }).selectOption("mesh_rtt");
    await page.getByRole("combobox", { name: "Statistic" }).selectOption("p99");
    await page.getByRole("combobox", { name: "Window" }).selectOption("60");
    await pick(page, "Sources", SRC);
    await pick(page, "Destinations", DST);
    await page.getByRole("combobox", { name: "Condition" }).selectOption("above");
    await page.getByRole("spinbutton", { name: "Threshold (ms)" }).fill("20");
    await page.getByRole("combobox", { name: "Severity" }).selectOption("critical");
    await page.getByRole("textbox", { name: "Labels (key=value, …)" }).fill("team=net");
    const save = page.getByRole("button", { name: "Save rule" });
    assert.equal(await save.isDisabled(), true, "saving waits for a backtest");

    await page.getByRole("button", { name: "Run backtest" }).click();
    const count = page.getByText(/Would have fired/);
    await count.waitFor({ timeout: 60_000 });
    assert.match(await count.innerText(), /Would have fired 1 time in the last [0-9.]+ (min|h|days?) over 1 matched series/);
    await page.getByRole("figure", { name: "Backtest timeline with 1 firing marked" }).waitFor();
    const rows = page.getByRole("table", { name: "Backtest firings" }).getByRole("row");
    assert.equal(await rows.count(), 2, "one firing listed");
    const row = await rows.nth(1).innerText();
    assert.match(row, new RegExp(`${SRC} → ${DST}`));
    // Older windows come from rollup sketches, which keep values to 1%.
    const peakMs = Number(/([\d.]+) ms$/.exec(row.trim())?.[1]);
    assert.ok(Math.abs(peakMs - SPIKE_US / 1000) <= 1, `the spike's peak (${row})`);
    // The chart draws the series and the shaded firing band.
    assert.ok((await page.locator(".backtest .recharts-line").count()) >= 2, "series and threshold lines");
    assert.equal(await page.locator(".backtest .recharts-reference-area").count(), 1, "one firing band");
    await shot("alerts-editor-backtest");

    assert.equal(await save.isDisabled(), false);
    await save.click();
    await page.getByRole("table", { name: "Alert rules" }).getByRole("link", { name: RULE }).waitFor();
  });

  step("every topology class the rule editor offers backtests without an error", async () => {
    await page.getByRole("link", { name: "New rule" }).click();
    await page.getByRole("heading", { name: "New alert rule" }).waitFor();
    await page.getByRole("combobox", { name: "Metric" }).selectOption("mesh_rtt");
    await page.getByRole("combobox", { name: "Statistic" }).selectOption("p99");
    await page.getByRole("combobox", { name: "Condition" }).selectOption("above");
    await page.getByRole("spinbutton", { name: "Threshold (ms)" }).fill("20");
    await page.getByRole("combobox", { name: "Topology class" }).click();
    const options = page.getByRole("listbox", { name: "Topology class" }).getByRole("option");
    await options.first().waitFor();
    const offered = await options.evaluateAll((os) => os.map((o) => ({ value: o.dataset.value, label: o.textContent })));
    const form = page.getByRole("form", { name: "New alert rule" });
    for (const { value, label } of offered) {
      await unpickAll(page, "Topology class");
      await pick(page, "Topology class", label);
      await page.getByRole("button", { name: "Run backtest" }).click();
      const count = page.getByText(/Would have fired/);
      const error = form.getByRole("alert");
      await count.or(error).first().waitFor({ timeout: 60_000 });
      assert.equal(await error.count(), 0, `backtest with topology class ${value}: ${(await error.allInnerTexts()).join(" | ")}`);
      assert.match(await count.innerText(), /Would have fired \d+ times? in the last .* over \d+ matched series/);
    }
    // The one cross-subnet pair (two subnets of one zone) holds the spike in one direction.
    assert.deepEqual(offered.map((o) => o.value).toSorted(), ["cross_az", "cross_provider", "cross_region", "cross_subnet", "same_subnet", "self"]);
    await unpickAll(page, "Topology class");
    await pick(page, "Topology class", "cross subnet");
    await page.getByRole("button", { name: "Run backtest" }).click();
    await page.getByText(/Would have fired 1 time in the last .* over 2 matched series/).waitFor({ timeout: 60_000 });
    await page.getByRole("button", { name: "Cancel" }).click();
  });

  step("a live spike posted through the ingest API fires the rule and the alerts page shows why", async () => {
    const [src, dst] = [agents.find((a) => a.name === SRC), agents.find((a) => a.name === DST)];
    await page.getByRole("group", { name: "Section" }).getByRole("button", { name: "Alerts" }).click();
    spikeFrom = Date.now();
    let posted = spikeFrom - 5_000;
    const firing = page.getByRole("list", { name: "Firing alerts" }).getByRole("listitem").filter({ hasText: RULE });
    // Keep the spike going (as a real one would) until the alert shows; the page polls every 10 s.
    const deadline = Date.now() + 180_000;
    while (!(await firing.count())) {
      assert.ok(Date.now() < deadline, "the alert fired within 180 s of the spike's first sample");
      const now = Date.now();
      await postSpike(src, dst, posted, now, 250);
      posted = now;
      await page.waitForTimeout(1_000);
    }
    const seenAfterS = (Date.now() - spikeFrom) / 1000;
    process.stderr.write(`alert shown on the alerts page ${seenAfterS.toFixed(1)} s after the spike's first sample\n`);
    await firing.getByText(RULE).click();
    const series = firing.getByRole("table", { name: "Agreeing series" });
    await series.waitFor();
    assert.match(await series.innerText(), new RegExp(`${SRC} → ${DST}`));
    assert.match(await series.innerText(), /50(\.0)? ms/);
    assert.match(await series.innerText(), /20(\.0)? ms/, "the threshold beside the value");
    await firing.getByRole("list", { name: "Transitions" }).getByText(/firing/).waitFor();
    const link = firing.getByRole("link", { name: "Open the dashboard view" });
    assert.match((await link.getAttribute("href")) ?? "", /^\/pair\?/);
    await shot("alerts-page-firing");
  });

  step("the firing alert marks its heatmap cell and the pair page links back to it", async () => {
    await page.goto(`${base}/overview?range=1h&level=node&stat=p99`);
    const cell = page.getByRole("button", { name: new RegExp(`^${SRC} → ${DST}: .*firing: ${RULE}$`) });
    await cell.waitFor();
    assert.equal(await cell.getAttribute("class"), "alerting");
    const others = page.getByRole("button", { name: /firing:/ });
    assert.equal(await others.count(), 1, "only the spiking pair's cell is marked");
    await shot("heatmap-firing-cell");
    await cell.click();
    const banner = page.getByRole("alert", { name: "Firing alerts on this pair" });
    await banner.waitFor();
    await banner.getByRole("link", { name: RULE }).click();
    await page.getByRole("list", { name: "Firing alerts" }).waitFor();
    assert.match(page.url(), /\/alerts\?.*alert=/);
  });

  step("silencing the firing rule from the alerts page lists an active silence with who and why", async () => {
    await page.getByRole("button", { name: `Silence ${RULE}` }).click();
    const form = page.getByRole("form", { name: "New silence" });
    await form.getByRole("combobox", { name: "For" }).selectOption("60");
    await form.getByRole("textbox", { name: "Comment" }).fill("e2e: known spike");
    await form.getByRole("button", { name: "Create silence" }).click();
    await form.waitFor({ state: "detached" });
    await page.getByRole("group", { name: "Section" }).getByRole("button", { name: "Silences & maintenance" }).click();
    const row = page.getByRole("table", { name: "Silences" }).getByRole("row").filter({ hasText: "e2e: known spike" });
    await row.waitFor();
    const text = await row.innerText();
    assert.match(text, new RegExp(RULE));
    assert.match(text, /active/);
    assert.match(text, new RegExp(stack.info.email.replace(/[.+]/g, "\\$&")));
    await shot("alerts-silenced");
  });
});
