// The charts as a team lead reads them: the time axis is the chosen range and moves on with
// the clock, quotas are told from use by colour and dash, idle series are left out and
// named, axes carry units, filters apply as they change and stay in the URL, the stacked
// view has quota and capacity lines, the phone legend wraps under the chart, a full queue is
// not red, an empty chart says why; per-queue waits and admissions; the accounting page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getJson, submitJob, eventually, SIZES } from './harness.mjs';

// `busy` runs one job at a time (so the second waits); `idle` never runs anything.
const CONFIG = `resource_flavors:
  - name: local
resource_queues:
  - name: busy
    resource_groups:
      - covered_resources: [cpu, memory_gb]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}, {name: memory_gb, nominal_quota: 4}]}]
  - name: idle
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 2}]}]
scheduling_rules:
  - resource_queue: idle
    selector: [{key: team, operator: in, values: [idle]}]
  - resource_queue: busy
`;

const HOUR_MS = 3600 * 1000;
let server, chrome, first, second;
before(async () => {
  server = await startServer({ args: ['--sample-interval-s', '1'] });
  chrome = await startBrowser();
  await applyConfig(server.url, CONFIG, { message: 'chart test queues' });
  first = await submitJob(server.url, { name: 'first', entrypoint: 'sleep 2', labels: { team: 'vision' }, resources: { cpu: 1, memory_gb: 1 } });
  second = await submitJob(server.url, { name: 'second', entrypoint: 'true', labels: { team: 'vision' }, resources: { cpu: 1 } });
  for (const j of [first, second]) {
    await eventually(async () => (await getJson(server.url, `/api/v1/jobs/${j.id}`)).state === 'succeeded', { what: `${j.name} to succeed` });
  }
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});

/** The ECharts option of the chart `testid` titled `title` (first one without a title), once drawn. */
function option(page, testid, title) {
  return eventually(() => page.evaluate(([testid, title]) => {
    const sel = title ? `[data-testid=${testid}][data-title="${title}"]` : `[data-testid=${testid}]`;
    const el = document.querySelector(sel);
    const c = el && window.echarts && window.echarts.getInstanceByDom(el);
    const o = c && c.getOption();
    if (!o || !o.series || !o.series.length) return null;
    const x = o.xAxis[0], y = o.yAxis[0];
    return {
      min: x.min, max: x.max, hideOverlap: x.axisLabel && x.axisLabel.hideOverlap, unit: y.name, legendShown: o.legend[0].show,
      series: o.series.map((s) => ({ name: s.name, colour: s.lineStyle && s.lineStyle.color, dash: s.lineStyle && s.lineStyle.type, stack: s.stack, data: s.data })),
    };
  }, [testid, title]), { what: `the ${testid} chart ${title || ''}` });
}

test('usage vs quota: the whole range, live, units, distinct quota lines, idle series named', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/history?range=1h`);
  await hydrated(page);
  const cpu = await option(page, 'history-chart', 'CPU');
  // "Last hour" is an hour wide, ending now, even though the server is a few seconds old.
  assert.equal(cpu.max - cpu.min, HOUR_MS);
  assert.ok(Math.abs(cpu.max - Date.now()) < 60_000, `the axis ends now: ${new Date(cpu.max).toISOString()}`);
  assert.equal(cpu.unit, 'CPUs');
  assert.equal(cpu.hideOverlap, true, 'time labels skip rather than overlap');
  const used = cpu.series.find((s) => s.name === 'busy · local');
  const quota = cpu.series.find((s) => s.name === 'busy · local quota');
  assert.ok(used && quota, JSON.stringify(cpu.series.map((s) => s.name)));
  assert.notEqual(used.colour, quota.colour);
  assert.equal(quota.dash, 'dashed');
  assert.notEqual(used.dash, 'dashed');
  assert.ok(used.data.some(([, v]) => v >= 1), 'busy held a CPU');
  // The idle queue is not drawn, and the page says so.
  assert.ok(!cpu.series.some((s) => s.name.startsWith('idle')));
  const box = page.locator('[data-testid=history-chart-box][data-title=CPU]');
  assert.match(await box.locator('[data-testid=chart-hidden]').textContent(), /nothing in use over the range: .*idle · local/);
  assert.match(await box.locator('.chart-title').textContent(), /CPU/);
  // Memory has its own chart, in GB.
  assert.equal((await option(page, 'history-chart', 'Memory')).unit, 'GB');
  // The legend is the page's: every entry readable as text.
  assert.equal(cpu.legendShown, false);
  assert.deepEqual(await box.locator('[data-testid=chart-legend] li').allTextContents(), ['busy · local', 'busy · local quota']);
  await screenshotBoth(page, 'history');
  // A legend entry hides its series, and shows it again.
  const entry = box.getByRole('button', { name: 'busy · local quota' });
  const selected = () => page.evaluate(() => window.echarts.getInstanceByDom(document.querySelector('[data-testid=history-chart][data-title=CPU]')).getOption().legend[0].selected['busy · local quota']);
  await entry.click();
  assert.equal(await entry.getAttribute('aria-pressed'), 'false');
  assert.equal(await selected(), false);
  await entry.click();
  assert.equal(await entry.getAttribute('aria-pressed'), 'true');
  assert.notEqual(await selected(), false);

  // Nothing changes, and still the axis moves on with the clock.
  const later = await eventually(async () => {
    const o = await option(page, 'history-chart', 'CPU');
    return o.max > cpu.max && o;
  }, { timeout: 40_000, what: 'the axis to advance' });
  assert.equal(later.max - later.min, HOUR_MS);
  assert.deepEqual(page.errors, []);
});

test('filters apply as they change, stay in the URL and survive a reload', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/history`);
  await hydrated(page);
  await page.selectOption('#h-range', '24h');
  await page.waitForURL(/range=24h/);
  await eventually(async () => {
    const o = await option(page, 'history-chart', 'CPU');
    return o.max - o.min === 24 * HOUR_MS;
  }, { what: 'a day-wide axis' });
  await page.selectOption('#h-resource', 'cpu');
  await page.waitForURL(/resource=cpu/);
  assert.match(page.url(), /range=24h/);
  await eventually(async () => (await page.locator('[data-testid=history-chart]').count()) === 1, { what: 'only the CPU chart' });
  await page.reload();
  await hydrated(page);
  assert.equal(await page.inputValue('#h-range'), '24h');
  assert.equal(await page.inputValue('#h-resource'), 'cpu');
  const o = await option(page, 'history-chart', 'CPU');
  assert.equal(o.max - o.min, 24 * HOUR_MS);
  assert.equal(await page.locator('[data-testid=history-chart]').count(), 1);
  assert.deepEqual(page.errors, []);
});

