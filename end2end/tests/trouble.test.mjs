// The overview's colours (issue 25, part 3): a queue whose quota is simply full is drawn in
// blue, and red is kept for trouble, a queue whose jobs have waited 10 minutes.
//
// The server has no clock to move, so a wait of 11 minutes is made as it would have
// happened: a held job is stored, the server is stopped, the job's enqueue time is set 11
// minutes back in the SQLite database (Python's sqlite3, as bench.test.mjs seeds jobs), and
// the server is started again on the same database.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getJson, submitJob, eventually } from './harness.mjs';

// Two queues of one CPU each, both full; in `stuck` a held job has also waited long.
const CONFIG = `resource_flavors:
  - name: local
resource_queues:
  - name: busy
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
  - name: stuck
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: stuck
    selector: [{key: team, operator: in, values: [stuck]}]
  - resource_queue: busy
`;

const ELEVEN_MINUTES_US = 11 * 60 * 1_000_000;

let server, chrome;
const sleepers = [];
before(async () => {
  const first = await startServer();
  await applyConfig(first.url, CONFIG, { message: 'two queues' });
  const held = await submitJob(first.url, { name: 'held-long', entrypoint: 'true', labels: { team: 'stuck' }, resources: { cpu: 1 }, hold: true });
  await first.stop();
  const moved = execFileSync('python3', ['-c',
    'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); n = c.execute("UPDATE jobs SET enqueued_at_us = enqueued_at_us - ? WHERE id = ?", (int(sys.argv[2]), sys.argv[3])).rowcount; c.commit(); print(n)',
    `${first.dir}/berth.db`, String(ELEVEN_MINUTES_US), held.id]).toString().trim();
  assert.equal(moved, '1', 'the held job was found in the database');
  server = await startServer({ dir: first.dir, port: first.port });
  for (const team of ['busy', 'stuck']) {
    const sleeper = await submitJob(server.url, { name: `fills-${team}`, entrypoint: 'sleep 120', labels: { team }, resources: { cpu: 1 } });
    sleepers.push(sleeper.id);
    await eventually(async () => (await getJson(server.url, `/api/v1/jobs/${sleeper.id}`)).state === 'running', { what: `the ${team} sleeper running` });
  }
  chrome = await startBrowser();
});
after(async () => {
  for (const id of sleepers) await fetch(`${server.url}/api/v1/jobs/${id}/cancel`, { method: 'POST' });
  await chrome?.browser.close();
  await server?.stop();
});

const text = async (locator) => (await locator.innerText()).replace(/\s+/g, ' ').trim();
/** The colour a person sees filling the quota bar of `card`. */
const barColour = (card) => card.getByRole('meter').locator(':scope > *').first().evaluate((el) => getComputedStyle(el).backgroundColor);

test('a full quota is blue; red only where jobs have waited 10 minutes', async () => {
  const page = await chrome.newPage();
  await page.goto(server.url);
  await hydrated(page);
  const busy = page.locator('[data-testid=queue-card][data-queue=busy]');
  const stuck = page.locator('[data-testid=queue-card][data-queue=stuck]');
  for (const card of [busy, stuck]) {
    assert.equal(await card.getByRole('meter').getAttribute('aria-label'), 'local · cpu: 1 / 1', 'both quotas are full');
  }

  // Busy: the quota is all in use, nobody has waited: no note, and the bar is not red.
  assert.equal(await busy.getByText(/Jobs have waited over/).count(), 0);
  const [busyColour, stuckColour] = [await barColour(busy), await barColour(stuck)];
  const [r, g, b] = busyColour.match(/\d+/g).map(Number);
  assert.ok(b > r && b > g, `a full quota is drawn in blue, not ${busyColour}`);

  // Stuck: just as full, and a job has waited 11 minutes: the note and a red bar.
  assert.equal(await text(stuck.getByText(/Jobs have waited over/)), 'Jobs have waited over 10 m 0 s here.');
  assert.match(await text(stuck.locator('[data-testid=longest-wait]')), /^11 m \d+ s$/);
  const [sr, sg, sb] = stuckColour.match(/\d+/g).map(Number);
  assert.ok(sr > sg && sr > sb, `a queue in trouble is drawn in red, not ${stuckColour}`);
  await screenshotBoth(page, 'overview-trouble');
  assert.deepEqual(page.errors, []);
});
