// Cohorts in the dashboard: the editor's cohort fields (name, reclaim and borrow policies,
// lending and borrowing limits, the fair-sharing weight) validated live, with no request; the
// overview and queue pages showing borrowed use apart from nominal use; the cohort page with
// each member's nominal, use, borrowed and lent and the usage stacked by member; a reclaim on
// the events page linking lender and borrower.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getJson, getVersion, submitJob, eventually, requestsBesideEditor, SIZES } from './harness.mjs';

// `a` (2 CPUs, may borrow 3 more) and `b` (2 CPUs, lends 1, reclaims from anyone) share
// cohort `research`.
const COHORT = `resource_flavors:
  - name: local
resource_queues:
  - name: a
    cohort_name: research
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 2, borrowing_limit: 3}]}]
  - name: b
    cohort_name: research
    preemption: {reclaim_within_cohort: any}
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 3, lending_limit: 2}]}]
scheduling_rules:
  - resource_queue: b
    selector: [{key: team, operator: in, values: [b]}]
  - resource_queue: a
`;

let server, chrome;
before(async () => {
  server = await startServer({ args: ['--sample-interval-s', '1', '--local-cpus', '16'] });
  chrome = await startBrowser();
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});

const sleeper = (team, name, priority = 0) => ({ name, entrypoint: 'sleep 300', labels: { team }, resources: { cpu: 1 }, priority });
const job = (id) => getJson(server.url, `/api/v1/jobs/${id}`);

test('the editor edits cohort fields in forms and validates them live, without a request', async () => {
  const page = await chrome.newPage();
  await page.goto(server.url + '/config');
  await hydrated(page);
  const before = page.requests.length;
  const q = '#f-resource_queues-0';
  const quota = `${q}-resource_groups-0-flavors-0`;
  const summary = () => page.textContent('[data-testid=problem-summary]');

  // Limits are offered once the queue is in a cohort; a cohort of one is only a warning.
  assert.equal(await page.locator(`${quota}-lending-cpu`).count(), 0, 'no limits outside a cohort');
  await page.fill(`${q}-cohort_name`, 'research');
  await page.waitForSelector(`${q}-cohort_name-problems >> text=has only this queue`);
  await page.fill(`${quota}-quota-cpu`, '2');
  await page.fill(`${quota}-lending-cpu`, '3');
  await page.waitForSelector(`${quota}-lending-cpu-problems >> text=3 is more than the quota 2`);
  assert.match(await summary(), /1 error/);
  assert.ok(await page.isDisabled('[data-testid=review-apply]'));
  await page.fill(`${quota}-lending-cpu`, '1');
  await page.fill(`${quota}-borrowing-cpu`, '4');

  // borrow_within_cohort needs a reclaim policy; `any` is not offered for it.
  await page.focus(`${q}-preemption-borrow_within_cohort`);
  const borrowOptions = await page.locator(`${q}-preemption-borrow_within_cohort option`).evaluateAll((os) => os.map((o) => o.value));
  assert.deepEqual(borrowOptions, ['', 'never', 'lower_priority']);
  await page.selectOption(`${q}-preemption-borrow_within_cohort`, 'lower_priority');
  await page.waitForSelector(`${q}-preemption-borrow_within_cohort-problems >> text=needs reclaim within cohort`);
  await page.focus(`${q}-preemption-reclaim_within_cohort`);
  await page.selectOption(`${q}-preemption-reclaim_within_cohort`, 'any');
  await page.waitForFunction((sel) => document.querySelector(sel).children.length === 0, `${q}-preemption-borrow_within_cohort-problems`);
  await page.fill(`${q}-fair_sharing_weight`, '2');
  await page.waitForSelector(`${q}-fair_sharing_weight-problems >> text=Berth extension`);
  assert.doesNotMatch(await summary(), /[1-9]\d* errors?/);
  assert.deepEqual(requestsBesideEditor(page, before), [], 'validated in the browser');
  await screenshotBoth(page, 'editor-cohort');

  // Applied as typed.
  await page.click('[data-testid=review-apply]');
  await page.waitForSelector('[data-testid=review]');
  await page.fill('#apply-message', 'default joins research');
  await page.click('[data-testid=confirm-apply]');
  await page.waitForSelector('[data-testid=applied]');
  const v = await getVersion(server.url);
  const queue = v.config.resource_queues[0];
  assert.equal(queue.cohort_name, 'research');
  assert.equal(queue.fair_sharing_weight, 2);
  assert.deepEqual(queue.preemption, { reclaim_within_cohort: 'any', borrow_within_cohort: 'lower_priority' });
  assert.deepEqual(queue.resource_groups[0].flavors[0].resources.find((r) => r.name === 'cpu'),
    { name: 'cpu', nominal_quota: 2, borrowing_limit: 4, lending_limit: 1 });
  assert.deepEqual(page.errors, []);
});

