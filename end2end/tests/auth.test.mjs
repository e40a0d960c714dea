// Signing in, roles in the dashboard, the admin pages and the Content-Security-Policy, against
// a server with authentication on (no anonymous mode).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, startBrowser, hydrated, screenshotBoth, applyConfig, getJson, submitJob, createToken, eventually, ADMIN_TOKEN,
} from './harness.mjs';

// Quota 0: jobs stay pending, so they can always be cancelled.
const CONFIG = `resource_flavors:
  - name: local
resource_queues:
  - name: default
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 0}]}]
scheduling_rules:
  - resource_queue: default
`;

let server, chrome, tokens;
before(async () => {
  server = await startServer({ auth: true });
  chrome = await startBrowser();
  await applyConfig(server.url, CONFIG, { token: ADMIN_TOKEN, message: 'auth test queue' });
  tokens = {
    vic: await createToken(server.url, 'vic', 'viewer'),
    ann: await createToken(server.url, 'ann', 'submitter'),
  };
});
after(async () => {
  await chrome?.browser.close();
  await server?.stop();
});

/** Signs in through the form as a person does; lands on `next`. */
async function signIn(page, token, next = '/') {
  await page.goto(`${server.url}${next}`);
  await page.waitForURL(/\/signin\?next=/);
  // Type only once the page is interactive, so hydration cannot reset the field.
  await hydrated(page);
  await page.fill('#signin-token', token);
  await page.click('button[type=submit]');
  await page.waitForURL(`${server.url}${next}`, { waitUntil: 'commit' });
  await hydrated(page);
  const menu = await page.textContent('[data-testid=user-menu]');
  if (!/Sign out/.test(menu)) {
    throw new Error(`not signed in after the form: menu "${menu}" at ${page.url()}; errors ${JSON.stringify(page.errors)}\n${await page.content()}`);
  }
}

test('a wrong token is refused at the sign-in page, a right one opens the page asked for', async () => {
  const page = await chrome.newPage();
  await page.goto(`${server.url}/jobs`);
  await page.waitForURL(/\/signin\?next=%2Fjobs/);
  await hydrated(page);
  await screenshotBoth(page, 'signin', { fullPage: false });
  await page.fill('#signin-token', 'berth_not_a_real_token');
  await page.click('button[type=submit]');
  await page.waitForSelector('[data-testid=signin-error]');
  assert.match(await page.textContent('[data-testid=signin-error]'), /not valid/);
  await hydrated(page);
  await page.fill('#signin-token', tokens.ann);
  await page.click('button[type=submit]');
  await page.waitForURL(`${server.url}/jobs`, { waitUntil: 'commit' });
  await hydrated(page);
  assert.match(await page.textContent('[data-testid=user-menu]'), /ann\s*submitter/);
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === 'berth_session');
  assert.ok(session && session.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
  assert.deepEqual(page.errors, [], 'no CSP violation or script error');
  // Signing out ends it: the next page asks to sign in again.
  await page.click('.signout button');
  await page.waitForURL(/\/signin/);
  await page.goto(`${server.url}/jobs`);
  await page.waitForURL(/\/signin\?next=/);
});

