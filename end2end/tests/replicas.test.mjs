// Which replica runs the admission loop, as the overview says it: "this server" on SQLite;
// on two replicas of one PostgreSQL database, the leader's name on both, and a job
// submitted on the follower shows on the leader's page without a reload, and a waiting job's
// page on the follower shows the position the leader gives it. Skipped (saying why) without
// BERTH_TEST_PG_URL.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, startBrowser, hydrated, screenshotBoth, submitJob, applyConfig, getJson, eventually } from './harness.mjs';

const servers = [];
let chrome;
after(async () => {
  await chrome?.browser.close();
  for (const s of servers) await s.stop();
});

async function leaderLine(page) {
  const line = page.locator('[data-testid=leader]');
  await line.waitFor({ timeout: 10_000 });
  return (await line.textContent()).trim();
}

test('a single server on SQLite says it runs the admission loop itself', async () => {
  const server = await startServer();
  servers.push(server);
  chrome ??= await startBrowser();
  const page = await chrome.newPage();
  await page.goto(server.url);
  await hydrated(page);
  assert.equal(await leaderLine(page), 'Admission loop: this server (the only one)');
});

test('two replicas on PostgreSQL both name the leader; the follower\'s submission shows on the leader', { skip: !process.env.BERTH_TEST_PG_URL && 'BERTH_TEST_PG_URL is not set' }, async () => {
  const admin = process.env.BERTH_TEST_PG_URL;
  const name = `berth_e2e_replicas_${process.pid}_${Date.now()}`;
  execFileSync('psql', [admin, '-qc', `CREATE DATABASE ${name}`]);
  const databaseUrl = `${admin.slice(0, admin.lastIndexOf('/'))}/${name}`;
  const a = await startServer({ databaseUrl, args: ['--replica-name', 'replica-a'] });
  servers.push(a);
  await eventually(async () => (await (await fetch(`${a.url}/readyz`)).text()).includes('(this replica)'), { what: 'replica-a to lead' });
  const b = await startServer({ databaseUrl, args: ['--replica-name', 'replica-b'] });
  servers.push(b);
  chrome ??= await startBrowser();
  const onLeader = await chrome.newPage();
  await onLeader.goto(a.url);
  await hydrated(onLeader);
  assert.equal(await leaderLine(onLeader), 'Admission loop: replica-a (this replica)');
  const onFollower = await chrome.newPage();
  await onFollower.goto(b.url);
  await hydrated(onFollower);
  assert.equal(await leaderLine(onFollower), 'Admission loop: replica-a');
  await screenshotBoth(onFollower, 'replicas-follower-overview');

  await onLeader.waitForSelector('[data-testid=live].on');
  await onLeader.evaluate(() => (window.__noReload = true));
  const before = Number(await onLeader.locator('[data-testid=total-running]').textContent());
  await submitJob(b.url, { name: 'via-follower', entrypoint: 'sleep 5', resources: { cpu: 1 } });
  await eventually(async () => Number(await onLeader.locator('[data-testid=total-running]').textContent()) === before + 1, { what: 'the leader\'s overview to show the job running' });
  // And the follower's own page, refreshed by the leader's notice.
  await eventually(async () => Number(await onFollower.locator('[data-testid=total-running]').textContent()) === before + 1, { what: 'the follower\'s overview to show it running' });
  assert.equal(await onLeader.evaluate(() => window.__noReload), true, 'no reload');
  assert.deepEqual(onFollower.errors, []);
});

// One queue with room for one job at a time.
const ONE_AT_A_TIME = `
resource_flavors:
  - name: local
    selector:
      - {key: backend, operator: in, values: [local]}
resource_queues:
  - name: solo
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: solo
`;

test('a waiting job\'s page on the follower shows the position the leader gives it', { skip: !process.env.BERTH_TEST_PG_URL && 'BERTH_TEST_PG_URL is not set' }, async () => {
  const admin = process.env.BERTH_TEST_PG_URL;
  const name = `berth_e2e_positions_${process.pid}_${Date.now()}`;
  execFileSync('psql', [admin, '-qc', `CREATE DATABASE ${name}`]);
  const databaseUrl = `${admin.slice(0, admin.lastIndexOf('/'))}/${name}`;
  const a = await startServer({ databaseUrl, args: ['--replica-name', 'replica-a'] });
  servers.push(a);
  await eventually(async () => (await (await fetch(`${a.url}/readyz`)).text()).includes('(this replica)'), { what: 'replica-a to lead' });
  const b = await startServer({ databaseUrl, args: ['--replica-name', 'replica-b'] });
  servers.push(b);
  await applyConfig(b.url, ONE_AT_A_TIME, { message: 'one at a time' });
  const running = await submitJob(b.url, { name: 'holder', entrypoint: 'sleep 60', resources: { cpu: 1 } });
  await eventually(async () => (await getJson(a.url, `/api/v1/jobs/${running.id}`)).state === 'running', { what: 'the first job running' });
  const first = await submitJob(b.url, { name: 'first-in-line', entrypoint: 'true', resources: { cpu: 1 } });
  const second = await submitJob(b.url, { name: 'second-in-line', entrypoint: 'true', resources: { cpu: 1 } });
  await eventually(async () => (await getJson(a.url, `/api/v1/jobs/${second.id}`)).position === 2, { what: 'the leader to rank the second job 2nd' });
  chrome ??= await startBrowser();
  const page = await chrome.newPage();
  for (const [job, position] of [[first, 1], [second, 2]]) {
    await eventually(async () => {
      await page.goto(`${b.url}/jobs/${job.id}`);
      await hydrated(page);
      const line = page.locator('[data-testid=job-position]');
      return (await line.count()) > 0 && (await line.textContent()).trim() === `Position ${position} in its queue.`;
    }, { what: `the follower's page of ${job.name} to say position ${position}` });
  }
  const reason = (await page.locator('[data-testid=job-reason]').textContent()).trim();
  assert.match(reason, /^Why it waits: Waiting for CPU: 1 of 1 in use in solo/);
  await screenshotBoth(page, 'replicas-follower-position');
  assert.deepEqual(page.errors, []);
  for (const job of [running, first, second]) await fetch(`${b.url}/api/v1/jobs/${job.id}/cancel`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
});
