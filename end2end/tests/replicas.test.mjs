// Which replica runs the admission loop, as the overview says it: "this server" on SQLite;
// on two replicas of one PostgreSQL database, the leader's name on both, and a job
// submitted on the follower shows on the leader's page without a reload. Skipped (saying
// why) without BERTH_TEST_PG_URL.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, startBrowser, hydrated, screenshotBoth, submitJob, eventually } from './harness.mjs';

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
