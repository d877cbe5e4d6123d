// End-to-end: the Decide section on seeded data. Every advisor page is opened in headless
// Chromium, given its inputs, and must show its answer and each term of its equation;
// screenshots land in e2e/screenshots/advisors-*.png.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { launch, steps, signIn } from "./support/browser.mjs";
import { enroll, seedMesh, seedStorage, smallFleet } from "./support/seed.mjs";
import { backfillRollups } from "./support/rollup.mjs";
import { FRONTEND, buildUnlessSkipped, startStack } from "./support/stack.mjs";

const SHOTS = join(FRONTEND, "e2e", "screenshots");
const WAIT = 30_000;

let stack;
let browser;
let page;
let base;
const { step, shot } = steps({ dir: SHOTS, page: () => page, shotPrefix: "advisors-", failPrefix: "advisors-" });

/** A storage target in a priced region (the catalog has aws us-east-1), made with the API key. */
async function createTarget(apiKey) {
  const res = await fetch(`${base}/api/v1/storage-targets`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ name: "s3-use1", provider: "s3", region: "us-east-1", bucket: "stormwatch-probe", endpoint: "https://s3-use1.storage.invalid", credentials: { source: "none" }, contents: ["binary"], assign_all: true }),
  });
  const text = await res.text();
  assert.equal(res.status, 201, text);
  const body = JSON.parse(text);
  return { id: body.id, provider: "s3", name: "s3-use1" };
}

const decide = (name) => page.getByRole("navigation", { name: "Decide" }).getByRole("link", { name, exact: true });
const answer = () => page.getByRole("status", { name: "Answer" }).first();

async function termRows(table, symbols) {
  for (const s of symbols) await table.getByRole("rowheader", { name: s, exact: true }).waitFor();
}

