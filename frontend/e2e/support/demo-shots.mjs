// Screenshots of a running `make run` demo: Overview, a pair that stepped, Storage.
// Usage: node e2e/support/demo-shots.mjs URL EMAIL PASSWORD SRC_REGION DST_REGION
import { join } from "node:path";
import { launch } from "./browser.mjs";
import { FRONTEND } from "./stack.mjs";

const [url, email, password, src, dst] = process.argv.slice(2);
const shots = join(FRONTEND, "e2e", "screenshots");
const browser = await launch();
const page = browser.context.pages()[0] ?? (await browser.context.newPage());
page.setDefaultTimeout(60_000);
await page.goto(`${url}/overview`);
await page.getByLabel("Email").fill(email);
await page.getByLabel("Password").fill(password);
await page.getByRole("button", { name: "Sign in", exact: true }).click();
await page.getByRole("table", { name: /heatmap by region/ }).waitFor();
await page.screenshot({ path: join(shots, "demo-overview.png"), fullPage: true });
await page.goto(`${url}/pair?level=region&src=${src}&dst=${dst}&range=15m`);
await page.getByRole("heading", { name: /→/ }).first().waitFor();
await page.waitForTimeout(8000); // the pair's charts load independently; let them all draw
await page.screenshot({ path: join(shots, "demo-pair-step.png"), fullPage: true });
await page.goto(`${url}/storage`);
await page.getByRole("table", { name: /Median PUT latency/ }).waitFor();
await page.waitForTimeout(5000);
await page.screenshot({ path: join(shots, "demo-storage.png"), fullPage: true });
await browser.close();
