// The config editor: form editing, live validation in the browser (no request), apply with a
// review and a message, conflicts, reordering, history, diff and rollback. Each test gets its
// own server (fresh database: version 1 is the initial config) and browser context.
import { test, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getVersion, typeYaml, SIZES, requestsBesideEditor } from './harness.mjs';
import { GPU_CONFIG } from './configs.mjs';


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

async function openEditor() {
  await page.goto(server.url + '/config');
  await hydrated(page);
}

/** The review dialog: message, confirm. The author is whoever is signed in. */
async function applyInUi(message) {
  await page.click('[data-testid=review-apply]');
  await page.waitForSelector('[data-testid=review]');
  await page.fill('#apply-message', message);
  await page.click('[data-testid=confirm-apply]');
}

const summary = () => page.textContent('[data-testid=problem-summary]');

/** Picks an option as a person does: the select gets the focus first (it fills its list then). */
async function choose(select, value) {
  await page.focus(select);
  await page.selectOption(select, value);
}

test('adding a flavor and a queue quota that references it', async () => {
  await openEditor();
  await page.click('[data-testid=add-flavor]');
  // The new flavor's name field has the focus: type its name.
  await page.waitForFunction(() => document.activeElement?.id === 'f-resource_flavors-1-name');
  await page.fill('#f-resource_flavors-1-name', 'spot');
  await page.click('#f-resource_flavors-1-selector-add');
  await page.fill('#f-resource_flavors-1-selector-0-key', 'market');
  await page.fill('#f-resource_flavors-1-selector-0-values', 'spot');
  await page.locator('[data-testid=flavor]').nth(1).locator('details.advanced summary').click();
  await page.fill('#f-resource_flavors-1-advanced_instance_config', 'instance_type: g5.xlarge\n');

  // Queue `default`, group 1: a second flavor, spot, with 8 GPUs and no CPUs (blocked).
  await page.locator('[data-testid=queue]').first().locator('[data-testid=add-quota]').click();
  const row = '#f-resource_queues-0-resource_groups-0-flavors-1';
  await choose(`${row}-name`, 'spot');
  await page.fill(`${row}-quota-gpu`, '8');
  await page.fill(`${row}-quota-cpu`, '0');
  assert.match(await summary(), /No problems/);
  await screenshotBoth(page, 'editor');

  // The YAML tab shows the same draft.
  await page.click('#tab-yaml');
  const yaml = await page.inputValue('#draft');
  assert.match(yaml, /- name: spot\n {4}selector:\n {6}- key: market\n {8}operator: in\n {8}values: \[spot\]\n {4}advanced_instance_config:\n {6}instance_type: g5.xlarge/);
  assert.match(yaml, /- name: spot\n {12}resources:\n {14}- name: cpu\n {16}nominal_quota: 0\n {14}- name: gpu\n {16}nominal_quota: 8/);
  await page.click('#tab-form');

  await applyInUi('spot GPUs for the default queue');
  await page.waitForSelector('[data-testid=applied]');
  const v = await getVersion(server.url);
  assert.equal(v.version, 2);
  assert.equal(v.creator_id, 'anonymous', 'the author is the caller, here anonymous local mode');
  assert.deepEqual(v.config.resource_queues[0].resource_groups[0].flavors[1],
    { name: 'spot', resources: [{ name: 'cpu', nominal_quota: 0 }, { name: 'gpu', nominal_quota: 8 }] });
  assert.deepEqual(v.config.resource_flavors[1].advanced_instance_config, { instance_type: 'g5.xlarge' });
});

test('a rule targeting a deleted queue is an error at once, gone when fixed, with no request', async () => {
  await applyConfig(server.url, GPU_CONFIG, { message: 'research queue' });
  await openEditor();
  const before = page.requests.length;

  await page.click('button[aria-label="Remove queue 2"]');
  const problems = '#f-scheduling_rules-0-resource_queue-problems';
  await page.waitForSelector(`${problems} >> text=no queue named \`research\``);
  assert.match(await summary(), /1 error/);
  assert.equal(await page.getAttribute('#f-scheduling_rules-0-resource_queue', 'aria-invalid'), 'true');
  assert.ok(await page.isDisabled('[data-testid=review-apply]'), 'Apply is disabled while errors remain');
  await screenshotBoth(page, 'editor-error');

  await choose('#f-scheduling_rules-0-resource_queue', 'default');
  await page.waitForFunction((sel) => document.querySelector(sel).children.length === 0, problems);
  assert.doesNotMatch(await summary(), /[1-9]\d* errors?/);
  assert.ok(!(await page.isDisabled('[data-testid=review-apply]')));

  // A syntax error in the YAML tab points at its line and column, also without a request.
  await page.click('#tab-yaml');
  await typeYaml(page, 'resource_queues: [oops');
  await page.locator('.problem.error', { hasText: /line \d+, column \d+/ }).first().waitFor();
  assert.ok(await page.isDisabled('#tab-form'), 'the form waits until the YAML parses');
  assert.deepEqual(requestsBesideEditor(page, before), [], 'no request while editing and validating');
});

