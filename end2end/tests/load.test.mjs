// How fast the dashboard becomes usable, as printed figures (speed is measured, not asserted):
// a cold first visit and warm navigations, over a throttled network (Chromium's DevTools
// protocol, Network.emulateNetworkConditions: 50 Mbit/s down and up, 40 ms latency).
//
// Method. A browser context of its own (no request routing: Playwright's routing turns the
// HTTP cache off). An init script stamps `performance.now()` (milliseconds since the
// navigation started) when the app marks the body hydrated, which the wasm does in an effect
// after hydration; the test then proves the page responds by opening the phone menu, a
// control that only works once hydrated.
// - cold: cache disabled (Network.setCacheDisabled), `/` at 390×844: time to hydrated.
// - cold config: the same for `/config`, the page with the most code (the config editor).
// - warm load: cache on and primed by the cold visit, `/jobs` loaded anew: time to hydrated.
// - warm navigation: in the hydrated app, a click on "Events" in the menu until the events
//   page shows its list (client-side routing and its data request), timed in the page.
// Also checked: the files come precompressed (brotli) under hashed names with long-lived
// cache headers, and ECharts loads only on a page with a chart.
// Figures go to the log and to screenshots/load.json.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { startServer, startBrowser, eventually, SCREENSHOTS, SIZES } from './harness.mjs';

const THROTTLE = { offline: false, latency: 40, downloadThroughput: (50e6 / 8), uploadThroughput: (50e6 / 8) };

let server, chrome;
before(async () => {
  server = await startServer();
  chrome = await startBrowser();
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});

/** A throttled page of its own context; `responses` records each /pkg/ response. */
async function throttledPage(size) {
  const context = await chrome.browser.newContext({ viewport: size });
  const page = await context.newPage();
  page.responses = [];
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.on('response', (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith('/pkg/')) page.responses.push({ path, status: r.status(), headers: r.headers()});
  });
  await page.addInitScript(() => {
    new MutationObserver((_, obs) => {
      if (document.body?.dataset.hydrated === 'true' && !window.__hydratedAt) {
        window.__hydratedAt = performance.now();
        obs.disconnect();
      }
    }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-hydrated'] });
  });
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', THROTTLE);
  return { page, cdp, context };
}

/** Milliseconds from the navigation's start to hydrated. */
async function hydratedAt(page) {
  await page.waitForFunction(() => window.__hydratedAt, null, { timeout: 30_000 });
  return Math.round(await page.evaluate(() => window.__hydratedAt));
}

/** Opens the phone menu, which only a hydrated page can do. */
async function menuResponds(page) {
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Events' }).waitFor({ timeout: 5_000 });
}

test('cold first visit and warm navigation, throttled to 50 Mbit/s and 40 ms', async () => {
  const figures = { network: '50 Mbit/s down and up, 40 ms latency (CDP)', cold: [], cold_config: [], warm_load: [], warm_navigation: [] };
  for (let run = 0; run < 3; run++) {
    const { page, cdp, context } = await throttledPage(SIZES.phone);
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    await page.goto(server.url + '/');
    figures.cold.push(await hydratedAt(page));
    await menuResponds(page);
    if (run === 0) {
      const wasm = page.responses.find((r) => r.path.endsWith('/berth_bg.wasm'));
      assert.ok(wasm, `the wasm was loaded: ${JSON.stringify(page.responses.map((r) => r.path))}`);
      assert.match(wasm.path, /^\/pkg\/app\.[0-9a-f]{16}\/berth_bg\.wasm$/, 'in a content-hashed directory');
      // The overview's page group, and none of the others: a first visit loads one group.
      const groups = [...new Set(page.responses.filter((r) => /\/split_\w+\.wasm$/.test(r.path)).map((r) => r.path.match(/split_([a-z_]+?)_\d+\.wasm$/)[1]))];
      assert.deepEqual(groups, ['queue_pages'], 'only the page group of the page shown');
      assert.equal(wasm.headers['content-encoding'], 'br', 'sent brotli-compressed');
      assert.match(wasm.headers['cache-control'], /immutable/);
      assert.ok(!page.responses.some((r) => r.path.includes('echarts')), 'no ECharts on a page without charts');
    }

    // The config editor, cold too; its on-demand code (the YAML reader, the review) comes only
    // when used, here with the YAML tab.
    const seen = page.responses.length;
    await page.goto(server.url + '/config');
    figures.cold_config.push(await hydratedAt(page));
    if (run === 0) {
      const reader = () => page.responses.slice(seen).some((r) => /\/split_editor_on_demand_\d+\.wasm$/.test(r.path));
      assert.ok(!reader(), 'the first visit of /config does not fetch the editor\'s on-demand code');
      await page.getByRole('tab', { name: 'YAML' }).click();
      await page.waitForFunction(() => document.querySelector('#panel-yaml .cm-content'), null, { timeout: 20_000 });
      await eventually(reader, { what: 'the YAML tab to fetch the YAML reader' });
    }

    // Warm: the cache on, primed by the visits above.
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
    await page.goto(server.url + '/jobs');
    figures.warm_load.push(await hydratedAt(page));
    await menuResponds(page);
    const ms = await page.evaluate(async () => {
      const t0 = performance.now();
      const link = [...document.querySelectorAll('#mainnav a')].find((a) => a.textContent === 'Events');
      link.click();
      for (;;) {
        const list = document.querySelector('[data-testid=events], [data-testid=no-events]');
        if (location.pathname === '/events' && list) return performance.now() - t0;
        await new Promise((r) => requestAnimationFrame(r));
      }
    });
    figures.warm_navigation.push(Math.round(ms));
    assert.deepEqual(page.errors, []);
    await context.close();
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  figures.median_ms = { cold: median(figures.cold), cold_config: median(figures.cold_config), warm_load: median(figures.warm_load), warm_navigation: median(figures.warm_navigation) };
  mkdirSync(SCREENSHOTS, { recursive: true });
  writeFileSync(SCREENSHOTS + 'load.json', JSON.stringify(figures, null, 2) + '\n');
  console.log('# page load (targets: cold ≤ 1500 ms, warm ≤ 300 ms)', JSON.stringify(figures));
});

test('ECharts loads on a page with a chart, and only there', async () => {
  const { page, context } = await throttledPage(SIZES.desktop);
  await page.goto(server.url + '/events');
  await hydratedAt(page);
  assert.ok(!page.responses.some((r) => r.path.includes('echarts')), 'not on the events page');
  await page.getByRole('link', { name: 'Usage' }).click();
  await page.waitForFunction(() => window.echarts && window.echarts.getInstanceByDom(document.querySelector('[data-testid=history-chart]')), null, { timeout: 20_000 });
  const echarts = page.responses.find((r) => r.path.includes('echarts'));
  assert.match(echarts.path, /^\/pkg\/echarts\.min\.[0-9a-f]{16}\.js$/);
  assert.deepEqual(page.errors, []);
  await context.close();
});
