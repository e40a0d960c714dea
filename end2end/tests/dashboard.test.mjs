// The runtime dashboard against a server running real local jobs: live queue and job pages,
// preemptions on the events page, chart data, jobs filters and paging, cancel from the job
// page, the submit form, and recovery when the server goes away and comes back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getJson, submitJob, eventually, SIZES } from './harness.mjs';

// `lp` preempts lower priorities; `default` runs one job at a time so others wait.
const CONFIG = `resource_flavors:
  - name: local
resource_queues:
  - name: lp
    preemption: {within_resource_queue: lower_priority}
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
  - name: default
    resource_groups:
      - covered_resources: [cpu, memory_gb]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: lp
    selector: [{key: team, operator: in, values: [lp]}]
    priority_policy: {default: 10, min: 0, max: 100, on_violation: reject}
  - resource_queue: default
`;

let server, chrome;
before(async () => {
  server = await startServer({ args: ['--sample-interval-s', '1'] });
  chrome = await startBrowser();
  await applyConfig(server.url, CONFIG, { message: 'dashboard test queues' });
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});

const job = (url, id) => getJson(url, `/api/v1/jobs/${id}`);
const waitState = (id, state) => eventually(async () => (await job(server.url, id)).state === state, { what: `${id} ${state}` });

test('a submitted job shows on the queue page without reload, then runs, then succeeds', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/queues/default`);
  await hydrated(page);
  await page.waitForSelector('[data-testid=live].on');
  await page.evaluate(() => (window.__noReload = true));

  const blocker = await submitJob(server.url, { name: 'blocker', entrypoint: 'sleep 2', resources: { cpu: 1 } });
  const watched = await submitJob(server.url, { name: 'watched', entrypoint: 'sleep 1; echo hello from watched', resources: { cpu: 1 } });
  // Waits behind the blocker: listed as pending, with its position and the engine's reason.
  const pending = page.locator(`[data-testid=pending-row][data-job="${watched.id}"]`);
  await pending.waitFor({ timeout: 10_000 });
  assert.match(await pending.textContent(), /watched/);
  assert.match(await pending.locator('td.reason').textContent(), /quota|fit|cpu/i);
  await page.locator(`[data-testid=running-row][data-job="${watched.id}"]`).waitFor({ timeout: 15_000 });
  await page.locator(`[data-testid=recent-row][data-job="${watched.id}"] [data-state=succeeded]`).waitFor({ timeout: 15_000 });
  assert.equal(await page.evaluate(() => window.__noReload), true, 'the page was not reloaded');
  assert.equal((await job(server.url, blocker.id)).state, 'succeeded');

  // The job page: timeline, exit code, logs.
  await page.goto(`${server.url}/jobs/${watched.id}`);
  await hydrated(page);
  assert.equal((await page.textContent('[data-testid=exit-code]')).trim(), '0');
  assert.match(await page.textContent('[data-testid=log]'), /hello from watched/);
  const kinds = await page.locator('[data-testid=timeline] li').evaluateAll((els) => els.map((e) => e.dataset.kind));
  for (const k of ['submitted', 'admitted', 'started', 'finished']) assert.ok(kinds.includes(k), `timeline has ${k}: ${kinds}`);
  assert.deepEqual(page.errors, []);
  assert.deepEqual(page.outside, []);
});

test('a preemption appears live on the events page, linking preemptor and victim both ways', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/events?kind=preempted`);
  await hydrated(page);
  await page.waitForSelector('[data-testid=live].on');
  await page.waitForSelector('[data-testid=no-events]');

  const low = await submitJob(server.url, { name: 'low', entrypoint: 'sleep 60', labels: { team: 'lp' }, priority: 1, resources: { cpu: 1 } });
  await waitState(low.id, 'running');
  const high = await submitJob(server.url, { name: 'high', entrypoint: 'sleep 1', labels: { team: 'lp' }, priority: 50, resources: { cpu: 1 } });

  const row = page.locator('[data-testid=preemption]').first();
  await row.waitFor({ timeout: 15_000 });
  assert.equal(await row.locator('[data-testid=preemptor]').getAttribute('href'), `/jobs/${high.id}`);
  assert.equal(await row.locator('[data-testid=victim]').getAttribute('href'), `/jobs/${low.id}`);
  assert.match(await row.textContent(), /priority 50/);
  assert.match(await row.textContent(), /priority 1\b/);
  await screenshotBoth(page, 'events');

  // Victim → preemptor.
  await row.locator('[data-testid=victim]').click();
  await page.waitForURL(`**/jobs/${low.id}`);
  const back = page.locator('[data-testid=timeline] [data-testid=preemptor-link]');
  await back.waitFor();
  assert.equal(await back.getAttribute('href'), `/jobs/${high.id}`);
  // Preemptor → victim.
  await back.click();
  await page.waitForURL(`**/jobs/${high.id}`);
  await page.waitForSelector('[data-testid=caused]');
  assert.match(await page.textContent('[data-testid=caused]'), new RegExp(low.id));
  await waitState(high.id, 'succeeded');
  await eventually(async () => ['running', 'admitted'].includes((await job(server.url, low.id)).state), { what: 'the victim runs again' });
  await fetch(`${server.url}/api/v1/jobs/${low.id}/cancel`, { method: 'POST' });
  assert.deepEqual(page.errors, []);
});

