// Plain words and dead configs (issue 25, parts 1 and 2), read as a person reads the pages:
// problems named by queue, flavor and field; warnings against the server's nodes; where the
// submit form's job would go; wait reasons as a headline with the full explanation one click
// away; a preempted job's position and current reason; job names next to ids; true empty
// logs; rejected jobs' reasons in the tables; diffs by name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getJson, submitJob, eventually, typeYaml } from './harness.mjs';

// `vision` holds one CPU and preempts lower priorities; everything else goes to `default`.
const CONFIG = `resource_flavors:
  - name: local
resource_queues:
  - name: vision
    preemption: {within_resource_queue: lower_priority}
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
  - name: default
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local}]
scheduling_rules:
  - resource_queue: vision
    selector: [{key: team, operator: in, values: [vision]}]
    priority_policy: {default: 10, min: 0, max: 100, on_violation: reject}
  - resource_queue: default
`;

let server, chrome;
before(async () => {
  server = await startServer();
  chrome = await startBrowser();
  await applyConfig(server.url, CONFIG, { message: 'plain words' });
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});

const text = async (locator) => (await locator.innerText()).replace(/\s+/g, ' ').trim();
const job = (id) => getJson(server.url, `/api/v1/jobs/${id}`);

test('the editor names problems in words, keeps the path, and warns about dead queues and capacity', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/config`);
  await hydrated(page);
  await page.click('#tab-yaml');
  // A negative quota, a queue with no resource group (and a rule routing to it), and a
  // quota far above what the server's one node has.
  const draft = `resource_flavors:
  - name: local
resource_queues:
  - name: vision
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: -1}]}]
  - name: empty
  - name: default
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 100000}]}]
scheduling_rules:
  - resource_queue: vision
    selector: [{key: team, operator: in, values: [vision]}]
  - resource_queue: empty
    selector: [{key: team, operator: in, values: [empty]}]
  - resource_queue: default
`;
  await typeYaml(page, draft);
  const problems = page.locator('[data-testid=problems] [data-testid=problem]');
  const negative = problems.filter({ hasText: 'must not be negative' });
  await negative.waitFor();
  // The place reads into the message: no schema name between them.
  assert.match(await text(negative), /^queue vision › resource group 1 › flavor local › cpu quota must not be negative, but is -1/);
  assert.doesNotMatch(await text(negative), /nominal_quota must/);
  assert.match(await text(negative), /resource_queues\[0\]\.resource_groups\[0\]\.flavors\[0\]\.resources\[0\]\.nominal_quota/, 'the schema path is still shown');
  // A queue without resource groups is dead, and so is the rule that routes to it.
  assert.match(await text(problems.filter({ hasText: /^queue empty/ })), /covers no resource \(it has no resource group\), so every job routed to it is rejected/);
  assert.match(await text(problems.filter({ hasText: /^rule 2 › target queue/ })), /queue `empty` covers no resource, so every job this rule routes is rejected/);
  // The server knows the node: a quota above its capacity is a warning, asked for a moment after the edit.
  const above = problems.filter({ hasText: 'quota 100000 cpu is more than the' });
  await above.waitFor({ timeout: 10_000 });
  assert.match(await text(above), /^queue default › resource group 1 › flavor local › cpu quota/);
  assert.match(await text(above), /the 1 node of flavor `local` have in total/);
  await page.click('#tab-form');
  await screenshotBoth(page, 'words-editor-problems');
  assert.deepEqual(page.errors, []);
});

test('the submit form says where the job would go as it is typed', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/jobs/new`);
  await hydrated(page);
  const preview = page.locator('[data-testid=route-preview]');
  await preview.waitFor();
  await eventually(async () => (await text(preview)) === '→ queue default via rule 2, priority 0, flavor local', { what: 'the catch-all route' });
  await page.fill('#s-labels', 'team=vision');
  await eventually(async () => (await text(preview)) === '→ queue vision via rule 1, priority 10, flavor local', { what: 'the vision route' });
  await page.fill('#s-priority', '500');
  await eventually(async () => /^Would be rejected: priority 500 is above the maximum 100/.test(await text(preview)), { what: 'the priority bound' });
  await page.fill('#s-priority', '');
  await page.fill('#s-gpu', '1');
  await eventually(async () => (await text(preview)) === '→ queue vision via rule 1, priority 10: would be rejected, queue vision covers no gpu', { what: 'the uncovered gpu' });
  await page.fill('#s-gpu', '');
  await page.fill('#s-entrypoint', 'true');
  await screenshotBoth(page, 'words-submit');
  assert.deepEqual(page.errors, []);
});