test('borrowed use shows apart from nominal use; the cohort page shows members; a reclaim links both sides', async () => {
  await applyConfig(server.url, COHORT, { message: 'research cohort' });
  const a = [];
  for (let k = 0; k < 4; k++) {
    a.push(await submitJob(server.url, sleeper('a', `a-${k}`, 5)));
    await eventually(async () => (await job(a[k].id)).state === 'running', { what: `a-${k} running` });
  }
  // Overview: a's bar has a borrowed segment, said in words.
  const page = await chrome.newPage();
  await page.goto(server.url + '/');
  await hydrated(page);
  const card = page.locator('[data-testid=queue-card][data-queue=a]');
  await card.locator('[data-testid=usage][data-borrowed="2"]').waitFor();
  assert.match(await card.locator('.usage-text').textContent(), /4 \/ 2 · 2 borrowed from research/);
  assert.match(await page.locator('[data-testid=queue-card][data-queue=b] .usage-text').textContent(), /0 \/ 3 · 2 lent to research/);
  assert.equal(await card.locator('.seg.borrowed').count(), 1);
  await screenshotBoth(page, 'overview-cohort');

  // The cohort page: pooled quota, members, chart stacked by member.
  await card.locator('[data-testid=cohort-link]').click();
  await page.waitForURL(/\/cohorts\/research$/);
  await page.waitForSelector('[data-testid=member][data-queue=a] [data-testid=member-role] >> text=borrowing');
  assert.equal((await page.textContent('[data-testid=member][data-queue=a] [data-testid=member-borrowed]')).trim(), '2');
  assert.equal((await page.textContent('[data-testid=member][data-queue=b] [data-testid=member-lent]')).trim(), '2');
  assert.equal((await page.textContent('[data-testid=member][data-queue=a] [data-testid=member-share]')).trim(), '50 %');
  assert.equal((await page.textContent('[data-testid=pool-row] [data-testid=pool-idle]')).trim(), '0');
  await eventually(async () => Number(await page.getAttribute('[data-testid=cohort-chart]', 'data-points')) > 0, { what: 'cohort chart points' });
  // The stack carries the members' quota sum and the capacity.
  const lines = await eventually(() => page.evaluate(() => {
    const c = window.echarts && window.echarts.getInstanceByDom(document.querySelector('[data-testid=cohort-chart]'));
    return c && c.getOption().series.length ? c.getOption().series.map((s) => s.name) : null;
  }), { what: 'the cohort chart series' });
  assert.ok(lines.includes('quota (sum of the queues)') && lines.includes('capacity (nodes now)'), lines.join());
  await screenshotBoth(page, 'cohort');
  // On a phone every figure of the pooled quota is on screen (one card per row), none cut off.
  await page.setViewportSize(SIZES.phone);
  for (const cell of await page.locator('[data-testid=pool-row] td').all()) {
    const b = await cell.boundingBox();
    assert.ok(b && b.x >= 0 && b.x + b.width <= SIZES.phone.width, `"${await cell.textContent()}" fits on the screen: ${JSON.stringify(b)}`);
  }
  await page.setViewportSize(SIZES.desktop);

  // b takes back what it lent: a reclaim, linked both ways on the events page.
  const urgent = await submitJob(server.url, { ...sleeper('b', 'b-urgent', 0), resources: { cpu: 2 } });
  await eventually(async () => (await job(urgent.id)).state === 'running', { what: 'b-urgent running' });
  await page.goto(server.url + '/events?kind=preempted');
  await hydrated(page);
  const row = page.locator('[data-testid=event][data-kind=preempted]').first();
  await row.waitFor();
  assert.match(await row.locator('.event-msg').textContent(), /queue b reclaims its quota from a in cohort research/);
  const reclaim = row.locator('[data-testid=reclaim]');
  assert.equal(await reclaim.locator('a.queue-link').nth(0).getAttribute('href'), '/queues/b');
  assert.equal(await reclaim.locator('a.queue-link').nth(1).getAttribute('href'), '/queues/a');
  assert.equal(await reclaim.locator('a.cohort-link').getAttribute('href'), '/cohorts/research');
  assert.equal(await row.locator('[data-testid=preemptor]').getAttribute('href'), `/jobs/${urgent.id}`);
  await screenshotBoth(page, 'events-reclaim');
  assert.deepEqual(page.errors, []);
  assert.deepEqual(page.outside, []);
});