test('the stacked view has the quota sum and the capacity', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/history?range=1h&resource=cpu`);
  await hydrated(page);
  await page.selectOption('#h-view', 'stacked');
  await page.waitForURL(/view=stacked/);
  const o = await eventually(async () => {
    const o = await option(page, 'history-chart', 'CPU');
    return o.series.some((s) => s.stack === 'usage') && o;
  }, { what: 'the stacked chart' });
  const names = o.series.map((s) => s.name);
  assert.ok(names.includes('busy'), names.join());
  const quota = o.series.find((s) => s.name.startsWith('quota (sum of the'));
  assert.ok(quota, names.join());
  // busy's 1 CPU and idle's 2: the quota of the queues stacked, idle ones included (the
  // first config's unlimited queue adds nothing).
  assert.ok(quota.data.every(([, v]) => v === 3), JSON.stringify(quota.data));
  const capacity = o.series.find((s) => s.name === 'capacity (nodes now)');
  const nodes = (await getJson(server.url, '/api/v1/nodes')).nodes;
  const cpus = nodes.filter((n) => n.flavors.includes('local')).reduce((a, n) => a + (n.capacity.cpu || 0), 0);
  assert.ok(capacity && capacity.data.every(([, v]) => v === cpus), JSON.stringify(capacity));
  assert.match(await page.textContent('[data-testid=history-caption]'), /sum of their quotas/);
  await screenshotBoth(page, 'history-stacked');
  assert.deepEqual(page.errors, []);
});

test('on a phone the legend wraps under the chart and nothing is paged', async () => {
  const page = await chrome.newPage(SIZES.phone);
  await page.goto(`${server.url}/history?range=1h`);
  await hydrated(page);
  await option(page, 'history-chart', 'CPU');
  const box = page.locator('[data-testid=history-chart-box][data-title=CPU]');
  const chart = await box.locator('[data-testid=history-chart]').boundingBox();
  for (const item of await box.locator('[data-testid=chart-legend] li').all()) {
    const b = await item.boundingBox();
    assert.ok(b.y >= chart.y + chart.height, 'the legend is below the plot, not over its axis');
    assert.ok(b.x >= 0 && b.x + b.width <= SIZES.phone.width, 'each legend entry fits the screen');
    assert.ok(await item.isVisible());
  }
  assert.deepEqual(page.errors, []);
});

test('a full queue is busy, not red', async () => {
  const hold = await submitJob(server.url, { name: 'hold', entrypoint: 'sleep 30', resources: { cpu: 1 } });
  const page = await chrome.newPage();
  await page.goto(`${server.url}/`);
  await hydrated(page);
  const bar = page.locator('[data-testid=queue-card][data-queue=busy] [data-testid=usage]').filter({ hasText: 'cpu' });
  await eventually(async () => /1 \/ 1/.test(await bar.textContent()), { what: 'busy full' });
  const fill = await bar.locator('.fill').evaluate((el) => getComputedStyle(el).backgroundColor);
  const [r, g, b] = fill.match(/\d+/g).map(Number);
  assert.ok(!(r > 150 && g < 80 && b < 80), `a full queue is not drawn red: ${fill}`);
  assert.equal(await page.locator('[data-testid=queue-card][data-queue=busy] [data-testid=trouble]').count(), 0);
  await fetch(`${server.url}/api/v1/jobs/${hold.id}/cancel`, { method: 'POST' });
  assert.deepEqual(page.errors, []);
});

test('a queue page charts its waits and admissions; its range is in the URL', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/queues/busy`);
  await hydrated(page);
  const waits = await option(page, 'queue-waits');
  assert.deepEqual(waits.series.map((s) => s.name), ['median (p50)', 'p95']);
  assert.equal(waits.max - waits.min, HOUR_MS);
  assert.match(waits.unit, /seconds|minutes/);
  const admitted = await option(page, 'queue-admissions');
  // One point per 5 minutes, and one at the range's end repeating the last.
  const count = admitted.series[0].data.filter(([t]) => t < admitted.max).reduce((a, [, v]) => a + v, 0);
  const jobs = (await getJson(server.url, '/api/v1/jobs?queue=busy&max_items=100')).jobs.filter((j) => j.admitted_at);
  assert.equal(count, jobs.length, 'one admission per admitted job of busy');
  assert.match(await page.locator('[data-testid=queue-admissions-box] [data-testid=chart-caption]').textContent(), new RegExp(`${jobs.length} admitted`));
  assert.match(await page.locator('[data-testid=queue-waits-box] [data-testid=chart-caption]').textContent(), /median .* p95 .* longest/);
  assert.equal((await option(page, 'queue-chart', 'CPU')).unit, 'CPUs');
  await screenshotBoth(page, 'queue-charts');
  await page.getByRole('link', { name: 'Last day' }).click();
  await page.waitForURL(/\?range=24h/);
  await eventually(async () => {
    const o = await option(page, 'queue-waits');
    return o.max - o.min === 24 * HOUR_MS;
  }, { what: 'a day of waits' });
  assert.equal(await option(page, 'queue-admissions').then((o) => o.max - o.min), 24 * HOUR_MS);
  await page.reload();
  await hydrated(page);
  assert.equal(await page.getByRole('link', { name: 'Last day' }).getAttribute('aria-current'), 'true');
  assert.deepEqual(page.errors, []);
});

