// End-to-end: the Pair page shows what the analysis finds on a 75 ms path with a 1% step
// (seed 003 §4.4: AWS paths jump by ~0.75 ms) and rare 30x spikes. The timeline's default
// y-range fits the body, so the level line's two values lie inside the axis and visibly apart
// (and the chart waits for the body's range rather than drawing at full range first);
// the title names the agents although the link carries ids only; the histogram resolves the
// body; a tail percentile with too few samples beyond it is greyed; the route's change, traced 4
// minutes after the step, is marked beside the level shift and shown hop by hop.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch, steps, signIn, until as pollUntil } from "./support/browser.mjs";
import { enroll, postBatch, postTraces, rng } from "./support/seed.mjs";
import { FRONTEND, buildUnlessSkipped, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const WAIT = 60_000;
const BASE_US = 75_000;
const RATE_HZ = 5;
const HOURS = 2;

let stack;
let browser;
let page;
let base;
let pair;
const { step, shot } = steps({ dir: SHOTS, page: () => page });
const until = (what, probe, timeoutMs = WAIT) => pollUntil(page, what, probe, timeoutMs);

/** The level line's y pixels (distinct, rounded) and the y-axis extent, from the SVG. */
function levelGeometry() {
  return page.evaluate(() => {
    const path = document.querySelector(".level-line path");
    const axis = document.querySelector(".recharts-yAxis .recharts-cartesian-axis-line");
    if (!path || !axis) return null;
    const nums = (path.getAttribute("d") ?? "").match(/-?\d+(\.\d+)?/g)?.map(Number) ?? [];
    const ys = [];
    for (let i = 1; i < nums.length; i += 2) ys.push(Math.round(nums[i] * 10) / 10);
    const y1 = Number(axis.getAttribute("y1"));
    const y2 = Number(axis.getAttribute("y2"));
    return { levels: [...new Set(ys)].sort((a, b) => a - b), top: Math.min(y1, y2), bottom: Math.max(y1, y2) };
  });
}

/** Mesh samples of one pair: the base, +1% from the middle on, jitter, rare 30x spikes. */
async function seedPair(src, dst, startMs, endMs) {
  const r = rng(16);
  const mid = startMs + (endMs - startMs) / 2;
  const n = Math.floor(((endMs - startMs) / 1000) * RATE_HZ);
  for (let from = 0; from < n; from += 20_000) {
    const count = Math.min(20_000, n - from);
    const time_us = [];
    const rtt_us = [];
    for (let i = from; i < from + count; i++) {
      const t = startMs + (i * 1000) / RATE_HZ;
      let v = (t >= mid ? BASE_US * 1.01 : BASE_US) * Math.exp(0.003 * r.normal());
      if (r.next() < 0.0005) v *= 30;
      time_us.push(Math.round(t * 1000));
      rtt_us.push(Math.round(v));
    }
    await postBatch(base, src, {
      mesh: {
        peers: [dst.id],
        time_us,
        peer_idx: time_us.map(() => 0),
        round: time_us.map((_, k) => from + k),
        payload_bytes: time_us.map(() => 1024),
        rtt_us,
        status: time_us.map(() => 0),
      },
    });
  }
}

describe("pair fidelity", { timeout: 600_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    buildUnlessSkipped();
    stack = await startStack({ log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    base = stack.info.url;
    const fleet = [
      { name: "fid-use1", provider: "aws", region: "us-east-1", zone: "us-east-1a", subnet: "subnet-fid-1" },
      { name: "fid-euw1", provider: "aws", region: "eu-west-1", zone: "eu-west-1a", subnet: "subnet-fid-2" },
    ];
    const [a, b] = await enroll(base, stack.info.enrollment_token, fleet);
    pair = { a, b };
    const end = Math.floor((Date.now() - 60_000) / 60_000) * 60_000;
    pair.startMs = end - HOURS * 3600_000;
    pair.endMs = end;
    await seedPair(a, b, pair.startMs, pair.endMs);
    // Traces every 10 minutes; the route changes with the step (at the middle), and the first
    // trace on the new route comes 4 minutes later.
    const mid = pair.startMs + (pair.endMs - pair.startMs) / 2;
    const traces = [];
    for (let k = -6; k < 6; k++) {
      const t = mid + 240_000 + k * 600_000;
      if (t < pair.startMs || t >= pair.endMs) continue;
      const moved = k >= 0;
      traces.push({ dst: b, atMs: t, routers: moved ? ["198.51.100.1", "192.0.2.77", "192.0.2.78"] : ["198.51.100.1", "198.51.100.2"], stepUs: moved ? 26_000 : 25_000 });
    }
    const stored = await postTraces(base, a, traces);
    assert.equal(stored.path_changes, 1);
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("a link with agent ids only opens the pair under the agents' names", async () => {
    const iso = (ms) => new Date(ms).toISOString();
    const url = `${base}/pair?level=node&src=${pair.a.id}&dst=${pair.b.id}&range=custom&from=${iso(pair.startMs)}&to=${iso(pair.endMs)}`;
    await signIn(page, url, stack.info.email, stack.info.password);
    await page.getByRole("navigation", { name: "Main" }).waitFor();
    await page.goto(url);
    await page.getByRole("heading", { name: /fid-use1 → fid-euw1/ }).waitFor();
  });

  step("the timeline waits for the body's range instead of drawing at full range first", async () => {
    // The summary (which carries p1..p99.9) is held until the series and the level shifts
    // have been answered: the order a slow summary gives.
    let release;
    const held = new Promise((r) => (release = r));
    const summary = "**/api/v1/analytics/mesh/summary**";
    const passed = [];
    await page.route(summary, (route) => {
      passed.push(held.then(() => route.continue()));
    });
    try {
      const answered = Promise.all([
        page.waitForResponse((r) => r.url().includes("/api/v1/analytics/mesh/series")),
        page.waitForResponse((r) => r.url().includes("/api/v1/analytics/mesh/level-shifts")),
      ]);
      await page.reload();
      await answered;
      // Two frames: React has committed what those answers render.
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      assert.equal(await levelGeometry(), null, "no level line before the body's range is known");
    } finally {
      release();
      await Promise.all(passed);
      await page.unroute(summary);
    }
  });

  step("the level line's two values lie inside the y-axis and visibly apart", async () => {
    const geo = await until("the level line with two levels", async () => {
      const g = await levelGeometry();
      return g && g.levels.length === 2 ? g : null;
    });
    await shot("pair-fidelity-01-body");
    const [upper, lower] = geo.levels; // smaller y is higher on screen: the level after the step
    assert.ok(upper >= geo.top && lower <= geo.bottom, `levels ${geo.levels} within the axis ${geo.top}..${geo.bottom}`);
    assert.ok(lower - upper > 8, `a 1% step drawn ${lower - upper} px tall`);
    // Spikes above the fitted range are marks at its top edge.
    assert.ok((await page.locator(".recharts-scatter-symbol").count()) > 0, "tail marks drawn");
  });

  step("one click shows the full range, where the step flattens", async () => {
    const before = await levelGeometry();
    await page.getByRole("button", { name: "Full range" }).click();
    const flat = await until("the full-range axis", async () => {
      const g = await levelGeometry();
      return g && g.levels.length === 2 && g.levels[1] - g.levels[0] < before.levels[1] - before.levels[0] ? g : null;
    });
    assert.ok(flat.levels[1] - flat.levels[0] < before.levels[1] - before.levels[0]);
    await shot("pair-fidelity-02-full");
    await page.getByRole("button", { name: "Fit body (p1–p99.9)" }).click();
  });

  step("the route's change is marked beside the level shift and shown hop by hop", async () => {
    const marks = await until("a level-shift mark and a path-change mark", async () => {
      const xs = await page.evaluate(() => {
        const x = (sel) => [...document.querySelectorAll(`${sel} line`)].map((l) => Number(l.getAttribute("x1")));
        return { shift: x(".level-shift-mark"), path: x(".path-change-mark"), width: document.querySelector(".recharts-cartesian-grid")?.getBoundingClientRect().width ?? 0 };
      });
      return xs.shift.length === 1 && xs.path.length === 1 ? xs : null;
    });
    // Beside: within the 10 minutes a trace interval spans, of the range's 2 hours.
    const apart = Math.abs(marks.path[0] - marks.shift[0]);
    assert.ok(apart > 0 && apart < marks.width / 12 + 2, `the path change ${apart} px from the shift (chart ${marks.width} px)`);
    assert.match(await page.getByText(/level shift: .*path changed at/).innerText(), /from hop 2 after 198\.51\.100\.1/);
    const card = page.getByRole("region", { name: "Path", exact: true });
    await card.getByRole("table", { name: "Current path" }).waitFor();
    const changes = await card.getByRole("list", { name: "Path changes" }).innerText();
    assert.match(changes, /the path changed from hop 2 \(after 198\.51\.100\.1\)/);
    const differ = await card.getByRole("table", { name: "Two traces compared" }).getByRole("row", { name: /differs/ }).count();
    assert.equal(differ, 3, "hops 2, 3 and 4 differ between the traces either side of the change");
    await shot("pair-fidelity-04-path");
  });

  step("the histogram resolves the body and a thin tail percentile is greyed", async () => {
    const hist = page.getByRole("region", { name: "Histogram", exact: true });
    const bars = await until("histogram bars", async () => {
      const n = await hist.locator(".recharts-bar-rectangle").count();
      return n >= 10 ? n : null;
    });
    assert.ok(bars >= 10, `${bars} bars across the body`);
    const pct = page.getByRole("table", { name: "Percentiles" });
    const cells = pct.getByRole("cell");
    const heads = await pct.getByRole("columnheader").allInnerTexts();
    const i = heads.indexOf("p99.999");
    assert.ok(i >= 0, `p99.999 in ${heads}`);
    assert.equal(await cells.nth(i).getAttribute("aria-disabled"), "true");
    assert.equal(await cells.nth(heads.indexOf("p50")).getAttribute("aria-disabled"), null);
    await shot("pair-fidelity-03-histogram");
  });
});
