// End-to-end: the built UI served by the real API, data seeded through the ingest API,
// driven in headless Debian Chromium. Each test leaves a screenshot in e2e/screenshots/.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch, steps, signIn, until as pollUntil } from "./support/browser.mjs";
import { createStorageTargets, enroll, seedMesh, seedStorage, smallFleet } from "./support/seed.mjs";
import { backfillRollups } from "./support/rollup.mjs";
import { FRONTEND, buildUnlessSkipped, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const WAIT = 30_000;
const ROUND_MS = 2_000;

let stack;
let browser;
let page;
let agents;
let base;
let targets = [];
let jitterLabel = "";
const { step, shot } = steps({ dir: SHOTS, page: () => page });
const until = (what, probe, timeoutMs = WAIT) => pollUntil(page, what, probe, timeoutMs);

/** Resolves after React has committed what the last finished response set (two frames). */
function frames() {
  return page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(undefined)))));
}

/** Microseconds from a formatted duration ("412 µs", "1.5 ms", "2.5 s"). */
function parseUs(text) {
  const m = /([\d.]+)\s*(µs|ms|s)\b/.exec(text);
  assert.ok(m, `a duration in "${text}"`);
  return Number(m[1]) * { "µs": 1, ms: 1_000, s: 1_000_000 }[m[2]];
}

const card = (name) => page.getByRole("region", { name, exact: true });
const summaryCount = async () => Number((await page.getByRole("table", { name: "Summary statistics" }).first().getByRole("cell").first().innerText()).replace(/,/g, ""));