test('cancel from the job page stops the process tree', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-cancel-'));
  const pidFile = join(dir, 'pid');
  const j = await submitJob(server.url, { name: 'long', entrypoint: `sleep 300 & echo $! > ${pidFile}; wait`, resources: { cpu: 1 } });
  await waitState(j.id, 'running');
  const pid = Number(await eventually(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), { what: 'the pid file' }));
  const alive = () => existsSync(`/proc/${pid}`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  assert.ok(alive(), 'the sleep runs');

  const page = await chrome.newPage();
  await page.goto(`${server.url}/jobs/${j.id}`);
  await hydrated(page);
  await screenshotBoth(page, 'job');
  await page.click('[data-testid=cancel]');
  await page.click('[data-testid=confirm-cancel]');
  await page.waitForSelector('.page-head [data-state=cancelled]', { timeout: 15_000 });
  await eventually(() => !alive(), { what: `pid ${pid} to be gone` });
  assert.deepEqual(page.errors, []);
});

test('the usage chart carries the data points of the queue that ran jobs', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/history?range=1h&queue=default`);
  await hydrated(page);
  const series = await eventually(() => page.evaluate(() => {
    const el = document.querySelector('[data-testid=history-chart]');
    const chart = el && window.echarts && window.echarts.getInstanceByDom(el);
    const s = chart && chart.getOption().series;
    return s && s.length ? s.map((x) => ({ name: x.name, data: x.data })) : null;
  }), { what: 'the chart to draw' });
  const used = series.find((s) => s.name === 'default · local');
  assert.ok(used, `a usage series for default/local/cpu: ${series.map((s) => s.name)}`);
  assert.ok(used.data.some(([, v]) => v >= 1), `the queue held 1 cpu at some point: ${JSON.stringify(used.data)}`);
  const quota = series.find((s) => s.name === 'default · local quota');
  assert.ok(quota && quota.data.every(([, v]) => v === 1), `the quota line sits at 1: ${JSON.stringify(quota?.data)}`);
  // Hovering shows values.
  const box = await page.locator('[data-testid=history-chart]').boundingBox();
  await page.mouse.move(box.x + box.width * 0.95, box.y + box.height / 2);
  await page.waitForTimeout(300);
  await screenshotBoth(page, 'usage');
  // Stacked per queue.
  await page.goto(`${server.url}/history?range=1h&flavor=local&resource=cpu&view=stacked`);
  await hydrated(page);
  const stacked = await eventually(() => page.evaluate(() => {
    const c = window.echarts?.getInstanceByDom(document.querySelector('[data-testid=history-chart]'));
    return c && c.getOption().series.length ? c.getOption().series.map((s) => ({ name: s.name, stack: s.stack })) : null;
  }), { what: 'the stacked chart' });
  assert.ok(stacked.some((s) => s.name === 'default' && s.stack === 'usage'), JSON.stringify(stacked));
  assert.deepEqual(page.errors, []);
});

test('jobs list: filters by label and state, pages by cursor', async () => {
  for (let i = 0; i < 55; i++) await submitJob(server.url, { name: `bulk-${i}`, entrypoint: 'true', labels: { batch: 'bulk' }, resources: { memory_gb: 0.001 } });
  for (let i = 0; i < 3; i++) await submitJob(server.url, { name: `odd-${i}`, entrypoint: 'true', labels: { batch: 'odd' }, resources: { memory_gb: 0.001 } });
  const page = await chrome.newPage();
  await page.goto(`${server.url}/jobs`);
  await hydrated(page);
  await page.fill('#f-label', 'batch=odd');
  await page.click('[data-testid=job-filters] button[type=submit]');
  await page.waitForURL(/label=batch%3Dodd|label=batch=odd/);
  await eventually(async () => (await page.locator('[data-testid=job-row]').count()) === 3, { what: '3 odd rows' });
  const names = await page.locator('[data-testid=job-row] td:first-child a').allTextContents();
  assert.deepEqual(names.sort(), ['odd-0', 'odd-1', 'odd-2']);

  await page.goto(`${server.url}/jobs?label=batch%3Dbulk`);
  await hydrated(page);
  const first = await page.locator('[data-testid=job-row]').evaluateAll((rows) => rows.map((r) => r.dataset.job));
  assert.equal(first.length, 50);
  await page.click('[data-testid=older]');
  await eventually(async () => (await page.locator('[data-testid=job-row]').count()) === 5, { what: 'the second page' });
  const second = await page.locator('[data-testid=job-row]').evaluateAll((rows) => rows.map((r) => r.dataset.job));
  assert.equal(new Set([...first, ...second]).size, 55, 'pages do not overlap');
  assert.match(page.url(), /label=batch/, 'paging keeps the filter');

  await page.goto(`${server.url}/jobs?state=cancelled`);
  await hydrated(page);
  const states = await page.locator('[data-testid=job-row]').evaluateAll((rows) => rows.map((r) => r.dataset.state));
  assert.ok(states.length >= 1 && states.every((s) => s === 'cancelled'), states.join());
  await page.goto(`${server.url}/jobs?label=batch%3Dbulk`);
  await hydrated(page);
  await screenshotBoth(page, 'jobs');
  assert.deepEqual(page.errors, []);
});

test('the submit form checks fields as typed and opens the new job', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/jobs/new`);
  await hydrated(page);
  await page.fill('#s-entrypoint', 'echo submitted from the form');
  await page.fill('#s-cpu', '-2');
  assert.match(await page.textContent('[data-testid=problem-cpu]'), /not a number ≥ 0/);
  await page.fill('#s-labels', 'team');
  assert.match(await page.textContent('[data-testid=problem-labels]'), /KEY=VALUE/);
  await page.fill('#s-cpu', '0.5');
  await page.fill('#s-labels', 'team=forms');
  assert.equal((await page.textContent('[data-testid=problem-cpu]')).trim(), '');
  await page.click('[data-testid=submit]');
  await page.waitForURL(/\/jobs\/j-/);
  const id = page.url().split('/').pop();
  const j = await job(server.url, id);
  assert.equal(j.entrypoint, 'echo submitted from the form');
  assert.deepEqual(j.labels, { team: 'forms' });
  // A rejection is shown with its reason: team=lp with priority 500 breaks the rule's bound.
  await page.goto(`${server.url}/jobs/new`);
  await hydrated(page);
  await page.fill('#s-entrypoint', 'true');
  await page.fill('#s-labels', 'team=lp');
  await page.fill('#s-priority', '500');
  await page.click('[data-testid=submit]');
  await page.waitForSelector('[data-testid=rejected]');
  assert.match(await page.textContent('[data-testid=rejected]'), /priority/);
  assert.deepEqual(page.errors, []);
});

