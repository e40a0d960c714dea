// Navigation and feedback: the phone menu reaches every destination; after Apply the
// confirmation is in view; the review dialog opens at its change summary; the history's
// From and To columns are labelled; the YAML tab is a code editor with line numbers that
// marks a problem at its line and stays in step with the form, loaded on the config page only.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, startBrowser, hydrated, screenshot, screenshotBoth, applyConfig, yamlEditor, typeYaml, SIZES } from './harness.mjs';
import { GPU_CONFIG } from './configs.mjs';

let chrome, server, page;
before(async () => {
  chrome = await startBrowser();
  server = await startServer();
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});
afterEach(async () => {
  assert.deepEqual(page.outside, [], 'requests left 127.0.0.1');
  assert.deepEqual(page.errors, [], 'console or page errors');
  await page.context().close();
});

/** Whether `locator`'s box lies inside the viewport, as a person would see it. */
async function inView(locator) {
  return locator.evaluate((el) => {
    const r = el.getBoundingClientRect();
    return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0 && r.right <= window.innerWidth;
  });
}

test('on a phone, the menu reaches every destination of the top bar', async () => {
  page = await chrome.newPage(SIZES.phone);
  await page.goto(server.url + '/');
  await hydrated(page);
  const nav = page.getByRole('navigation', { name: 'Main' });
  const destinations = [['Jobs', '/jobs'], ['Events', '/events'], ['Usage', '/history'], ['Config', '/config'], ['Admin', '/admin/tokens'], ['Overview', '/']];
  assert.equal(await nav.getByRole('link', { name: 'Config' }).isVisible(), false, 'folded away until asked for');
  for (const [name, path] of destinations) {
    await page.getByRole('button', { name: 'Menu' }).click();
    const link = nav.getByRole('link', { name, exact: true });
    await link.waitFor();
    assert.ok(await inView(link), `${name} is on screen in the open menu`);
    if (name === 'Jobs') await screenshot(page, 'menu-open', { fullPage: false });
    await link.click();
    await page.waitForURL((u) => u.pathname === path);
    await link.waitFor({ state: 'hidden' });
  }
  // On a laptop the links are in the bar and there is no menu button.
  await page.setViewportSize(SIZES.desktop);
  assert.ok(await nav.getByRole('link', { name: 'Admin' }).isVisible());
  assert.equal(await page.getByRole('button', { name: 'Menu' }).isVisible(), false);
});

test('after Apply, "Applied as version N" shows next to the button, wherever the page was scrolled', async () => {
  for (const size of [SIZES.desktop, SIZES.phone]) {
    await applyConfig(server.url, GPU_CONFIG, { message: 'research queue' });
    page = await chrome.newPage(size);
    await page.goto(server.url + '/config');
    await hydrated(page);
    // A change far down the form, scrolled down to it.
    const quota = page.locator('#f-resource_queues-1-resource_groups-0-flavors-0-quota-gpu');
    await quota.scrollIntoViewIfNeeded();
    await quota.fill(size === SIZES.phone ? '32' : '48');
    await page.getByRole('button', { name: 'Review & apply' }).click();
    await page.getByRole('dialog').getByRole('button', { name: /^Apply as version/ }).click();
    const notice = page.getByRole('status').filter({ hasText: /Applied as version \d+/ });
    await notice.waitFor();
    assert.ok(await inView(notice), `the confirmation is on screen at ${size.width}px`);
    assert.ok(await inView(page.getByRole('button', { name: 'Review & apply' })), 'next to the button');
    await screenshot(page, 'applied-in-view', { fullPage: false });
    await page.context().close();
  }
  page = await chrome.newPage();
});

