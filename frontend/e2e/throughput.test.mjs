// End-to-end throughput: the built UI on the real API. Two agents are enrolled, an admin
// schedules an experiment between them through the API, and each direction's receiver posts
// its per-second samples through the real ingest API (forward: a clear high→low switch;
// reverse: flat). The Throughput page shows the region-pair matrix, the experiment's timeline
// with the switch marked at its second, and the month's budget. Screenshots in e2e/screenshots/.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch } from "./support/browser.mjs";
import { enroll, postBatch } from "./support/seed.mjs";
import { FRONTEND, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const WAIT = 30_000;
const DURATION_S = 30;
const SWITCH_S = 12;
const MB = 1e6 / 8; // bytes per second in one Mbit/s
const [HIGH, LOW, REVERSE] = [850, 400, 700];
const FLEET = [
  { name: "aws-use1-a-1", provider: "aws", region: "us-east-1", zone: "us-east-1a", subnet: "subnet-a1" },
  { name: "aws-euw1-a-1", provider: "aws", region: "eu-west-1", zone: "eu-west-1a", subnet: "subnet-e1" },
];

let stack;
let browser;
let page;
let base;
let agents;
let exp;

async function shot(name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

function step(name, fn) {
  test(name, async (t) => {
    try {
      await fn(t);
    } catch (e) {
      await page?.screenshot({ path: join(SHOTS, `fail-throughput-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}.png`), fullPage: true }).catch(() => {});
      throw e;
    }
  });
}

async function call(method, path, { body, token } = {}) {
  const res = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${token ?? stack.info.api_key}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${path} → ${res.status}: ${text.slice(0, 500)}`);
  return text ? JSON.parse(text) : null;
}

/** One direction as its receiver ships it: a sample per second, stamped at the second's end. */
function direction(receiver, sender, startMs, rates) {
  return {
    throughput: {
      peers: [sender.id],
      time_us: rates.map((_, i) => (startMs + (i + 1) * 1000) * 1000),
      peer_idx: rates.map(() => 0),
      proto: rates.map(() => "tcp"),
      experiment_id: rates.map(() => exp.id),
      direction: rates.map(() => "receive"),
      bytes_per_s: rates.map((r) => r * MB),
      loss_ratio: rates.map(() => null),
      jitter_us: rates.map(() => null),
    },
  };
}

describe("throughput", { timeout: 300_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    if (!process.env.SW_SKIP_BUILD) {
      const b = spawnSync("npm", ["run", "build"], { cwd: FRONTEND, stdio: "inherit" });
      assert.equal(b.status, 0, "npm run build failed");
    }
    stack = await startStack({ log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    base = stack.info.url;
    agents = await enroll(base, stack.info.enrollment_token, FLEET);
    // The agents report where their throughput probe listens, as a running agent does.
    for (const [i, a] of agents.entries()) await call("PATCH", "/agent/self", { token: a.token, body: { throughput_address: `10.0.${i}.5:7710` } });
    const settings = await call("GET", "/throughput/settings");
    const { updated_at: _stamp, ...body } = settings;
    await call("PUT", "/throughput/settings", { body: { ...body, monthly_budget_bytes: 2e12, price_per_gb_usd: 0.02, monthly_budget_usd: null } });
    const [a, b] = agents;
    exp = await call("POST", "/throughput/experiments", { body: { initiator_agent_id: a.id, responder_agent_id: b.id, proto: "tcp", duration_s: DURATION_S } });
    const start = Date.parse(exp.start_at);
    // Forward a → b, measured and shipped by b; then reverse b → a, shipped by a.
    const forward = Array.from({ length: DURATION_S }, (_, i) => (i < SWITCH_S ? HIGH : LOW) * (1 + 0.01 * Math.sin(i)));
    const reverse = Array.from({ length: DURATION_S }, (_, i) => REVERSE * (1 + 0.01 * Math.cos(i)));
    await postBatch(base, b, direction(b, a, start, forward));
    await postBatch(base, a, direction(a, b, start + DURATION_S * 1000, reverse));
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("an admin opens the Throughput page from the navigation and sees the region-pair matrix", async () => {
    await page.goto(`${base}/overview`);
    await page.getByLabel("Email").fill(stack.info.email);
    await page.getByLabel("Password").fill(stack.info.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    const toggle = page.getByRole("button", { name: /Switch to (light|dark) theme/ });
    if ((await toggle.getAttribute("aria-label")) === "Switch to dark theme") await toggle.click();
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Throughput" }).click();
    await page.getByRole("heading", { name: "Throughput", level: 1 }).waitFor();
    const matrix = page.getByRole("table", { name: "TCP throughput by region pair" });
    const fwd = matrix.getByRole("button", { name: /^us-east-1 → eu-west-1: TCP mean/ });
    await fwd.waitFor();
    const label = (await fwd.getAttribute("aria-label")) ?? "";
    const mean = Number(/mean ([\d.]+) Mbit\/s/.exec(label)?.[1]);
    const expected = (SWITCH_S * HIGH + (DURATION_S - SWITCH_S) * LOW) / DURATION_S;
    assert.ok(Math.abs(mean - expected) / expected < 0.02, `forward mean ${mean} against ${expected} (${label})`);
    assert.match(label, /1 experiment$/);
    const rev = matrix.getByRole("button", { name: /^eu-west-1 → us-east-1: TCP mean/ });
    assert.match((await rev.getAttribute("aria-label")) ?? "", /mean 70\d Mbit\/s/);
    await fwd.focus();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: /Experiments us-east-1 ⇄ eu-west-1/ }).waitFor();
  });

  step("the experiment's timeline marks the high→low switch at its second with both levels", async () => {
    const start = Date.parse(exp.start_at);
    const iso = new Date(start).toISOString().slice(0, 19).replace("T", " ");
    await page.getByRole("button", { name: `Open experiment aws-use1-a-1 → aws-euw1-a-1 at ${iso}Z` }).click();
    const switchAt = new Date(start + SWITCH_S * 1000).toISOString().slice(11, 19);
    const transitions = page.getByRole("list", { name: "Transitions" });
    await transitions.waitFor();
    const text = await transitions.innerText();
    assert.match(text, new RegExp(`^forward aws-use1-a-1 → aws-euw1-a-1: at ${switchAt}Z \\(${SWITCH_S} s in\\), 8[45]\\d Mbit/s → 40\\d Mbit/s, after 1\\.2\\d GB$`), text);
    // The chart: a line at the switch's second and the two levels around it.
    const chart = page.locator(".tput-timeline");
    await chart.locator(".recharts-line").first().waitFor();
    assert.equal(await chart.locator(".recharts-line").count(), 2, "both directions drawn");
    const at = chart.locator(".transition-at");
    assert.equal(await at.count(), 1);
    assert.equal((await at.innerText()).trim(), `switch ${switchAt}Z`);
    assert.match((await chart.locator(".transition-level-before").innerText()).trim(), /^8[45]\d Mbit\/s$/);
    assert.match((await chart.locator(".transition-level-after").innerText()).trim(), /^40\d Mbit\/s$/);
    // The marker sits where the x axis puts that second: between the first and last sample.
    const line = await at.locator("line").boundingBox();
    const plot = await chart.locator(".recharts-cartesian-grid").boundingBox();
    assert.ok(line && plot, "chart drawn");
    const fraction = (line.x - plot.x) / plot.width;
    const expected = (SWITCH_S - 1) / (2 * DURATION_S - 1);
    assert.ok(Math.abs(fraction - expected) < 0.02, `switch marker at ${fraction.toFixed(3)} of the axis, expected ${expected.toFixed(3)}`);
    const stats = await page.getByRole("table", { name: "Experiment statistics" }).innerText();
    assert.match(stats, /forward aws-use1-a-1 → aws-euw1-a-1/);
    assert.match(stats, /reverse aws-euw1-a-1 → aws-use1-a-1/);
    await shot("throughput-experiment");
  });

  step("the budget shows what the experiment used this month, and an admin sees the settings", async () => {
    const card = page.getByRole("region", { name: "Egress budget" });
    await card.waitFor();
    const used = await card.getByRole("definition").nth(1).innerText();
    const bytes = (SWITCH_S * HIGH + (DURATION_S - SWITCH_S) * LOW + DURATION_S * REVERSE) * MB;
    const gb = Number(/^([\d.]+) GB/.exec(used)?.[1]);
    assert.ok(Math.abs(gb - bytes / 1e9) / (bytes / 1e9) < 0.05, `used ${used} against ${(bytes / 1e9).toFixed(2)} GB`);
    assert.match(await card.innerText(), /budget\s*2\.00 TB/);
    await page.getByRole("form", { name: "Throughput settings" }).waitFor();
    await page.getByRole("form", { name: "Run an experiment now" }).waitFor();
    await shot("throughput-page");
  });
});