test('a waiting job shows a headline with the full reason one click away; a preempted one where it stands', async () => {
  const low = await submitJob(server.url, { name: 'low-sleeper', entrypoint: 'sleep 60', labels: { team: 'vision' }, priority: 1, resources: { cpu: 1 } });
  await eventually(async () => (await job(low.id)).state === 'running', { what: 'low running' });
  const high = await submitJob(server.url, { name: 'high-sleeper', entrypoint: 'sleep 60', labels: { team: 'vision' }, priority: 50, resources: { cpu: 1 } });
  await eventually(async () => (await job(high.id)).state === 'running', { what: 'high running after preempting low' });
  await eventually(async () => (await job(low.id)).reason_headline, { what: 'the preempted job explained' });

  // Queue page: the headline, then the engine's explanation under "Full explanation".
  const page = await chrome.newPage();
  await page.goto(`${server.url}/queues/vision`);
  await hydrated(page);
  const row = page.locator(`[data-testid=pending-row][data-job="${low.id}"]`);
  await row.waitFor();
  const headline = row.locator('[data-testid=reason-headline]');
  assert.equal(await text(headline), 'Waiting for CPU: 1 of 1 in use in vision; nothing of lower priority to preempt');
  const full = row.locator('[data-testid=reason-full]');
  assert.equal(await full.isVisible(), false, 'the full explanation is folded');
  await row.getByText('Full explanation').click();
  assert.match(await text(full), /^queue vision: flavor local: cpu quota 1, in use 1, requested 1; no running job below priority 1 left to preempt$/);
  await screenshotBoth(page, 'words-queue');

  // Job page of the preempted job: its position and what it waits for now.
  await page.goto(`${server.url}/jobs/${low.id}`);
  await hydrated(page);
  assert.equal(await text(page.locator('[data-testid=job-position]')), 'Position 1 in its queue.');
  const reason = await text(page.locator('[data-testid=job-reason]'));
  assert.match(reason, /^Why it waits: Waiting for CPU: 1 of 1 in use in vision/);
  assert.doesNotMatch(reason, /preempted by/);
  // Its timeline names the preemptor by name in the event's words, and by name and id in the link.
  assert.match(await text(page.locator('[data-testid=timeline]')), /preempted by high-sleeper \(priority 50 > 1\)/);
  assert.equal(await text(page.locator('[data-testid=preemptor-link]')), `see high-sleeper (${high.id})`);
  await screenshotBoth(page, 'words-job-preempted');

  // Events: the preemption names both jobs, and every event its job's name.
  await page.goto(`${server.url}/events?kind=preempted`);
  await hydrated(page);
  const event = page.locator(`[data-testid=event][data-job="${low.id}"]`).first();
  await event.waitFor();
  assert.equal(await text(event.locator('[data-testid=event-job]')), 'low-sleeper');
  assert.match(await text(event.locator('.event-line')), new RegExp(low.id));
  assert.equal(await text(event.locator('[data-testid=preemptor]')), `high-sleeper (${high.id})`);
  assert.match(await text(event), /preempted by high-sleeper \(priority 50 > 1\)/, 'the event says who preempted by name');
  assert.doesNotMatch(await text(event), new RegExp(`preempted by ${high.id}`));
  assert.equal(await text(event.locator('[data-testid=victim]')), `low-sleeper (${low.id})`);
  await screenshotBoth(page, 'words-events');
  for (const id of [low.id, high.id]) {
    await fetch(`${server.url}/api/v1/jobs/${id}/cancel`, { method: 'POST' });
  }
  assert.deepEqual(page.errors, []);
});

test('a finished job with no output says so, not "Nothing written yet"', async () => {
  const quiet = await submitJob(server.url, { name: 'quiet', entrypoint: 'true', resources: { cpu: 0.1 } });
  await eventually(async () => (await job(quiet.id)).state === 'succeeded', { what: 'quiet succeeded' });
  const page = await chrome.newPage();
  await page.goto(`${server.url}/jobs/${quiet.id}`);
  await hydrated(page);
  assert.equal(await text(page.locator('[data-testid=log-empty]')), 'No output: the job wrote nothing to stdout.');
  await screenshotBoth(page, 'words-job-empty-log');
  assert.deepEqual(page.errors, []);
});

test('rejected jobs show their reason in the jobs and stage tables', async () => {
  const r = await fetch(`${server.url}/api/v1/stages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'mixed', jobs: [{ name: 'fine', entrypoint: 'true', resources: { cpu: 0.1 } }, { name: 'wants-gpu', entrypoint: 'true', resources: { gpu: 1 } }] }),
  });
  const stage = await r.json();
  assert.ok(stage.stage_id, JSON.stringify(stage));
  const page = await chrome.newPage();
  await page.goto(`${server.url}/stages/${stage.stage_id}`);
  await hydrated(page);
  const rejected = page.locator('[data-testid=stage-job]', { hasText: 'wants-gpu' });
  assert.equal(await text(rejected.locator('[data-testid=stage-job-reason]')), 'queue default has no resource group covering gpu');
  await screenshotBoth(page, 'words-stage');

  await page.goto(`${server.url}/jobs?state=rejected`);
  await hydrated(page);
  const row = page.locator('[data-testid=job-row]', { hasText: 'wants-gpu' }).first();
  assert.equal(await text(row.locator('[data-testid=job-row-reason]')), 'queue default has no resource group covering gpu');
  await screenshotBoth(page, 'words-jobs-rejected');
  assert.deepEqual(page.errors, []);
});

test('a version diff names rules by number and content', async () => {
  const page = await chrome.newPage();
  const active = await getJson(server.url, '/api/v1/scheduler/config');
  await page.goto(`${server.url}/config/versions/${active.version}`);
  await hydrated(page);
  await page.getByText('rule 1 (team = vision → vision) added').waitFor();
  await screenshotBoth(page, 'words-version-diff');
  assert.deepEqual(page.errors, []);
});