test('the review dialog opens at its change summary', async () => {
  page = await chrome.newPage(SIZES.desktop);
  await page.goto(server.url + '/config');
  await hydrated(page);
  await page.fill('#f-resource_queues-1-resource_groups-0-flavors-0-quota-gpu', '24');
  await page.getByRole('button', { name: 'Review & apply' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByText('What changes against the active version').waitFor();
  const changes = dialog.locator('[data-testid=changes]');
  await changes.waitFor();
  assert.ok(await inView(dialog.getByRole('heading', { name: /Apply the draft as version/ })), 'the title is on screen');
  assert.ok(await changes.evaluate((el) => {
    const body = el.closest('.modal-body').getBoundingClientRect();
    const r = el.getBoundingClientRect();
    return r.top >= body.top && r.top < body.bottom;
  }), 'the change summary is on screen, not scrolled past');
  assert.match(await changes.innerText(), /24/);
  await screenshotBoth(page, 'review-open', { fullPage: false });
});

test('the history labels its From and To columns', async () => {
  await applyConfig(server.url, GPU_CONFIG.replace('nominal_quota: 64', 'nominal_quota: 16'), { message: 'fewer GPUs' });
  page = await chrome.newPage(SIZES.desktop);
  await page.goto(server.url + '/config/versions');
  await hydrated(page);
  // (The header row is in small capitals: compared without case.)
  const headers = await page.getByRole('columnheader').allInnerTexts();
  assert.deepEqual(headers.slice(0, 2).map((h) => h.toLowerCase()), ['from', 'to']);
  assert.ok(await page.getByRole('radio', { name: 'Compare from version 1' }).isVisible());
  assert.ok(await page.getByRole('radio', { name: 'Compare to version 2' }).isVisible());
  await screenshotBoth(page, 'history-from-to');
  // On a phone the rows are cards without the header: each picker says which it is.
  await page.setViewportSize(SIZES.phone);
  const row = page.locator('[data-testid=version-row]').first();
  assert.match(await row.innerText(), /from[\s\S]*to/);
});

test('the YAML tab is a code editor: line numbers, the problem marked at its line, in step with the form', async () => {
  page = await chrome.newPage(SIZES.desktop);
  await page.goto(server.url + '/jobs');
  await hydrated(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Config' }).click();
  await page.waitForURL((u) => u.pathname === '/config');
  await page.getByRole('tab', { name: 'YAML' }).click();
  // The textarea until the editor's script has loaded, then the code editor in its place.
  const editor = await yamlEditor(page);
  assert.ok(page.requests.some((r) => /^\/pkg\/yaml-editor\.[0-9a-f]{16}\.js$/.test(r)), 'the editor is loaded here');

  // Line numbers, one per line of the draft.
  const gutter = page.locator('.cm-lineNumbers');
  const lines = await editor.locator('.cm-line').count();
  assert.ok(lines > 5, `the draft has lines: ${lines}`);
  const numbers = (await gutter.innerText()).split('\n').map((s) => s.trim()).filter(Boolean);
  assert.ok(numbers.includes('1') && numbers.includes(String(lines)), `line numbers 1..${lines}: ${numbers}`);

  // A negative quota: an error in the summary, and marked on the line that has it.
  const text = GPU_CONFIG.replace('nominal_quota: 64', 'nominal_quota: -1');
  await typeYaml(page, text);
  await page.getByTestId('problem-summary').getByText('1 error').waitFor();
  // The mark is on the quota line, and on no other.
  const marked = page.locator('.cm-lintRange-error');
  await page.locator('.cm-line', { hasText: 'nominal_quota: -1' }).locator('.cm-lintRange-error').waitFor();
  const markedLines = await marked.evaluateAll((els) => els.map((el) => el.closest('.cm-line').textContent));
  assert.ok(markedLines.length > 0 && markedLines.every((l) => /nominal_quota: -1/.test(l)), `marked lines: ${markedLines}`);
  await marked.first().hover();
  const tip = page.locator('.cm-tooltip');
  await tip.waitFor();
  const message = (await tip.innerText()).trim();
  const listed = await page.getByTestId('problems').innerText();
  assert.ok(message.length > 0 && listed.includes(message), `the tooltip says what the problem list says: ${message}`);
  await screenshotBoth(page, 'yaml-editor-error', { fullPage: false });

  // A syntax error is marked at its own line.
  await typeYaml(page, 'resource_queues:\n  - name: a\n  - [oops');
  await page.locator('.problem.error', { hasText: /line \d+, column \d+/ }).first().waitFor();
  await page.locator('.cm-lint-marker-error').first().waitFor();

  // In step with the form: fix it here, see it there; change it there, see it here.
  await typeYaml(page, GPU_CONFIG.replace('nominal_quota: 64', 'nominal_quota: 12'));
  await page.getByTestId('problem-summary').getByText(/No (problems|errors)/).waitFor();
  await page.getByRole('tab', { name: 'Form' }).click();
  const quota = page.locator('#f-resource_queues-1-resource_groups-0-flavors-0-quota-gpu');
  assert.equal(await quota.inputValue(), '12');
  await quota.fill('20');
  await page.getByRole('tab', { name: 'YAML' }).click();
  await page.waitForFunction(() => /nominal_quota: 20/.test(document.querySelector('.cm-content')?.innerText || ''));
  assert.deepEqual(page.errors, []);
});

test('the YAML editor is not loaded on other pages', async () => {
  page = await chrome.newPage(SIZES.desktop);
  for (const path of ['/', '/jobs', '/events', '/config/versions']) {
    await page.goto(server.url + path);
    await hydrated(page);
  }
  assert.deepEqual(page.requests.filter((r) => r.includes('yaml-editor')), []);
});
