// Test harness: a real `berth serve` on a free port with a fresh SQLite file, and headless
// Debian Chromium driven by playwright-core. Every request that leaves 127.0.0.1 is blocked
// and recorded, so a test can prove nothing loads from outside.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { chromium } from 'playwright-core';

export const SCREENSHOTS = new URL('../screenshots/', import.meta.url).pathname;
export const SIZES = { desktop: { width: 1366, height: 768 }, phone: { width: 390, height: 844 } };

/** A TCP port free on 127.0.0.1 now. */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** The first admin token of servers started with `auth: true`. */
export const ADMIN_TOKEN = 'berth_e2e_admin_token_0123456789';

/**
 * Starts a server; returns { url, dir, port, stop, log }. Pass the `dir` and `port` of a
 * stopped one to restart it on the same database; `args` are extra `serve` flags. It runs in
 * anonymous local mode unless `auth` is set (then ADMIN_TOKEN is its first admin token).
 * `databaseUrl` replaces the fresh SQLite file (replicas on one PostgreSQL database).
 */
export async function startServer({ dir, port, args = [], auth = false, databaseUrl } = {}) {
  const bin = process.env.BERTH_BIN;
  if (!bin) throw new Error('BERTH_BIN is not set: run through `make e2e` or `make test`');
  dir ??= mkdtempSync(join(tmpdir(), 'berth-e2e-'));
  port ??= await freePort();
  const url = `http://127.0.0.1:${port}`;
  const access = auth ? [] : ['--anonymous'];
  const child = spawn(bin, ['serve', '--addr', `127.0.0.1:${port}`, '--database-url', databaseUrl ?? `sqlite://${dir}/berth.db`, '--data-dir', `${dir}/data`, ...access, ...args], {
    env: { ...process.env, RUST_LOG: 'warn', BERTH_ADMIN_TOKEN: ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.ok) break;
    } catch {}
    if (child.exitCode !== null) throw new Error(`berth exited early:\n${log}`);
    if (Date.now() > deadline) throw new Error(`berth did not become healthy:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    dir,
    port,
    log: () => log,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
    },
  };
}

/** Launches Chromium; returns { browser, newPage(size, opts) }. Pages record outside requests and errors. */
export async function startBrowser() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  async function newPage(size = SIZES.desktop, options = {}) {
    const context = await browser.newContext({ viewport: size, ...options });
    const page = await context.newPage();
    page.outside = [];
    page.errors = [];
    page.requests = [];
    await page.route('**/*', (route) => {
      const u = new URL(route.request().url());
      if (u.hostname !== '127.0.0.1') {
        page.outside.push(u.href);
        return route.abort();
      }
      page.requests.push(u.pathname + u.search);
      return route.continue();
    });
    page.on('pageerror', (e) => page.errors.push(String(e)));
    // Content-Security-Policy refusals are errors too.
    await page.addInitScript(() => document.addEventListener('securitypolicyviolation', (e) =>
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`)));
    page.on('console', (m) => m.type() === 'error' && page.errors.push(m.text()));
    return page;
  }
  return { browser, newPage };
}

/** Waits until the wasm has hydrated the page. */
export async function hydrated(page) {
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 20_000 });
}

/** Saves a screenshot (full page unless `fullPage: false`) as screenshots/NAME-WIDTH.png. */
export async function screenshot(page, name, { fullPage = true } = {}) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const { width } = page.viewportSize();
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-${width}.png`), fullPage });
}

/** `Authorization` for `token` (none: anonymous). */
function auth(token) {
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** Applies a config through the REST API (with `token`, else anonymously). */
export async function applyConfig(url, yaml, { token, message } = {}) {
  const q = message ? `?message=${encodeURIComponent(message)}` : '';
  const r = await fetch(`${url}/api/v1/scheduler/config${q}`, {
    method: 'POST',
    headers: { 'content-type': 'application/yaml', ...auth(token) },
    body: yaml,
  });
  const body = await r.json();
  if (!r.ok) throw new Error(`apply failed: ${JSON.stringify(body)}`);
  return body;
}

/** Saves NAME-1366.png and NAME-390.png of the page as it is, resizing in between. */
export async function screenshotBoth(page, name, options) {
  const original = page.viewportSize();
  for (const size of [SIZES.desktop, SIZES.phone]) {
    await page.setViewportSize(size);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(150);
    await screenshot(page, name, options);
  }
  await page.setViewportSize(original);
}

/** GET a JSON document of the REST API. */
export async function getJson(url, path, token) {
  const r = await fetch(url + path, { headers: auth(token) });
  const body = await r.json();
  if (!r.ok) throw new Error(`GET ${path} failed: ${JSON.stringify(body)}`);
  return body;
}

/** A version record (`active` for the active one). */
export async function getVersion(url, version = 'active') {
  return getJson(url, version === 'active' ? '/api/v1/scheduler/config' : `/api/v1/scheduler/config/versions/${version}`);
}

/** Submits a job through the REST API; returns the job (a rejection throws). */
export async function submitJob(url, job, token) {
  const r = await fetch(`${url}/api/v1/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth(token) },
    body: JSON.stringify(job),
  });
  const body = await r.json();
  if (!r.ok) throw new Error(`submit failed: ${JSON.stringify(body)}`);
  return body;
}

/** Creates a token for `user` with `role` (with the admin token); its secret. */
export async function createToken(url, user, role) {
  const r = await fetch(`${url}/api/v1/tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth(ADMIN_TOKEN) },
    body: JSON.stringify({ user, role }),
  });
  const body = await r.json();
  if (!r.ok) throw new Error(`token creation failed: ${JSON.stringify(body)}`);
  return body.secret;
}

/** Polls `f` until it returns something truthy (or throws after `timeout` ms). */
export async function eventually(f, { timeout = 20_000, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The recorded requests (`page.requests` from index `from`) other than the editor's own:
 * validation runs in the browser, so while a draft changes the editor only fetches its code
 * (static files under /pkg/, once) and asks the server, which knows the nodes, for the
 * warnings that need them (the capacity check).
 */
export function requestsBesideEditor(page, from) {
  return page.requests.slice(from).filter((r) => !r.startsWith('/pkg/') && !r.startsWith('/api/capacity_warnings'));
}
/** The config page's YAML code editor, once it has replaced the plain text box. */
export async function yamlEditor(page) {
  await page.locator('#panel-yaml .cm-editor').waitFor();
  return page.getByRole('textbox', { name: 'Draft config (YAML or JSON)' });
}

/**
 * Replaces the whole text of the YAML code editor with `text` as a person would: select all
 * with the keyboard, then type. Waits until the editor holds exactly `text`.
 * Playwright's `fill()` selects the content itself, which CodeMirror learns of asynchronously:
 * on a busy machine the text was then typed beside the old one (a "duplicate key" error in 1
 * of about 7 full runs).
 */
export async function typeYaml(page, text) {
  const editor = await yamlEditor(page);
  await editor.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.insertText(text);
  // CodeMirror keeps the hidden textarea it replaced in step with its text.
  await page.waitForFunction((t) => document.querySelector('#draft')?.value === t, text, { timeout: 10_000 });
  return editor;
}