test('a viewer sees everything and no control it may not use', async () => {
  const job = await submitJob(server.url, { name: 'anns-job', entrypoint: 'true', resources: { cpu: 1 } }, tokens.ann);
  const page = await chrome.newPage();
  await signIn(page, tokens.vic);
  assert.match(await page.textContent('[data-testid=user-menu]'), /vic\s*viewer/);
  assert.equal(await page.locator('a[href="/jobs/new"]').count(), 0, 'no submit button');
  assert.equal(await page.locator('nav.mainnav a[href="/admin/tokens"]').count(), 0, 'no admin link');
  await page.goto(`${server.url}/jobs/${job.id}`);
  await hydrated(page);
  await page.waitForSelector('[data-testid=timeline]');
  assert.equal(await page.locator('[data-testid=cancel]').count(), 0, 'no cancel for a job of someone else');
  await page.goto(`${server.url}/config`);
  await hydrated(page);
  await page.fill('#f-resource_queues-0-name', 'renamed');
  assert.ok(await page.isDisabled('[data-testid=review-apply]'), 'a viewer cannot apply');
  assert.match(await page.getAttribute('[data-testid=review-apply]', 'title'), /editor role/);
  // The server refuses anyway: a server function call made by hand gets the role's refusal.
  const refused = await page.evaluate(async (id) => {
    const r = await fetch('/api/v1/jobs/' + id + '/cancel', { method: 'POST' });
    return [r.status, await r.text()];
  }, job.id);
  assert.equal(refused[0], 403, refused[1]);
  await page.goto(`${server.url}/admin/tokens`);
  await hydrated(page);
  assert.match(await page.textContent('main'), /Admins only/);
  assert.deepEqual(page.errors.filter((e) => !/403/.test(e)), []);
});

test('a submitter cancels its own job from the dashboard (same-origin, so CSRF checks pass)', async () => {
  const job = await submitJob(server.url, { name: 'mine', entrypoint: 'true', resources: { cpu: 1 } }, tokens.ann);
  const page = await chrome.newPage();
  await signIn(page, tokens.ann, `/jobs/${job.id}`);
  // Say what the page showed if the button never comes.
  await page.waitForSelector('[data-testid=cancel]', { timeout: 20_000 }).catch(async (e) => {
    throw new Error(`${e.message}\nat ${page.url()}, errors ${JSON.stringify(page.errors)}:\n${await page.textContent('body')}`);
  });
  await page.click('[data-testid=cancel]');
  await page.click('[data-testid=confirm-cancel]');
  await eventually(async () => (await getJson(server.url, `/api/v1/jobs/${job.id}`, ADMIN_TOKEN)).state === 'cancelled', { what: 'cancelled' });
  assert.equal((await getJson(server.url, `/api/v1/jobs/${job.id}`, ADMIN_TOKEN)).reason, 'cancelled by ann');
  assert.deepEqual(page.errors, []);
});

test('an admin creates a token (shown once), revokes it, and finds both in the audit log', async () => {
  const page = await chrome.newPage();
  await signIn(page, ADMIN_TOKEN, '/admin/tokens');
  await page.fill('#t-user', 'zoe');
  await page.selectOption('#t-role', 'editor');
  await page.fill('#t-label', 'from the dashboard');
  await page.click('[data-testid=create-token]');
  const secret = (await (await page.waitForSelector('[data-testid=secret]')).textContent()).trim();
  assert.match(secret, /^sss_berth_[0-9a-f]{64}$/);
  const me = await getJson(server.url, '/api/v1/whoami', secret);
  assert.deepEqual([me.user, me.role], ['zoe', 'editor']);
  const row = page.locator('[data-testid=token]', { hasText: 'zoe' });
  await row.waitFor();
  await screenshotBoth(page, 'tokens', { fullPage: false });
  await row.locator('[data-testid=revoke]').click();
  await row.locator('[data-testid=confirm-revoke]').click();
  await page.waitForSelector('[data-testid=token][data-revoked=true] >> text=zoe');
  const r = await fetch(`${server.url}/api/v1/whoami`, { headers: { authorization: `Bearer ${secret}` } });
  assert.equal(r.status, 401, 'revoked at once');
  await page.goto(`${server.url}/admin/audit`);
  await hydrated(page);
  await page.waitForSelector('[data-testid=audit-entry]');
  const actions = await page.$$eval('[data-testid=audit-entry]', (rows) => rows.map((r) => r.dataset.action));
  assert.deepEqual(actions.slice(0, 3), ['token.revoke', 'token.create', 'session.signin'], actions.join(','));
  await screenshotBoth(page, 'audit', { fullPage: false });
  assert.deepEqual(page.errors, []);
});
