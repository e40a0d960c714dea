// The first dashboard pages: active config, version history, one version with its diff, and
// live validation of the YAML tab running in the browser (wasm) with no request to the server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, startBrowser, hydrated, screenshot, applyConfig, yamlEditor, typeYaml, SIZES, requestsBesideEditor } from './harness.mjs';
import { GPU_CONFIG } from './configs.mjs';

let server, chrome;
before(async () => {
  server = await startServer();
  chrome = await startBrowser();
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});

test('fresh install shows version 1 and the history lists applied versions with local times', async () => {
  const page = await chrome.newPage(SIZES.desktop, { timezoneId: 'Asia/Tokyo' });
  await page.goto(server.url + '/config');
  await hydrated(page);
  assert.match(await page.textContent('[data-testid=active-meta]'), /version 1/);
  await page.click('#tab-yaml');
  assert.match(await page.inputValue('#draft'), /name: default/);

  await applyConfig(server.url, GPU_CONFIG, { message: 'add research queue' });
  await page.goto(server.url + '/config/versions');
  await hydrated(page);
  const rows = page.locator('[data-testid=version-row]');
  assert.equal(await rows.count(), 2);
  const newest = await rows.nth(0).textContent();
  assert.match(newest, /v2/);
  assert.match(newest, /active/);
  assert.match(newest, /anonymous/);
  assert.match(newest, /add research queue/);
  // Stored in UTC, shown in the viewer's zone: Tokyo is UTC+9, so the datetime attribute
  // (UTC) and the shown text differ by nine hours.
  const time = rows.nth(0).locator('time');
  const utc = new Date(await time.getAttribute('datetime'));
  const shown = await time.textContent();
  const tokyo = new Date(utc.getTime() + 9 * 3600_000).toISOString().slice(0, 16).replace('T', ' ');
  assert.ok(shown.startsWith(tokyo), `shown ${shown}, expected Tokyo time ${tokyo}`);

  await rows.nth(0).locator('a').first().click();
  await page.waitForSelector('[data-testid=sbs-diff]');
  assert.match((await page.locator('[data-testid=sbs-diff] td.ins').allTextContents()).join('\n'), /- name: research/);
  assert.match(await page.textContent('[data-testid=changes]'), /research/);
  await screenshot(page, 'version');
  assert.deepEqual(page.outside, []);
  assert.deepEqual(page.errors, []);
});

/**
 * Waits up to 30 s for a problem naming `path`; a timeout says what the page showed instead
 * (which is how the typing race that `typeYaml` avoids was found).
 */
async function problemShown(page, path) {
  try {
    await page.waitForSelector(`text=${path}`, { timeout: 30_000 });
  } catch (e) {
    const seen = await page.evaluate(() => ({
      problems: document.querySelector('[data-testid=problems]')?.textContent,
      summary: document.querySelector('[data-testid=problem-summary]')?.textContent,
      formTab: document.querySelector('#tab-form')?.title,
      editor: document.querySelector('#panel-yaml .cm-content')?.textContent?.slice(0, 300),
      textarea: document.querySelector('#draft')?.value?.slice(0, 300),
    }));
    throw new Error(`no problem at ${path} after 30 s; the page showed ${JSON.stringify(seen)}; page errors: ${JSON.stringify(page.errors)}`, { cause: e });
  }
}

test('the draft is validated live in the browser, without a request', async () => {
  for (const size of [SIZES.desktop, SIZES.phone]) {
    const page = await chrome.newPage(size);
    await page.goto(server.url + '/config');
    await hydrated(page);
    await page.click('#tab-yaml');
    const summary = page.locator('[data-testid=problem-summary]');
    assert.doesNotMatch(await summary.textContent(), /[1-9]\d* errors?/);

    const before = page.requests.length;
    // The code editor (CodeMirror) that replaces the textarea once its script has loaded.
    await yamlEditor(page);
    const broken = GPU_CONFIG.replace('  - resource_queue: default\n', '  - resource_queue: vision\n');
    await typeYaml(page, broken);
    await problemShown(page, 'scheduling_rules[1].resource_queue');
    assert.match(await summary.textContent(), /1 error/);
    // Lines longer than a phone is wide scroll inside the editor; the page does not.
    const [scrollWidth, width] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert.ok(scrollWidth <= width, `the page is ${scrollWidth} px wide in a ${width} px window`);
    await screenshot(page, 'draft-error');

    await typeYaml(page, GPU_CONFIG);
    await page.waitForFunction(() => !document.body.textContent.includes('scheduling_rules[1].resource_queue'));
    assert.doesNotMatch(await summary.textContent(), /[1-9]\d* errors?/);

    await typeYaml(page, 'resource_queues: [oops');
    await page.locator('.problem.error', { hasText: /line \d+, column \d+/ }).first().waitFor();
    const made = requestsBesideEditor(page, before);
    assert.deepEqual(made, [], `requests made while validating: ${made}`);
    assert.deepEqual(page.errors, []);
  }
});
