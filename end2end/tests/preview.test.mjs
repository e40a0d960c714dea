// Preview impact: a workload recorded by the real server (six half-CPU jobs in a queue of one
// CPU), then in the editor: lower the quota, open the review, preview, and see the waits
// change in the table and the chart; and a preview cancelled while it runs aborts its request.
import { test, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getJson, SIZES, eventually } from './harness.mjs';

const CONFIG = `resource_flavors:
  - name: local
resource_queues:
  - name: batch
    resource_groups:
      - covered_resources: [cpu]
        flavors:
          - name: local
            resources:
              - name: cpu
                nominal_quota: 1
scheduling_rules:
  - resource_queue: batch
`;

let chrome, server, page;
before(async () => { chrome = await startBrowser(); });
after(async () => { await chrome?.browser.close(); });
beforeEach(async () => {
  server = await startServer();
  page = await chrome.newPage(SIZES.desktop);
});
afterEach(async () => {
  assert.deepEqual(page.outside, [], 'requests left 127.0.0.1');
  assert.deepEqual(page.errors, [], 'console or page errors');
  await page.context().close();
  await server.stop();
});

/** Six jobs of half a CPU sleeping a second: two at a time under a quota of 1. */
async function recordWorkload() {
  await applyConfig(server.url, CONFIG);
  for (let i = 0; i < 6; i++) {
    const r = await fetch(`${server.url}/api/v1/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ entrypoint: 'sleep 1', resources: { cpu: 0.5 } }),
    });
    assert.equal(r.status, 201, await r.text());
  }
  const deadline = Date.now() + 30_000;
  for (;;) {
    const page = await getJson(server.url, '/api/v1/jobs?state=succeeded');
    if (page.jobs.length === 6) return;
    assert.ok(Date.now() < deadline, 'the recorded jobs did not finish');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The editor with batch's CPU quota lowered to 0.5, and the review open. */
async function reviewLowerQuota() {
  await page.goto(server.url + '/config');
  await hydrated(page);
  await page.fill('#f-resource_queues-0-resource_groups-0-flavors-0-quota-cpu', '0.5');
  await page.click('[data-testid=review-apply]');
  await page.waitForSelector('[data-testid=review] [data-testid=preview]');
}

test('lowering a quota and previewing shows longer waits, in the table and the chart', async () => {
  await recordWorkload();
  await reviewLowerQuota();
  await page.click('[data-testid=preview-run]');
  await page.waitForSelector('[data-testid=preview-report]', { timeout: 20_000 });
  const summary = await page.textContent('[data-testid=preview-summary]');
  assert.match(summary, /^6 jobs submitted in the window/);
  // One at a time instead of two: the p95 wait grows (shown as "active → draft").
  const p95 = await page.textContent('[data-testid=preview-queues] tr[data-queue=batch] td.wait-p95');
  const m = p95.match(/^(\d+) s → (\d+) s$/);
  assert.ok(m, `p95 cell: ${p95}`);
  assert.ok(Number(m[2]) > Number(m[1]), p95);
  // The chart (ECharts, built with charming): per queue an active and a draft bar; batch's
  // draft bar is the taller one.
  const chart = await eventually(() => page.evaluate(() => {
    const c = window.echarts?.getInstanceByDom(document.querySelector('[data-testid=wait-chart]'));
    if (!c || !c.getOption().series.length) return null;
    const o = c.getOption();
    return { queues: o.xAxis[0].data, series: o.series.map((s) => ({ name: s.name, data: s.data })) };
  }), { what: 'the wait chart' });
  const at = chart.queues.indexOf('batch');
  assert.ok(at >= 0, JSON.stringify(chart));
  const [active, draft] = ['active', 'draft'].map((n) => chart.series.find((s) => s.name === n).data[at]);
  assert.ok(draft > active, `batch wait p95 bars: active ${active}, draft ${draft}`);
  assert.match(await page.textContent('[data-testid=preview-fidelity]'), /Fidelity: the active-config replay differs/);
  await screenshotBoth(page, 'preview');
});

test('cancelling a preview while it runs aborts its request', async () => {
  await recordWorkload();
  await reviewLowerQuota();
  // Hold the server function call so the replay is still "running" when Cancel is clicked.
  const aborted = [];
  page.on('requestfailed', (r) => r.url().includes('preview_draft') && aborted.push(r.failure()?.errorText));
  await page.route(/preview_draft/, async (route) => {
    await new Promise((r) => setTimeout(r, 3000));
    await route.continue().catch(() => {});
  });
  await page.click('[data-testid=preview-run]');
  await page.waitForSelector('[data-testid=preview-running]');
  await page.click('[data-testid=preview-cancel]');
  await page.waitForSelector('[data-testid=preview-cancelled]');
  await page.waitForFunction(() => !document.querySelector('[data-testid=preview-cancel]'));
  // The fetch was aborted, and no report appears afterwards.
  for (let i = 0; i < 40 && aborted.length === 0; i++) await page.waitForTimeout(100);
  assert.equal(aborted.length, 1, 'the preview request was aborted');
  await page.waitForTimeout(3500);
  assert.equal(await page.$('[data-testid=preview-report]'), null);
  // It can run again.
  await page.unroute(/preview_draft/);
  await page.click('[data-testid=preview-run]');
  await page.waitForSelector('[data-testid=preview-report]', { timeout: 20_000 });
});
