// Driver for bench/ui/run.sh (the UI is already built into frontend/dist).
import { readdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { launch } from "../../frontend/e2e/support/browser.mjs";
import { benchFleet, enroll, seedMesh } from "../../frontend/e2e/support/seed.mjs";
import { backfillRollups } from "../../frontend/e2e/support/rollup.mjs";
import { FRONTEND, startStack } from "../../frontend/e2e/support/stack.mjs";

const HOURS = Number(process.env.SW_BENCH_HOURS ?? 24);
const INTERVAL_S = Number(process.env.SW_BENCH_INTERVAL_S ?? 10);
const RUNS = Number(process.env.SW_BENCH_RUNS ?? 5);
const say = (s) => process.stderr.write(`[bench-ui] ${s}\n`);
const load = () => loadavg().map((x) => x.toFixed(2)).join(" ");

function bundleKbGz() {
  const dir = join(FRONTEND, "dist", "assets");
  let total = 0;
  for (const f of readdirSync(dir)) if (f.endsWith(".js")) total += gzipSync(readFileSync(join(dir, f)), { level: 9 }).length;
  return total / 1024;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

const { info, stop } = await startStack({ log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
let browser;
try {
  const fleet = benchFleet();
  const agents = await enroll(info.url, info.enrollment_token, fleet);
  const regions = new Set(fleet.map((a) => a.region)).size;
  const end = Date.now() - 5_000;
  const start = end - HOURS * 3600_000;
  const perRound = agents.length * agents.length;
  const seeding = `${agents.length} agents, ${HOURS} h, one round per ${INTERVAL_S} s per agent (${perRound} samples a round, ${(perRound / INTERVAL_S).toFixed(1)} samples/s fleet-wide)`;
  const t0 = Date.now();
  let last = 0;
  const n = await seedMesh(info.url, agents, start, end, INTERVAL_S * 1000, {
    shiftPair: [fleet[0].name, fleet[2].name],
    concurrency: 2,
    onProgress: (k) => {
      if (k - last > 500_000) {
        last = k;
        say(`${k} samples posted`);
      }
    },
  });
  say(`seeded ${seeding}: ${n} mesh samples in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  // The rollups the worker would have built over the day, built now with its own task.
  const t1 = Date.now();
  await backfillRollups(info, start, end, ["mesh", "quorum"]);
  say(`rollups backfilled for ${HOURS} h in ${((Date.now() - t1) / 1000).toFixed(1)} s`);

  browser = await launch();
  const page = browser.context.pages()[0] ?? (await browser.context.newPage());
  page.setDefaultTimeout(120_000);
  await page.goto(`${info.url}/overview`);
  await page.getByLabel("Email").fill(info.email);
  await page.getByLabel("Password").fill(info.password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.getByRole("navigation", { name: "Main" }).waitFor();

  // Interactive = the 24 h heatmap is drawn with every pair as a focusable button, measured
  // from navigation start of a full page load (cold JS, warm server). The region level is
  // the overview's default; the node level is the largest grid.
  const levels = [
    { level: "region", cells: regions * regions, grid: `${regions}x${regions}` },
    { level: "node", cells: agents.length * agents.length, grid: `${agents.length}x${agents.length}` },
  ];
  const measure = async ({ level, cells }) => {
    await page.goto(`${info.url}/overview?range=24h&level=${level}&stat=p50`, { waitUntil: "commit" });
    await page.waitForFunction((k) => document.querySelectorAll("table.heatmap td button").length >= k, cells, { timeout: 120_000, polling: "raf" });
    const ms = await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))));
    // Where the time went: the heatmap request itself, as the browser saw it.
    const api = await page.evaluate(() => {
      const e = performance.getEntriesByType("resource").find((r) => r.name.includes("/analytics/mesh/heatmap"));
      return e ? { start: e.startTime, dur: e.duration } : null;
    });
    return { ms, api };
  };
  const load0 = load();
  const results = new Map(levels.map((l) => [l.level, { times: [], apiTimes: [] }]));
  // The first load of each level warms server caches and is reported apart; then the levels
  // alternate so a change in the host's load touches both alike.
  for (let i = 0; i < RUNS + 1; i++) {
    for (const l of levels) {
      const { ms, api } = await measure(l);
      if (i > 0) {
        results.get(l.level).times.push(ms);
        if (api) results.get(l.level).apiTimes.push(api.dur);
      }
      say(`${l.level} run ${i}: ${ms.toFixed(0)} ms${api ? ` (heatmap request sent at ${api.start.toFixed(0)} ms, answered in ${api.dur.toFixed(0)} ms)` : ""}${i === 0 ? " (warm-up)" : ""}`);
    }
  }
  const load1 = load();
  const kb = bundleKbGz();
  const med = levels.map((l) => ({ ...l, ms: median(results.get(l.level).times), api: results.get(l.level).apiTimes.length ? median(results.get(l.level).apiTimes) : null }));
  const slowest = med.reduce((a, b) => (b.ms > a.ms ? b : a));
  console.log(`ui: seeded ${seeding}`);
  for (const m of med) console.log(`ui: ${m.level} level (${m.grid}) interactive ${m.ms.toFixed(0)} ms median of ${RUNS}${m.api !== null ? `, heatmap API ${m.api.toFixed(0)} ms` : ""}`);
  console.log(`ui: host load average (1/5/15 min) ${load0} before the timed loads, ${load1} after`);
  console.log(`ui: the figure below is the slower level: ${slowest.level} (${slowest.grid})`);
  console.log(`ui: overview interactive ${slowest.ms.toFixed(0)} ms, bundle ${kb.toFixed(1)} kB gz`);
} finally {
  await browser?.close();
  await stop();
}