test('overview and queue pages, and live updates surviving a server restart', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/`);
  await hydrated(page);
  await page.waitForSelector('[data-testid=live].on');
  assert.equal(await page.locator('[data-testid=queue-card]').count(), 2);
  assert.ok((await page.locator('[data-testid=node-row]').count()) >= 1);
  const blocker = await submitJob(server.url, { name: 'hold', entrypoint: 'sleep 30', resources: { cpu: 1 } });
  await submitJob(server.url, { name: 'wait-1', entrypoint: 'true', resources: { cpu: 1 } });
  await submitJob(server.url, { name: 'wait-2', entrypoint: 'true', resources: { cpu: 1 } });
  const card = page.locator('[data-testid=queue-card][data-queue=default]');
  await eventually(async () => (await card.locator('[data-testid=pending-count]').textContent()).trim() === '2', { what: 'two pending on the card' });
  await screenshotBoth(page, 'overview');
  await page.goto(`${server.url}/queues/default`);
  await hydrated(page);
  await page.waitForSelector('[data-testid=pending-row]');
  // The queue's own chart draws its usage series.
  const names = await eventually(() => page.evaluate(() => {
    const c = window.echarts?.getInstanceByDom(document.querySelector('[data-testid=queue-chart]'));
    return c && c.getOption().series.length ? c.getOption().series.map((s) => s.name) : null;
  }), { what: 'the queue chart' });
  assert.ok(names.includes('default · local'), names.join());
  await screenshotBoth(page, 'queue');

  // The server goes away: the badge says so; it comes back on the same database and the page
  // catches up without a reload.
  await page.evaluate(() => (window.__noReload = true));
  await server.stop();
  await page.waitForSelector('[data-testid=live]:not(.on)', { timeout: 10_000 });
  server = await startServer({ dir: server.dir, port: server.port, args: ['--sample-interval-s', '1'] });
  await page.waitForSelector('[data-testid=live].on', { timeout: 20_000 });
  const after = await submitJob(server.url, { name: 'after-restart', entrypoint: 'true', resources: { cpu: 1 } });
  await page.locator(`[data-testid=pending-row][data-job="${after.id}"]`).waitFor({ timeout: 10_000 });
  assert.equal(await page.evaluate(() => window.__noReload), true);
  await fetch(`${server.url}/api/v1/jobs/${blocker.id}/cancel`, { method: 'POST' });
  await page.locator(`[data-testid=recent-row][data-job="${after.id}"]`).waitFor({ timeout: 15_000 });
});

test('a stage page shows progress by state and each job result, live', async () => {
  const r = await fetch(`${server.url}/api/v1/stages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'eval-sweep',
      parallelism: { max_concurrent: 1 },
      jobs: [
        { name: 'ok-a', entrypoint: 'echo result-a', resources: { memory_gb: 0.001 } },
        { name: 'bad-b', entrypoint: 'echo oops >&2; exit 3', resources: { memory_gb: 0.001 } },
      ],
    }),
  });
  const stage = await r.json();
  assert.ok(r.ok, JSON.stringify(stage));
  const page = await chrome.newPage();
  await page.goto(`${server.url}/stages/${stage.stage_id}`);
  await hydrated(page);
  await page.waitForSelector('text=finished with failures', { timeout: 20_000 });
  const counts = await page.textContent('[data-testid=stage-counts]');
  assert.match(counts, /1 succeeded/);
  assert.match(counts, /1 failed/);
  const rows = page.locator('[data-testid=stage-job]');
  assert.equal(await rows.count(), 2);
  assert.match(await rows.filter({ hasText: 'bad-b' }).textContent(), /3/);
  assert.deepEqual(page.errors, []);
});