test('apply with a message creates a version shown in the history', async () => {
  await openEditor();
  await page.fill('#f-resource_queues-0-name', 'batch');
  await choose('#f-scheduling_rules-0-resource_queue', 'batch');
  await page.click('[data-testid=review-apply]');
  await page.waitForSelector('[data-testid=review] [data-testid=changes]');
  assert.match(await page.textContent('[data-testid=review] [data-section=queues]'), /batch/);
  assert.match(await page.textContent('[data-testid=review] [data-testid=sbs-diff]'), /name: batch/);
  await screenshotBoth(page, 'review', { fullPage: false });
  await page.fill('#apply-message', 'rename default to batch');
  await page.click('[data-testid=confirm-apply]');
  await page.waitForSelector('[data-testid=applied] >> text=version 2');
  assert.match(await page.textContent('[data-testid=active-meta]'), /version 2/);
  assert.ok(await page.isDisabled('[data-testid=review-apply]'), 'nothing left to apply');

  await page.goto(server.url + '/config/versions');
  await hydrated(page);
  const rows = page.locator('[data-testid=version-row]');
  assert.equal(await rows.count(), 2);
  const newest = await rows.nth(0).textContent();
  for (const want of [/v2/, /active/, /anonymous/, /rename default to batch/]) assert.match(newest, want);
  assert.doesNotMatch(await rows.nth(1).textContent(), /active/);
  await screenshotBoth(page, 'history');
});

test('the diff of two versions shows a changed quota, structurally and side by side', async () => {
  await applyConfig(server.url, GPU_CONFIG, { message: 'research queue' });
  await applyConfig(server.url, GPU_CONFIG.replace('nominal_quota: 64', 'nominal_quota: 32'), { message: 'halve research' });
  await applyConfig(server.url, GPU_CONFIG.replace('nominal_quota: 64', 'nominal_quota: 48'), { message: 'some back' });
  await page.goto(server.url + '/config/versions');
  await hydrated(page);
  // Pick version 2 → version 3 (not the default newest pair).
  await page.check('#from-2');
  await page.check('#to-3');
  await page.click('[data-testid=compare]');
  await page.waitForURL((u) => u.pathname === '/config/diff' && u.searchParams.get('from') === '2' && u.searchParams.get('to') === '3');
  await page.waitForSelector('[data-testid=diff-page] [data-testid=changes]');
  const queues = await page.textContent('[data-section=queues]');
  assert.match(queues, /resource_queues\[research\]\.resource_groups\[0\]\.flavors\[spot\]\.resources\[gpu\]\.nominal_quota/);
  assert.match(queues, /64\s*→\s*32/);
  assert.equal(await page.locator('[data-section=flavors]').count(), 0, 'no flavor changed');
  assert.match(await page.textContent('[data-testid=sbs-diff] td.del'), /nominal_quota: 64/);
  assert.match(await page.textContent('[data-testid=sbs-diff] td.ins'), /nominal_quota: 32/);
  await screenshotBoth(page, 'diff');

  // A version page shows the diff against its predecessor by default.
  await page.goto(server.url + '/config/versions/4');
  await hydrated(page);
  assert.match(await page.textContent('[data-section=queues]'), /32\s*→\s*48/);
});

