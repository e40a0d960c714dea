// The `berth` binary alone: copied into an empty directory and started there with no build
// tree and no BERTH_SITE_ROOT, its dashboard hydrates from the files built into it and
// nothing loads from elsewhere. Prints the binary's size. (Revalidation with ETag and 304 is
// checked in tests/tests/one_binary.rs: Playwright's request routing turns the cache off.)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, chmodSync, mkdtempSync, statSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBrowser, hydrated, eventually, freePort } from './harness.mjs';

let child, chrome, dir;
after(async () => {
  await chrome?.browser.close();
  if (child && child.exitCode === null) {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
  }
  // The binary's copy is over 100 MB in a debug build.
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the binary copied alone to an empty directory serves a working dashboard', async () => {
  const src = process.env.BERTH_BIN;
  assert.ok(src, 'BERTH_BIN is not set: run through `make e2e` or `make test`');
  dir = mkdtempSync(join(tmpdir(), 'berth-alone-'));
  const bin = join(dir, 'berth');
  copyFileSync(src, bin);
  chmodSync(bin, 0o755);
  const size = statSync(bin).size;
  console.log(`berth binary: ${size} B (${(size / 1048576).toFixed(1)} MiB)`);

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = { ...process.env, RUST_LOG: 'warn' };
  delete env.BERTH_SITE_ROOT;
  delete env.BERTH_DATABASE_URL;
  child = spawn(bin, ['serve', '--anonymous', '--addr', `127.0.0.1:${port}`], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  await eventually(async () => {
    if (child.exitCode !== null) throw new Error(`berth exited early:\n${log}`);
    try {
      return (await fetch(`${url}/readyz`)).ok;
    } catch {
      return false;
    }
  }, { timeout: 30_000, what: 'the copied berth to be ready' });
  assert.ok(existsSync(join(dir, 'data', 'berth.db')), 'the SQLite database is created in the working directory');

  chrome = await startBrowser();
  const page = await chrome.newPage();
  const statuses = [];
  page.on('response', (r) => {
    if (new URL(r.url()).pathname.startsWith('/pkg/')) statuses.push([new URL(r.url()).pathname, r.status()]);
  });
  await page.goto(`${url}/`);
  await hydrated(page);
  assert.deepEqual(page.outside, [], 'nothing loads from outside');
  assert.deepEqual(page.errors, [], 'no page errors');
  // Each under its content-hashed name.
  for (const f of [/^\/pkg\/app\.[0-9a-f]{16}\/berth\.js$/, /^\/pkg\/app\.[0-9a-f]{16}\/berth_bg\.wasm$/, /^\/pkg\/app\.[0-9a-f]{16}\/split_queue_pages_\d+\.wasm$/, /^\/pkg\/berth\.[0-9a-f]{16}\.css$/]) {
    assert.ok(statuses.some(([path, status]) => f.test(path) && status === 200), `${f} served from the binary: ${JSON.stringify(statuses)}`);
  }
});