test('before the first sample, charts say so in words', async () => {
  const fresh = await startServer();
  try {
    const page = await chrome.newPage();
    // A range from before the server existed: no sample at all.
    await page.goto(`${fresh.url}/history?range=custom&since=2020-01-01T00:00&until=2020-01-02T00:00`);
    await hydrated(page);
    const empty = page.locator('[data-testid=history-chart-box] [data-testid=chart-empty]');
    await empty.waitFor();
    assert.match(await empty.textContent(), /No usage recorded in this range yet/);
    // An idle queue on a fresh server: nothing in use, nothing admitted, said in words.
    await page.goto(`${fresh.url}/queues/default`);
    await hydrated(page);
    const usage = page.locator('[data-testid=queue-chart-box] [data-testid=chart-empty]');
    await usage.waitFor();
    assert.match(await usage.textContent(), /No usage recorded in this range yet|Nothing was in use in this range/);
    assert.match(await page.textContent('[data-testid=queue-waits-box] [data-testid=chart-empty]'), /No job of this queue was admitted/);
    await screenshotBoth(page, 'queue-empty');
    assert.deepEqual(page.errors, []);
  } finally {
    await fresh.stop();
  }
});

test('the accounting page: grouping and range in the URL, figures from the report, CSV', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/`);
  await hydrated(page);
  await page.getByRole('link', { name: 'Accounting' }).click();
  await page.waitForURL(/\/usage/);
  await page.selectOption('#u-by', 'queue');
  await page.waitForURL(/by=queue/);
  const report = await getJson(server.url, '/api/v1/usage?by=queue&since=7d');
  const busy = report.rows.find((r) => r.group === 'busy');
  const row = page.locator('[data-testid=usage-row][data-group=busy]');
  await row.waitFor();
  const cells = await row.locator('td').allTextContents();
  assert.equal(cells[0], String(busy.jobs.succeeded));
  assert.equal(cells[1], String(busy.jobs.failed || 0));
  const hours = (h) => (h > 0 && h < 0.005 ? '< 0.01' : String(Math.round(h * 100) / 100));
  assert.equal(cells[5], hours(busy.cpu_hours));
  assert.equal(cells[7], hours(busy.memory_gb_hours));
  await page.selectOption('#u-by', 'label');
  await page.fill('#u-label', 'team');
  await page.press('#u-label', 'Tab');
  await page.waitForURL(/label=team/);
  await page.locator('[data-testid=usage-row][data-group=vision]').waitFor();
  await page.reload();
  await hydrated(page);
  await page.locator('[data-testid=usage-row][data-group=vision]').waitFor();
  assert.equal(await page.inputValue('#u-by'), 'label');
  const href = await page.getAttribute('[data-testid=usage-csv]', 'href');
  assert.match(href, /format=csv/);
  const csv = await page.evaluate(async (h) => (await fetch(h)).text(), href);
  assert.match(csv.split('\n')[0], /^group,succeeded,failed/);
  assert.match(csv, /\nvision,2,/);
  await screenshotBoth(page, 'accounting');
  assert.deepEqual(page.errors, []);
});
