// Headless Debian Chromium driven by playwright-core (no browser download).
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Installs Debian's chromium when it is missing (root on the CI machines). */
export function ensureChromium() {
  if (existsSync(CHROMIUM)) return;
  execFileSync("apt-get", ["install", "-y", "chromium"], { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} still missing after apt-get install chromium`);
}

export async function launch() {
  ensureChromium();
  const profile = mkdtempSync(join(tmpdir(), "sw-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1440, height: 960 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Opens `url` and signs in. On a loaded machine the first load can stall: the page is reloaded
 * while the sign-in form has not appeared, and a failure says what the page showed instead.
 */
export async function signIn(page, url, email, password, timeoutMs = 90_000, { beforeSubmit } = {}) {
  const deadline = Date.now() + timeoutMs;
  const form = page.getByLabel("Email");
  for (;;) {
    const left = deadline - Date.now();
    try {
      await page.goto(url, { timeout: Math.max(1_000, left) });
      await form.waitFor({ timeout: Math.max(1_000, Math.min(20_000, deadline - Date.now())) });
      break;
    } catch (e) {
      if (Date.now() >= deadline) {
        const body = await page.locator("body").innerText({ timeout: 2_000 }).catch(() => "(no page)");
        throw new Error(`no sign-in form at ${url} within ${timeoutMs} ms (${e.message.split("\n")[0]}); the page showed: ${body.slice(0, 400)}`);
      }
    }
  }
  await form.fill(email);
  await page.getByLabel("Password").fill(password);
  await beforeSubmit?.();
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
}

/**
 * A feature file's `step` (a test that leaves a "fail-<failPrefix><name>.png" screenshot of the
 * page when it fails, with `explain()`'s text added to the failure) and `shot` (a full-page
 * screenshot named "<shotPrefix><name>.png"), both in `dir`. `page` is a getter: the page is made
 * in the suite's `before`.
 */
export function steps({ dir, page, shotPrefix = "", failPrefix = "", explain }) {
  const shot = (name) => page().screenshot({ path: join(dir, `${shotPrefix}${name}.png`), fullPage: true });
  const step = (name, fn) =>
    test(name, async (t) => {
      try {
        await fn(t);
      } catch (e) {
        const slug = name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60);
        await page()?.screenshot({ path: join(dir, `fail-${failPrefix}${slug}.png`), fullPage: true }).catch(() => {});
        const more = explain?.();
        if (more) e.message += `\n${more}`;
        throw e;
      }
    });
  return { shot, step };
}

/** Polls `probe` every 100 ms until it returns a truthy value (returned), or fails naming `what`. */
export async function until(page, what, probe, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(100);
  }
}

/** The last `bytes` of each of a stack's service logs, for a failure's message. */
export function stackLogs(dataDir, names = ["api", "worker", "beat"], bytes = 1_500) {
  return names
    .map((n) => {
      const p = join(dataDir, `${n}.log`);
      if (!existsSync(p)) return "";
      const s = readFileSync(p, "utf8");
      return `--- ${n}.log (tail) ---\n${s.slice(-bytes)}`;
    })
    .filter(Boolean)
    .join("\n");
}

/** Adds `label` to the searchable multi-select labelled `name`: type to filter, click the option. */
export async function pick(page, name, label) {
  const input = page.getByRole("combobox", { name, exact: true });
  await input.click();
  await input.fill(label);
  await page.getByRole("listbox", { name, exact: true }).getByRole("option", { name: label, exact: true }).click();
  await page.getByRole("list", { name: `${name}: selected` }).getByRole("listitem").filter({ hasText: label }).first().waitFor();
}

/** Removes every chip of the multi-select labelled `name`. */
export async function unpickAll(page, name) {
  const chips = page.getByRole("list", { name: `${name}: selected` }).getByRole("listitem");
  for (let n = await chips.count(); n > 0; n -= 1) {
    await chips.first().getByRole("button").click();
    // The next chip is read only once the removed one has left the page.
    await chips.nth(n - 1).waitFor({ state: "detached" });
  }
}