describe("advisors", { timeout: 600_000 }, () => {
  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    buildUnlessSkipped();
    stack = await startStack({ log: (s) => process.env.SW_VERBOSE && process.stderr.write(s) });
    base = stack.info.url;
    const agents = await enroll(base, stack.info.enrollment_token, smallFleet());
    const now = Date.now();
    await seedMesh(base, agents, now - 3600_000, now - 5_000, 2_000);
    const target = await createTarget(stack.info.api_key);
    const stored = await seedStorage(base, agents[0], [target], now - 2 * 86_400_000, now - 60_000, 3 * 3600_000);
    assert.ok(stored > 0, "storage samples ingested");
    await backfillRollups(stack.info, now - 3600_000, now, ["mesh", "quorum"]);
    await backfillRollups(stack.info, now - 2 * 86_400_000, now, ["storage"]);
    browser = await launch();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    page.setDefaultTimeout(WAIT);
    if (process.env.SW_DEBUG) {
      page.on("response", (r) => r.url().includes("/advisors/") && process.stderr.write(`${r.request().method()} ${r.url()} ${r.status()}\n`));
      page.on("console", (m) => process.stderr.write(`console: ${m.text()}\n`));
    }
    await signIn(page, `${base}/decide`, stack.info.email, stack.info.password);
    await page.getByRole("navigation", { name: "Main" }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  step("the compression page shows equation (1)'s terms and its answer per size", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Decide" }).click();
    await page.getByRole("heading", { name: "Decide: compression" }).waitFor();
    const form = page.getByRole("form", { name: "Compression inputs" });
    await form.getByLabel("Content").selectOption("binary");
    await form.getByRole("button", { name: "Evaluate" }).click();
    const text = await answer().innerText();
    assert.match(text, /^Compression (pays|does not pay) for 1 kB objects$/);
    const terms = page.getByRole("table", { name: "Equation terms for 1 kB" });
    await termRows(terms, ["t_c", "C_CPU", "ΔS", "C_b", "C_s"]);
    // The data behind it: plain vs gzip latency for every seeded size.
    const latency = page.getByRole("table", { name: "Plain and gzip latency by size" });
    assert.equal(await latency.getByRole("row").count(), 6, "header + 5 sizes");
    await page.getByText(/^Latency: /).first().waitFor();
    await shot("compression");
  });

  step("the replication page shows equation (2)'s terms and std dev and p90 by copies", async () => {
    await decide("Replication").click();
    await page.getByRole("heading", { name: "Decide: replication" }).waitFor();
    await page.getByRole("form", { name: "Replication inputs" }).getByRole("button", { name: "Evaluate" }).click();
    assert.match(await answer().innerText(), /^Replication (pays|does not pay) for 1 kB objects$/);
    await termRows(page.getByRole("table", { name: "Equation terms for 1 kB" }), ["N_G", "C_V", "ΔV̄", "F", "S̄", "C_s", "C_G"]);
    const byCopies = page.getByRole("table", { name: "Std dev and p90 by copies for 1 kB" });
    assert.equal(await byCopies.getByRole("row").count(), 4, "header + first of 1, 2, 3");
    await shot("replication");
  });

  step("the placement page ranks the five policies on the measured RTT matrix", async () => {
    await decide("Placement").click();
    const form = page.getByRole("form", { name: "Placement inputs" });
    await form.getByLabel("Uploader").selectOption("asia-northeast1");
    await form.getByLabel("Downloader").selectOption("asia-northeast1");
    await form.getByRole("button", { name: "Simulate" }).click();
    const table = page.getByRole("table", { name: "Placement policies" });
    await table.waitFor();
    assert.match(await answer().innerText(), /^Fastest download: local/);
    const rows = await table.getByRole("row").allInnerTexts();
    assert.equal(rows.length, 6, "header + five policies");
    // Blocks uploaded and read in the same region: random is slowest, as in seed 001.
    assert.match(rows[5], /^5\s+random\b/);
    // The file's 16 blocks of 64 KiB are read at once, as a real client does.
    await page.getByText(/16 blocks of 64 (KiB|kB), 16 in flight/).waitFor();
    const matrix = page.getByRole("table", { name: "Measured RTT matrix" });
    await matrix.getByRole("rowheader", { name: "us-east-1" }).waitFor();
    await shot("placement");
  });

  step("the timeout page gives T with its terms, its sample support and T by hour", async () => {
    await decide("Timeouts").click();
    const form = page.getByRole("form", { name: "Timeout inputs" });
    await form.getByRole("combobox", { name: /^Timeout for/ }).selectOption("topology_class");
    await form.getByRole("combobox", { name: /^Topology class/ }).selectOption("cross_region");
    await form.getByLabel("Messages per second").fill("500");
    await form.getByLabel("Tolerated false timeouts per hour").fill("1");
    await form.getByRole("button", { name: "Find T" }).click();
    const text = await answer().innerText();
    assert.match(text, /^(Timeout T = [\d.,]+ (ms|s)|No timeout meets this rate)$/);
    // An hour of 0.5 Hz rounds cannot support a one-in-1.8-million quantile: it says so.
    const warning = page.getByRole("alert", { name: "Sample support warning" });
    assert.match(await warning.innerText(), /needed|loss rate/);
    await termRows(page.getByRole("table", { name: "Timeout terms" }), ["p", "q", "N", "L", "p·N", "N needed"]);
    await page.getByRole("table", { name: "Timeout by hour" }).waitFor();
    // At one false timeout an hour for one message a second the data suffices.
    await form.getByLabel("Messages per second").fill("1");
    await form.getByLabel("Tolerated false timeouts per hour").fill("36");
    await form.getByRole("button", { name: "Find T" }).click();
    await page.getByRole("status", { name: "Answer" }).filter({ hasText: /^Timeout T = / }).waitFor();
    await shot("timeouts");
  });

  step("the rankings page orders region pairs with a 95% interval for each", async () => {
    await decide("Rankings").click();
    const table = page.getByRole("table", { name: "Ranking" });
    await table.waitFor();
    const first = await table.getByRole("row").nth(1).innerText();
    assert.match(first, /^1\s/);
    assert.match(first, /–/, "an interval low – high");
    await page.getByText(/Intervals: order statistics/).waitFor();
    await shot("rankings");
  });

  step("an admin overrides a shipped price and reverts it", async () => {
    await decide("Prices").click();
    const form = page.getByRole("form", { name: "Set a price" });
    await form.getByLabel("Provider", { exact: true }).fill("aws");
    await form.getByLabel("Region", { exact: true }).fill("us-east-1");
    await form.getByLabel("Item").selectOption("egress_internet_per_gb");
    await form.getByLabel("Price (USD)").fill("0.05");
    await form.getByLabel("Source").fill("our contract, 2026-10");
    await form.getByRole("button", { name: "Save price" }).click();
    const revert = page.getByRole("button", { name: "Revert aws us-east-1 egress_internet_per_gb to the shipped price" });
    await revert.waitFor();
    await page.getByRole("table", { name: "Prices" }).getByText("our contract, 2026-10").waitFor();
    await shot("pricing");
    await revert.click();
    await revert.waitFor({ state: "detached" });
    // A negative price is refused with the field named.
    await form.getByLabel("Price (USD)").fill("-1");
    await form.getByRole("button", { name: "Save price" }).click();
    assert.match(await page.getByRole("alert").first().innerText(), /price_usd/);
  });
});