test('rollback creates version N+1 equal to the restored version', async () => {
  await applyConfig(server.url, GPU_CONFIG, { message: 'research queue' });
  await applyConfig(server.url, GPU_CONFIG.replace('nominal_quota: 64', 'nominal_quota: 8'), { message: 'oops' });
  await page.goto(server.url + '/config/versions/2');
  await hydrated(page);
  await page.click('[data-testid=rollback]');
  // The confirmation shows what the rollback changes against the active version 3.
  await page.waitForSelector('.rollback [data-testid=changes]');
  assert.match(await page.textContent('.rollback [data-testid=changes]'), /8\s*→\s*64/);
  await page.fill('#rollback-reason', 'quota too small');
  await screenshotBoth(page, 'rollback');
  await page.click('[data-testid=confirm-rollback]');
  await page.waitForURL(/\/config\/versions\/4$/);
  const [v2, v4] = [await getVersion(server.url, 2), await getVersion(server.url)];
  assert.equal(v4.version, 4);
  assert.deepEqual(v4.config, v2.config);
  assert.equal(v4.message, 'rollback to version 2: quota too small');
});

test('a draft gets a conflict when someone applied meanwhile, and nothing is overwritten', async () => {
  await openEditor();
  await page.click('[data-testid=add-flavor]');
  await page.fill('#f-resource_flavors-1-name', 'mine');
  // Someone else applies through the REST API while the draft is open.
  await applyConfig(server.url, GPU_CONFIG, { message: 'theirs' });
  await applyInUi('my flavor');
  await page.waitForSelector('[data-testid=conflict]');
  assert.match(await page.textContent('[data-testid=conflict]'), /Version 2 was applied after your draft was started from version 1/);
  const active = await getVersion(server.url);
  assert.equal(active.version, 2);
  assert.equal(active.message, 'theirs');
  assert.ok(await page.isDisabled('[data-testid=review-apply]'));

  await page.click('[data-testid=show-conflict-diff]');
  await page.waitForSelector('[data-testid=conflict-diff] [data-testid=changes]');
  assert.match(await page.textContent('[data-testid=conflict-diff]'), /research/);
  await screenshotBoth(page, 'conflict');

  // Rebase: the draft stays, the review now compares with version 2.
  await page.click('[data-testid=rebase]');
  await page.waitForSelector('[data-testid=conflict]', { state: 'detached' });
  assert.equal(await page.inputValue('#f-resource_flavors-1-name'), 'mine');
  await applyInUi('my flavor, on top of theirs');
  await page.waitForSelector('[data-testid=applied] >> text=version 3');
  const v3 = await getVersion(server.url);
  assert.deepEqual(v3.config.resource_flavors.map((f) => f.name), ['local', 'mine']);
});

test('rules reorder with the keyboard, and the order survives a reload and an apply', async () => {
  await applyConfig(server.url, GPU_CONFIG);
  await openEditor();
  await page.focus('button[aria-label="Move rule 2 up"]');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('[data-testid=rule] h3').textContent.includes('default'));
  // The focus followed the rule to the top, where "up" is disabled: it is on "down".
  assert.equal(await page.evaluate(() => document.activeElement.id), 'rule-0-down');
  assert.match(await summary(), /1 warning|2 warnings/, 'rule 2 is now unreachable: a warning, not an error');
  assert.match(await page.textContent('#f-1-rule-problems'), /can never match/);

  // The draft lives in local storage: a reload keeps the new order.
  await page.reload();
  await hydrated(page);
  await page.waitForSelector('[data-testid=restored]');
  const targets = await page.locator('[data-testid=rule] h3').allTextContents();
  assert.match(targets[0], /default/);
  assert.match(targets[1], /research/);

  await applyInUi('catch-all first');
  await page.waitForSelector('[data-testid=applied]');
  const v = await getVersion(server.url);
  assert.deepEqual(v.config.scheduling_rules.map((r) => r.resource_queue), ['default', 'research']);
});

test('an uploaded YAML file lands in the editor, and any version downloads as YAML', async () => {
  await openEditor();
  await page.setInputFiles('#upload-yaml', { name: 'gpu.yaml', mimeType: 'application/yaml', buffer: Buffer.from(GPU_CONFIG) });
  await page.waitForFunction(() => document.querySelector('#draft')?.value.includes('research'));
  await page.click('#tab-form');
  assert.equal(await page.locator('[data-testid=queue]').count(), 2);

  const r = await fetch(server.url + '/api/v1/scheduler/config/versions/1?format=yaml');
  assert.match(await r.text(), /# Berth scheduler config, version 1/);
  await page.goto(server.url + '/config/versions/1');
  await hydrated(page);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=download]')]);
  assert.equal(download.suggestedFilename(), 'berth-config-v1.yaml');
});
