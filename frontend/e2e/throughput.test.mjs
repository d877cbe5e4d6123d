// End-to-end throughput: the built UI on the real API. Two agents are enrolled, an admin
// schedules an experiment between them through the API, and each direction's receiver posts
// its per-second samples through the real ingest API (forward: a clear high→low switch;
// reverse: flat). The Throughput page shows the region-pair matrix, the experiment's timeline
// with the switch marked at its second, and the month's budget. Screenshots in e2e/screenshots/.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch, steps, signIn } from "./support/browser.mjs";
import { enroll, postBatch } from "./support/seed.mjs";
import { FRONTEND, REPO, buildUnlessSkipped, startStack } from "./support/stack.mjs";

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
let past;
const { step, shot } = steps({ dir: SHOTS, page: () => page, failPrefix: "throughput-" });

// The API schedules only from now on, and a pair's statistics count an experiment once it has
// ended. Yesterday's experiment is planned by the same service code with yesterday's clock
// (in-process against the stack's database, as the rollup backfill does); its samples still
// arrive through the ingest API.
const PLAN_PAST = `
import asyncio, json, sys, uuid
from datetime import datetime
from stormwatch.core.db import get_sessionmaker
from stormwatch.models import Agent
from stormwatch.services.throughput import store

async def main(ini, resp, start, now, duration_s):
    async with get_sessionmaker()() as s:
        a = await s.get(Agent, uuid.UUID(ini))
        e = await store.create_experiment(s, a.org_id, {
            "initiator_agent_id": uuid.UUID(ini), "responder_agent_id": uuid.UUID(resp),
            "proto": "tcp", "start_at": datetime.fromisoformat(start),
            "duration_s": int(duration_s)}, datetime.fromisoformat(now))
        await s.commit()
        print(json.dumps({"id": str(e.id), "start_at": e.start_at.isoformat()}), flush=True)

asyncio.run(main(*sys.argv[1:]))
`;

function planPast(a, b, startMs) {
  const py = existsSync(join(REPO, ".venv", "bin", "python")) ? join(REPO, ".venv", "bin", "python") : "python3";
  const iso = (ms) => new Date(ms).toISOString().replace("Z", "+00:00");
  return new Promise((resolve, reject) => {
    const child = spawn(py, ["-c", PLAN_PAST, a.id, b.id, iso(startMs), iso(startMs - 120_000), String(DURATION_S)], {
      cwd: REPO,
      env: { ...process.env, PYTHONPATH: join(REPO, "backend"), DATABASE_URL: stack.info.database_url, REDIS_URL: stack.info.redis_url ?? "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err = (err + d).slice(-4000)));
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out.trim().split("\n").at(-1))) : reject(new Error(`planning yesterday's experiment failed (${code}): ${err}`))));
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
function direction(e, sender, startMs, rates) {
  return {
    throughput: {
      peers: [sender.id],
      time_us: rates.map((_, i) => (startMs + (i + 1) * 1000) * 1000),
      peer_idx: rates.map(() => 0),
      proto: rates.map(() => "tcp"),
      experiment_id: rates.map(() => e.id),
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
    buildUnlessSkipped();
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
    await postBatch(base, b, direction(exp, a, start, forward));
    await postBatch(base, a, direction(exp, b, start + DURATION_S * 1000, reverse));
    past = await planPast(a, b, Math.floor((Date.now() - 86_400_000) / 60_000) * 60_000);
    const pastStart = Date.parse(past.start_at);
    await postBatch(base, b, direction(past, a, pastStart, forward));
    await postBatch(base, a, direction(past, b, pastStart + DURATION_S * 1000, reverse));
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("an admin opens the Throughput page from the navigation and sees the region-pair matrix", async () => {
    await signIn(page, `${base}/overview`, stack.info.email, stack.info.password);
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
    // The switch lies between the last high second and the first low one; the page names the
    // nearest second, which is either second around start + SWITCH_S (the shaper switches on
    // its own clock, so a start near a half second may round either way).
    const second = (ms) => new Date(ms).toISOString().slice(11, 19);
    const due = start + SWITCH_S * 1000;
    const switchAt = `(?:${second(Math.floor(due / 1000) * 1000)}|${second(Math.ceil(due / 1000) * 1000)})`;
    const transitions = page.getByRole("list", { name: "Transitions" });
    await transitions.waitFor();
    const text = await transitions.innerText();
    const listed = new RegExp(`^forward aws-use1-a-1 → aws-euw1-a-1: at (${switchAt})Z \\(${SWITCH_S} s in\\), 8[45]\\d Mbit/s → 40\\d Mbit/s, after 1\\.2\\d GB$`).exec(text);
    assert.ok(listed, text);
    // The chart: a line at the switch's second and the two levels around it.
    const chart = page.locator(".tput-timeline");
    await chart.locator(".recharts-line").first().waitFor();
    assert.equal(await chart.locator(".recharts-line").count(), 2, "both directions drawn");
    const at = chart.locator(".transition-at");
    assert.equal(await at.count(), 1);
    // Recharts draws reference labels in their own layer: find them by their text.
    assert.equal(await chart.locator("text", { hasText: `switch ${listed[1]}Z` }).count(), 1, "the switch's label");
    assert.equal(await chart.locator("text", { hasText: /^8[45]\d Mbit\/s$/ }).count(), 1, "the level before");
    assert.equal(await chart.locator("text", { hasText: /^40\d Mbit\/s$/ }).count(), 1, "the level after");
    assert.equal(await chart.locator(".transition-level-before").count(), 1);
    assert.equal(await chart.locator(".transition-level-after").count(), 1);
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

  step("the budget shows what the experiments moved this month, and an admin sees the settings", async () => {
    const card = page.getByRole("region", { name: "Egress budget" });
    await card.waitFor();
    const used = await card.getByRole("definition").nth(1).innerText();
    // Both experiments' received bytes count when they fall in this UTC month.
    const month = (ms) => new Date(ms).toISOString().slice(0, 7);
    const runs = [exp, past].filter((e) => month(Date.parse(e.start_at)) === month(Date.now())).length;
    const bytes = runs * (SWITCH_S * HIGH + (DURATION_S - SWITCH_S) * LOW + DURATION_S * REVERSE) * MB;
    const gb = Number(/^([\d.]+) GB/.exec(used)?.[1]);
    assert.ok(Math.abs(gb - bytes / 1e9) / (bytes / 1e9) < 0.05, `used ${used} against ${(bytes / 1e9).toFixed(2)} GB`);
    assert.match(await card.innerText(), /budget\s*2\.00 TB/);
    await page.getByRole("form", { name: "Throughput settings" }).waitFor();
    await page.getByRole("form", { name: "Run an experiment now" }).waitFor();
    await shot("throughput-page");
  });
});