describe("dashboard", { timeout: 600_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    buildUnlessSkipped();
    stack = await startStack({ log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    base = stack.info.url;
    agents = await enroll(base, stack.info.enrollment_token, smallFleet());
    const now = Date.now();
    await seedMesh(base, agents, now - 3 * 3600_000, now - 5_000, ROUND_MS, {
      shiftPair: ["aws-use1-a-1", "aws-euw1-a-1"],
      payloads: [64, 1024, 8192],
    });
    targets = await createStorageTargets(base, stack.info.api_key, [
      { name: "s3-use1", provider: "s3" },
      { name: "azure-eastus", provider: "azure" },
      { name: "gcs-us-east4", provider: "gcs" },
    ]);
    assert.equal(targets.length, 3, "three storage targets created through the API");
    const stored = await seedStorage(base, agents[0], targets, now - 7 * 86_400_000, now - 60_000, 3 * 3600_000);
    assert.ok(stored > 0, "storage samples ingested");
    await backfillRollups(stack.info, now - 3 * 3600_000, now, ["mesh", "quorum"]);
    await backfillRollups(stack.info, now - 7 * 86_400_000, now, ["storage"]);
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("a person logs in with the session cookie", async () => {
    await signIn(page, `${base}/overview?range=6h`, stack.info.email, stack.info.password, undefined, {
      beforeSubmit: async () => {
        await page.getByRole("heading", { name: "Stormwatch" }).waitFor();
        await shot("01-login");
      },
    });
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

  step("the map places the seeded regions by their metros and ranks paths by stretch", async () => {
    const map = card("Regions on the map");
    // Recharts draws each metro's label in the SVG, from the catalog's coordinates.
    for (const metro of ["dublin", "northern-virginia", "tokyo"]) await map.locator("svg text", { hasText: new RegExp(`^${metro}$`) }).first().waitFor();
    // Dublin-Tokyo, about 9,600 km: the seeded 205 ms is twice its fibre floor, the most of any.
    const first = await map.getByRole("list", { name: "Paths by stretch" }).getByRole("listitem").first().innerText();
    assert.match(first, /^(aws\/eu-west-1 → gcp\/asia-northeast1|gcp\/asia-northeast1 → aws\/eu-west-1): .* over 9,\d{3} km, 2\.\d\d× its floor of 9\d(\.\d)?\s?ms$/);
    await map.getByRole("button", { name: "p50 RTT" }).click();
    await map.getByText(/^Colour: p50 RTT from/).waitFor();
    await map.scrollIntoViewIfNeeded();
    await shot("04a-overview-map");
  });

  step("the jitter heatmap says it shows the standard deviation of RTT", async () => {
    const jitter = page.getByRole("button", { name: "jitter (σ)" });
    assert.match((await jitter.getAttribute("title")) ?? "", /standard deviation of RTT/);
    await jitter.click();
    await page.waitForURL(/stat=jitter/);
    const table = page.getByRole("table", { name: "jitter (σ) heatmap by node" });
    const cell = table.getByRole("button", { name: /^aws-use1-a-1 → aws-euw1-a-1: jitter \(σ\) \d/ });
    await cell.waitFor();
    // The pair view checks this value against the pair's standard deviation.
    jitterLabel = (await cell.getAttribute("aria-label")) ?? "";
    assert.ok(parseUs(jitterLabel.split("jitter (σ)")[1] ?? "") > 0, `a σ value in "${jitterLabel}"`);
    await page.getByLabel("Colour legend").getByText(/standard deviation of RTT over the range, like ping's mdev/).waitFor();
    await shot("04-overview-nodes-jitter");
  });

  step("a click on a cell opens the pair with banded timeline, losses, steps, histogram and CDF", async () => {
    await page.getByRole("button", { name: "p50", exact: true }).click();
    await page.waitForURL(/stat=p50/);
    const quorumAnswer = page.waitForResponse((r) => r.url().includes("/analytics/quorum/compare"));
    const cell = page.getByRole("table", { name: /heatmap by node/ }).getByRole("button", { name: /^aws-use1-a-1 → aws-euw1-a-1:/ });
    await cell.click();
    await page.waitForURL(/\/pair\?/);
    await page.getByRole("heading", { name: /aws-use1-a-1 → aws-euw1-a-1/ }).waitFor();
    const summary = page.getByRole("table", { name: "Summary statistics" }).first();
    await summary.waitFor();
    // The heatmap's "jitter (σ)" is this pair's standard deviation of RTT over the same range.
    const stdUs = parseUs(await summary.getByRole("cell").nth(3).innerText());
    const sigmaUs = parseUs(jitterLabel.split("jitter (σ)")[1] ?? "");
    assert.ok(Math.abs(stdUs - sigmaUs) <= 0.02 * stdUs, `heatmap σ ${sigmaUs} µs matches the pair's std dev ${stdUs} µs`);
    const timeline = card("RTT timeline");
    await timeline.locator(".recharts-line").first().waitFor();
    // Both percentile bands are drawn and named in the legend.
    await until("two percentile bands", async () => (await timeline.locator(".recharts-area-area").count()) >= 2);
    for (const name of ["p50–p99", "p99–p99.99", "p50", "p99", "p99.99", "level (change points)", "loss"]) {
      await timeline.getByText(name, { exact: true }).first().waitFor();
    }
    // Losses (0.2% of probes) are marked in some windows; the level shift is a step.
    assert.ok((await timeline.locator(".recharts-scatter-symbol").count()) > 0, "loss marks drawn");
    await page.getByText(/level shifts?:/).first().waitFor();
    await card("Histogram").locator(".recharts-bar-rectangle").first().waitFor();
    await card("CDF").locator(".recharts-line").first().waitFor();
    // aws-euw1-a-1 is in none of aws-use1-a-1's quorum groups (its zone and region are us-east-1a).
    await (await quorumAnswer).finished();
    await frames();
    assert.equal(await card("Quorum latency").count(), 0, "no quorum card for a pair outside the source's groups");
    await shot("05-pair-node");
    await page.getByRole("button", { name: "Tail zoom (top 5%)" }).click();
    await page.waitForURL(/tail=1/);
    await card("CDF").getByText("slowest 5%: P(RTT > x), log–log").waitFor();
    await shot("06-pair-tail-zoom");
  });

  step("changing the range updates the URL and the view", async () => {
    const before = await summaryCount();
    await page.getByRole("button", { name: "15 min" }).click();
    await page.waitForURL(/range=15m/);
    const after = await until("the 15-minute sample count", async () => {
      const n = await summaryCount().catch(() => NaN);
      return Number.isFinite(n) && n !== before ? n : 0;
    });
    // One probe every 2 s: at most 450 in 15 minutes (the seeded data ends when seeding did).
    assert.ok(after > 0 && after <= (15 * 60_000) / ROUND_MS + 1 && after < before, `at most 450 samples in 15 min, got ${after} (6 h gave ${before})`);
    // The URL alone reproduces the view.
    const url = page.url();
    await page.goto(url);
    await page.getByRole("heading", { name: /aws-use1-a-1 → aws-euw1-a-1/ }).waitFor();
    assert.equal(await page.getByRole("button", { name: "15 min" }).getAttribute("aria-pressed"), "true");
    await page.getByRole("table", { name: "Summary statistics" }).first().waitFor();
    await card("RTT timeline").locator(".recharts-line").first().waitFor();
    await card("Histogram").locator(".recharts-bar-rectangle").first().waitFor();
    await card("CDF").locator(".recharts-line").first().waitFor();
    await shot("07-pair-range-15m");
  });

  step("a custom absolute range shows exactly that window", async () => {
    const from = new Date(Math.floor((Date.now() - 100 * 60_000) / 60_000) * 60_000);
    const to = new Date(from.getTime() + 30 * 60_000);
    await page.getByRole("button", { name: "Custom" }).click();
    await page.getByLabel("From (UTC)").fill(from.toISOString().slice(0, 16));
    await page.getByLabel("To (UTC)").fill(to.toISOString().slice(0, 16));
    await page.getByRole("button", { name: "Apply" }).click();
    await page.waitForURL(/range=custom/);
    const params = new URL(page.url()).searchParams;
    assert.equal(params.get("from"), from.toISOString());
    assert.equal(params.get("to"), to.toISOString());
    await card("Summary").getByText(`${from.toISOString().slice(0, 16)} → ${to.toISOString().slice(0, 16)}`).waitFor();
    // One probe every 2 s: 900 in the 30 minutes, whatever the time now.
    const n = await until("the custom-range sample count", async () => {
      const v = await summaryCount().catch(() => NaN);
      return Math.abs(v - 900) <= 1 ? v : 0;
    });
    assert.ok(Math.abs(n - 900) <= 1, `900 samples in the custom 30 min, got ${n}`);
    await card("RTT timeline").locator(".recharts-line").first().waitFor();
    await shot("08-pair-custom-range");
  });

  step("the quorum card appears for a pair inside one of the source's quorum groups", async () => {
    await page.goto(`${base}/overview?range=1h&level=node&stat=p50`);
    await page.getByRole("table", { name: /heatmap by node/ }).getByRole("button", { name: /^aws-use1-a-1 → aws-use1-a-2:/ }).click();
    await page.waitForURL(/\/pair\?/);
    await page.getByRole("heading", { name: /aws-use1-a-1 → aws-use1-a-2/ }).waitFor();
    const quorum = card("Quorum latency");
    await quorum.getByRole("heading", { name: "zone-majority (Q2/2)" }).waitFor();
    // Only the group holding the destination: aws-use1-a-1 has no region-majority (one zone).
    assert.equal(await quorum.getByRole("heading", { level: 3 }).count(), 1);
    await quorum.getByRole("table", { name: "Summary statistics" }).waitFor();
    await quorum.locator(".recharts-line").first().waitFor();
    await shot("09-pair-quorum");
  });

  step("distributions show box plots per topology class and payload size", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Distributions" }).click();
    await page.getByRole("heading", { name: "Distributions" }).waitFor();
    await card("RTT by topology class").locator(".recharts-bar-rectangle").first().waitFor();
    await card("Payload size").locator(".recharts-bar-rectangle").first().waitFor();
    await card("Node pairs over time").locator(".recharts-line").first().waitFor();
    const ticks = (await card("RTT by topology class").locator("svg text").allTextContents()).join("|");
    for (const c of ["self", "same subnet", "cross subnet", "cross AZ", "cross region"]) assert.ok(ticks.includes(c), `class ${c} among ${ticks}`);
    await shot("10-distributions");
  });

  step("storage compares providers by object size, raw and RTT-adjusted, with its variants", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Storage" }).click();
    await page.getByRole("button", { name: "7 d" }).click();
    const put = page.getByRole("table", { name: "Median PUT latency by provider and object size" });
    await put.waitFor();
    for (const p of ["s3", "azure", "gcs"]) await put.getByRole("columnheader", { name: p }).waitFor();
    await put.getByRole("cell", { name: "10 MB" }).waitFor();
    await page.getByRole("table", { name: "Median GET latency by provider and object size" }).waitFor();
    await card("PUT CDF").locator(".recharts-line").first().waitFor();
    await card("Daily medians").locator(".recharts-line").first().waitFor();
    const perBit = card("Latency per bit");
    await perBit.locator(".recharts-line").first().waitFor();
    await perBit.getByText("ns per bit: raw median / object bits", { exact: false }).waitFor();
    const perBitRaw = await perBit.locator(".recharts-line-curve").first().getAttribute("d");

    // Compression: plain beside gzip-9 for every provider and size.
    const gzip = page.getByRole("table", { name: "Compression variant" });
    await gzip.getByRole("columnheader", { name: "gzip-9" }).waitFor();
    assert.equal(await gzip.getByRole("row").count(), 1 + 3 * 5, "a row per provider and size");
    // Replication: std dev and p90 by copies; consistency: read-after-write CDFs; concurrency: throughput by level.
    const repl = card("Replication");
    await repl.locator(".recharts-line").first().waitFor();
    assert.ok((await repl.locator(".recharts-line").count()) >= 2, "std dev and p90 curves");
    for (const k of [1, 2, 3]) await repl.getByText(`${k} copies`, { exact: true }).first().waitFor();
    const cons = card("Time to consistency");
    await cons.locator(".recharts-line").first().waitFor();
    for (const p of ["s3", "azure", "gcs"]) await cons.getByText(`${p} read-after-write`, { exact: true }).waitFor();
    const conc = card("Concurrency scaling");
    await conc.locator(".recharts-line").first().waitFor();
    assert.equal(await conc.locator(".recharts-line").count(), 3, "one throughput curve per provider");
    const concTicks = (await conc.locator("svg text").allTextContents()).map((t) => t.trim());
    for (const c of ["1", "2", "4", "8", "16", "32"]) assert.ok(concTicks.includes(c), `concurrency ${c} among the ticks ${concTicks}`);
    await shot("11-storage-raw");

    const firstCell = () => put.getByRole("row").nth(1).getByRole("cell").nth(1).innerText();
    const rawCell = await firstCell();
    await page.getByRole("button", { name: "RTT-adjusted" }).click();
    await page.waitForURL(/adjust=rtt/);
    const adjCell = await until("RTT-adjusted medians", async () => {
      const v = await firstCell();
      return v !== rawCell ? v : "";
    });
    assert.ok(parseUs(adjCell) < parseUs(rawCell), `the adjusted median ${adjCell} is below the raw ${rawCell}`);
    await perBit.getByText("ns per bit: RTT-adjusted median / object bits", { exact: false }).waitFor();
    await until("the per-bit curve to follow the toggle", async () => (await perBit.locator(".recharts-line-curve").first().getAttribute("d")) !== perBitRaw);
    await shot("12-storage-adjusted");
  });

  step("auto-refresh fetches again after the interval, over the slid range", async () => {
    const first = page.waitForRequest((r) => r.url().includes("/analytics/mesh/heatmap"));
    await page.goto(`${base}/overview?range=1h&level=region&stat=p50`);
    const firstEnd = Date.parse(new URL((await first).url()).searchParams.get("end") ?? "");
    await page.getByRole("table", { name: /heatmap by region/ }).getByRole("button").first().waitFor();
    const refreshed = page.waitForRequest((r) => r.url().includes("/analytics/mesh/heatmap"), { timeout: 25_000 });
    const t0 = Date.now();
    await page.getByLabel("Auto-refresh").selectOption("10s");
    await page.waitForURL(/refresh=10s/);
    const req = await refreshed;
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 9_000, `the next request waits for the 10 s interval, came after ${elapsed} ms`);
    const end = Date.parse(new URL(req.url()).searchParams.get("end") ?? "");
    assert.ok(end - firstEnd >= 9_000, `the refreshed request's range ends later (${end - firstEnd} ms)`);
    const res = await req.response();
    assert.equal(res?.status(), 200);
    await res?.finished();
    await frames();
    await page.getByRole("table", { name: /heatmap by region/ }).getByRole("button", { name: /^us-east-1 → eu-west-1: p50 / }).waitFor();
    await shot("13-overview-auto-refresh");
    await page.getByLabel("Auto-refresh").selectOption("");
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
    await shot("14-fleet");
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
    await shot("15-settings");
    const toggle = page.getByRole("button", { name: /Switch to (light|dark) theme/ });
    if ((await toggle.getAttribute("aria-label")) === "Switch to light theme") await toggle.click();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "light");
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Overview" }).click();
    await page.getByRole("table", { name: /heatmap/ }).getByRole("button").first().waitFor();
    await shot("16-overview-light");
  });

  step("keyboard reaches the heatmap cells and opens a pair with Enter", async () => {
    await page.goto(`${base}/overview?range=1h&level=region`);
    const heatmap = page.getByRole("table", { name: /heatmap by region/ });
    await heatmap.getByRole("button").first().waitFor();
    const focusedCell = () => page.evaluate(() => /heatmap/.test(document.activeElement?.closest("table")?.getAttribute("aria-label") ?? "") && document.activeElement?.tagName === "BUTTON");
    for (let i = 0; i < 60 && !(await focusedCell()); i++) await page.keyboard.press("Tab");
    assert.ok(await focusedCell(), "Tab reaches a heatmap cell");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/pair\?/);
    await page.getByRole("table", { name: "Summary statistics" }).first().waitFor();
    await card("RTT timeline").locator(".recharts-line").first().waitFor();
    await shot("17-pair-region-keyboard");
  });
});
