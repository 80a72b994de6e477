// The mnemo viewer in a real browser: Debian's chromium, driven by playwright-core, against real
// `mnemo serve` processes on loopback. Run by tests/viewer.sh, which builds the binary, makes the
// tampered store and sets:
//   MNEMO_BIN              the mnemo binary
//   MNEMO_VIEWER_TAMPERED  a store whose event 2 was changed below the API (closed)
//   MNEMO_SCREENSHOTS      where each page's screenshot goes
//   CHROMIUM               the browser (default /usr/bin/chromium)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const BIN = process.env.MNEMO_BIN;
const TAMPERED = process.env.MNEMO_VIEWER_TAMPERED;
const SHOTS = process.env.MNEMO_SCREENSHOTS || 'target/viewer-screenshots';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
assert.ok(BIN, 'MNEMO_BIN names the mnemo binary');

// What a memory file and an agent name hold: markup, script URLs, bidi and zero-width
// characters. Each payload that ran would set window.__pwned.
const HOSTILE_TEXT = [
  '<script>window.__pwned = "script"</script>',
  '<img src=x onerror="window.__pwned = \'img\'">',
  '[click me](javascript:window.__pwned=\'md-link\')',
  '<a href="javascript:window.__pwned=\'a\'">link</a>',
  'bidi \u202Egnp.exe\u202C and zero\u200Bwidth\u2066isolate\u2069',
  '',
].join('\n');
const HOSTILE_AGENT = '<img src=x onerror="window.__pwned=\'agent\'">\u202Eevil\u200B';
const HOSTILE_PATH = '/memories/<img src=x onerror=window.__pwned=1>.md';

const servers = [];
let browser;
let work;
let main; // { dir, url, token }

function serverFile(dir) {
  return JSON.parse(readFileSync(join(dir, 'mnemo-server.json'), 'utf8'));
}

async function serve(args, dir) {
  const child = spawn(BIN, ['serve', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  servers.push(child);
  for (let i = 0; i < 300; i++) {
    if (existsSync(join(dir, 'mnemo-server.json'))) {
      const file = serverFile(dir);
      if (file.pid === child.pid) return { dir, url: file.url, token: file.token, child, stderr: () => stderr };
    }
    if (child.exitCode !== null) throw new Error('mnemo serve exited: ' + stderr);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no server file');
}

function tool(dir, agent, calls) {
  const input = calls.map((c) => JSON.stringify(c)).join('\n') + '\n';
  const out = execFileSync(BIN, ['tool', '--db', dir, '--agent', agent], { input, encoding: 'utf8' });
  return out.trim().split('\n').map((l) => JSON.parse(l));
}

function uiLink(args) {
  return execFileSync(BIN, ['ui', ...args], { encoding: 'utf8' }).trim();
}

async function head(server) {
  const r = await fetch(server.url + '/v1/head', { headers: { Authorization: 'Bearer ' + server.token } });
  return (await r.json()).seq;
}

async function shot(page, name) {
  await page.screenshot({ path: join(SHOTS, name + '.png'), fullPage: true });
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  work = mkdtempSync(join(tmpdir(), 'mnemo-viewer-'));
  const dir = join(work, 'store.mnemo.db');
  main = await serve(['--db', dir], dir);
  // Written through `mnemo tool`, which finds the running server.
  tool(dir, 'planner', [
    { command: 'create', path: '/memories/notes.md', file_text: '# Notes\n- tea\n' },
    { command: 'str_replace', path: '/memories/notes.md', old_str: 'tea', new_str: 'green tea' },
    { command: 'view', path: '/memories' },
  ]);
  tool(dir, HOSTILE_AGENT, [
    { command: 'create', path: HOSTILE_PATH, file_text: HOSTILE_TEXT },
    { command: 'view', path: '/memories/missing.md' },
  ]);
  tool(dir, 'planner', [
    { command: 'rename', old_path: '/memories/notes.md', new_path: '/memories/done/notes.md' },
    { command: 'insert', path: '/memories/done/notes.md', insert_line: 1, insert_text: '- Lisbon\n' },
  ]);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], timeout: 30000 });
});

after(async () => {
  if (browser) await browser.close();
  for (const child of servers) child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  if (work) rmSync(work, { recursive: true, force: true });
});

// A browser context of its own (cookies and all), whose waits give up after 10 s.
async function fresh() {
  const context = await browser.newContext();
  context.setDefaultTimeout(10000);
  return context;
}

async function loggedIn(server, args) {
  const context = await fresh();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(uiLink(args));
  return { context, page, errors };
}

test('a login link logs in once; the used link is refused', async () => {
  const link = uiLink(['--db', main.dir]);
  assert.match(link, /^http:\/\/127\.0\.0\.1:\d+\/ui\/#login=[0-9a-f]{64}$/);
  const one = await fresh();
  const page = await one.newPage();
  await page.goto(link);
  await page.waitForSelector('#timeline');
  assert.ok(!page.url().includes('login='), 'the secret is off the address bar: ' + page.url());
  assert.doesNotMatch(await page.textContent('#app'), /\bnull\b|\bundefined\b/, 'no missing value is printed');
  await shot(page, 'timeline');
  const two = await fresh();
  const again = await two.newPage();
  await again.goto(link);
  await again.waitForSelector('#login-form');
  assert.match(await again.textContent('#login-error'), /used, expired/);
  assert.ok(!main.stderr().includes(link.split('login=')[1]), 'the secret is in no server log');
  await one.close();
  await two.close();
});

test('the token form: a wrong token is refused, the operator token logs in', async () => {
  const context = await fresh();
  const page = await context.newPage();
  await page.goto(main.url + '/ui/');
  await page.waitForSelector('#login-form');
  await shot(page, 'login');
  await page.fill('#token', 'not-the-token');
  await page.click('#login-form button');
  await page.waitForFunction(() => document.querySelector('#login-error').textContent.length > 0);
  assert.match(await page.textContent('#login-error'), /not one this server/);
  await page.fill('#token', main.token);
  await page.click('#login-form button');
  await page.waitForSelector('#timeline');
  const cookies = await context.cookies();
  assert.equal(cookies.length, 1);
  assert.equal(cookies[0].httpOnly, true);
  assert.equal(cookies[0].sameSite, 'Strict');
  assert.equal(await page.evaluate(() => document.cookie), '', 'the cookie is out of the page\'s reach');
  await context.close();
});

test('timeline → event → file history → tree at a seq → verify', async () => {
  const { context, page, errors } = await loggedIn(main, ['--db', main.dir]);
  await page.waitForSelector('#timeline');
  assert.equal(await page.textContent('#head'), 'head seq 7');
  // Filter by agent.
  await page.fill('#filters input[name=agent]', 'planner');
  await page.click('#filters button');
  await page.waitForFunction(() => location.hash.includes('agent=planner'));
  // The filtered page (the unfiltered one it replaces has no #searched line).
  await page.waitForFunction(() => document.querySelector('#searched') && document.querySelector('#timeline'));
  const agents = await page.$$eval('#timeline tbody tr td:nth-child(3)', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual([...new Set(agents)], ['planner']);
  // By command and result, read newest first by the server.
  await page.goto(main.url + '/ui/#/timeline?command=create&error=no');
  await page.waitForFunction(() => document.querySelector('#filters input[name=command]')?.value === 'create' && document.querySelector('#searched'));
  const created = await page.$$eval('#timeline tbody tr', (trs) => trs.map((tr) => [tr.children[0].textContent, tr.children[3].textContent, tr.children[5].textContent]));
  assert.ok(created.length > 0);
  assert.deepEqual([...new Set(created.map((r) => r[1] + ' ' + r[2]))], ['create ok']);
  const order = created.map((r) => Number(r[0]));
  assert.deepEqual(order, order.slice().sort((a, b) => b - a), 'newest first');
  // By time: nothing was recorded from tomorrow on.
  await page.goto(main.url + '/ui/#/timeline?since=' + new Date(Date.now() + 86400000).toISOString().slice(0, 16));
  await page.waitForSelector('text=No events here.');
  await page.goto(main.url + '/ui/#/timeline?agent=planner');
  await page.waitForFunction(() => document.querySelector('#filters input[name=agent]')?.value === 'planner' && document.querySelector('#timeline'));
  // One event: the edit of notes.md.
  await page.click('#timeline a[href="#/event?seq=2"]');
  await page.waitForSelector('#verified');
  assert.equal(await page.textContent('#verified'), '✓ re-derived and checked');
  assert.match(await page.textContent('#event-input'), /"new_str": "green tea"/);
  assert.match(await page.textContent('#event-answer'), /has been edited/);
  assert.match(await page.textContent('main'), /\+- green tea/);
  assert.match(await page.textContent('#same-file'), /previous \(1\)/);
  const headings = await page.$$eval('main h2', (hs) => hs.map((h) => h.textContent));
  assert.deepEqual(headings.slice(0, 2), ['The call as sent', 'The answer the model saw']);
  assert.ok((await page.$$eval('main dd a', (as) => as.map((a) => a.getAttribute('href'))))
    .includes('#/file?path=%2Fmemories%2Fnotes.md'), 'its path links to the file\'s history');
  await shot(page, 'event');
  // The file's history, through the rename.
  await page.click('#same-file a[href^="#/file"]');
  await page.waitForSelector('#history');
  const seqs = await page.$$eval('#history tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(seqs, ['1', '2', '6', '7']);
  await page.click('#history tbody tr:nth-child(2) summary');
  await page.waitForSelector('#history tbody tr:nth-child(2) details pre');
  await shot(page, 'file');
  // The tree after seq 2: notes.md where it was, before the rename.
  await page.goto(main.url + '/ui/#/tree?at=2');
  await page.waitForSelector('#tree');
  const files = await page.$$eval('#tree tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(files, ['/memories/notes.md']);
  await page.click('#tree summary');
  await page.waitForSelector('#tree details pre');
  assert.equal(await page.textContent('#tree details pre'), '# Notes\n- green tea\n');
  await shot(page, 'tree');
  // Verify.
  await page.click('#nav a[href="#/verify"]');
  await page.click('#run-verify');
  await page.waitForSelector('#verify-status');
  assert.equal(await page.textContent('#verify-status'), 'INTACT');
  assert.match(await page.textContent('#verify-checkpoint'), /^7:[0-9a-f]{64}$/);
  await shot(page, 'verify');
  assert.deepEqual(errors, []);
  await context.close();
});

test('hostile memory text and agent names show as written, and nothing runs', async () => {
  const { context, page, errors } = await loggedIn(main, ['--db', main.dir]);
  await page.waitForSelector('#timeline');
  await page.goto(main.url + '/ui/#/event?seq=4');
  await page.waitForSelector('#verified');
  assert.equal(await page.textContent('#event-agent bdi'), HOSTILE_AGENT);
  assert.match(await page.textContent('#event-agent'), /hidden or reordering characters/);
  assert.ok((await page.textContent('#event-input')).includes('window.__pwned = \\"script\\"'));
  await shot(page, 'hostile-event');
  await page.goto(main.url + '/ui/#/tree');
  await page.waitForSelector('#tree');
  const paths = await page.$$eval('#tree tbody tr td:first-child .text', (n) => n.map((x) => x.textContent));
  assert.ok(paths.includes(HOSTILE_PATH), JSON.stringify(paths));
  const row = page.locator('#tree tbody tr', { hasText: 'onerror' });
  await row.locator('summary').click();
  await row.locator('details pre').waitFor();
  assert.equal(await row.locator('details pre').textContent(), HOSTILE_TEXT);
  await page.goto(main.url + '/ui/#/timeline');
  await page.waitForSelector('#timeline');
  await page.waitForTimeout(300);
  await shot(page, 'hostile-timeline');
  const state = await page.evaluate(() => ({
    pwned: window.__pwned,
    images: document.images.length,
    scripts: [...document.scripts].map((s) => s.src),
    scriptLinks: [...document.querySelectorAll('a')].filter((a) => !a.getAttribute('href').startsWith('#/')).length,
  }));
  assert.deepEqual(state, { pwned: undefined, images: 0, scripts: [main.url + '/ui/app.js'], scriptLinks: 0 });
  assert.deepEqual(errors, []);
  await context.close();
});

test('a cross-site POST is refused and writes nothing', async () => {
  const { context, page } = await loggedIn(main, ['--db', main.dir]);
  await page.waitForSelector('#timeline');
  const grant = JSON.stringify({ action: 'grant', agent: 'mallory', prefix: '/memories', access: 'read-write' });
  // Another site on the same host (cookies ignore ports, so the browser sends the session's).
  const evil = createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<!doctype html><form id=f method=POST action="${main.url}/v1/acl" enctype="text/plain">
<input name='${grant.slice(0, -2)}' value='"}'></form>
<script>
fetch(${JSON.stringify(main.url + '/v1/acl')}, {method: 'POST', mode: 'no-cors', credentials: 'include', body: ${JSON.stringify(grant)}})
  .finally(() => document.getElementById('f').submit());
</script>`);
  });
  await new Promise((r) => evil.listen(0, '127.0.0.1', r));
  const before = await head(main);
  await page.goto(`http://127.0.0.1:${evil.address().port}/`);
  await page.waitForURL(/\/v1\/acl$/);
  assert.match(await page.textContent('body'), /another site|X-Mnemo-CSRF/);
  assert.equal(await head(main), before, 'nothing written');
  evil.close();
  await context.close();
});

test('verify on a tampered copy names the first bad seq', async () => {
  assert.ok(TAMPERED && existsSync(TAMPERED), 'MNEMO_VIEWER_TAMPERED names the tampered store');
  const tampered = await serve(['--db', TAMPERED], TAMPERED);
  const { context, page } = await loggedIn(tampered, ['--db', TAMPERED]);
  // The timeline reads the log, which no longer proves event 2: it says so and shows none of it.
  await page.waitForSelector('#app .error');
  assert.match(await page.textContent('#app .error'), /event 2 is not the event the log's chain recorded/);
  assert.equal(await page.$('#timeline'), null);
  await page.click('#nav a[href="#/verify"]');
  await page.click('#run-verify');
  await page.waitForSelector('#verify-status');
  assert.equal(await page.textContent('#verify-status'), 'BROKEN');
  assert.equal(await page.textContent('#verify-bad-seq'), '2');
  await shot(page, 'verify-tampered');
  await context.close();
});

test('a --data server lists its stores and opens one', async () => {
  const dir = join(work, 'data');
  const data = await serve(['--data', dir], dir);
  for (const name of ['alpha', 'beta']) {
    const r = await fetch(data.url + '/v1/stores', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + data.token, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name }),
    });
    assert.equal(r.status, 201);
  }
  // Two events in beta, then a verify of it by the API.
  const auth = { Authorization: 'Bearer ' + data.token, 'Content-Type': 'application/json' };
  for (const call of [{ command: 'create', path: '/memories/b.md', file_text: 'b\n' }, { command: 'view', path: '/memories/b.md' }]) {
    const r = await fetch(data.url + '/v1/stores/beta/memory', { method: 'POST', headers: auth, body: JSON.stringify(call) });
    assert.equal(r.status, 200, await r.text());
  }
  const verified = await fetch(data.url + '/v1/stores/beta/verify', { headers: auth });
  assert.equal(verified.status, 200);
  const { context, page } = await loggedIn(data, ['--data', dir]);
  await page.waitForSelector('#stores');
  const rows = await page.$$eval('#stores tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  assert.deepEqual(rows.map((r) => r[0]), ['alpha', 'beta']);
  const beta = rows[1];
  assert.equal(beta[2], '2', 'beta\'s head seq');
  assert.match(beta[3], /^\d{4}-\d\d-\d\dT/, 'beta\'s last write');
  assert.match(beta[4], /^[\d.]+ [KM]?B$/, 'beta\'s size');
  assert.match(beta[5], /^INTACT to seq 2, /);
  assert.equal(rows[0][5], 'not verified since the server started');
  await shot(page, 'stores');
  await page.click('#stores a >> text=alpha');
  await page.waitForSelector('text=No events here.');
  await context.close();

  // An agent token of beta logs in with its store, and sees beta's files and nothing else.
  const issued = await fetch(data.url + '/v1/stores/beta/tokens', { method: 'POST', headers: auth, body: JSON.stringify({ agent: 'reader', label: 'viewer' }) });
  assert.equal(issued.status, 200);
  const agentToken = (await issued.json()).token;
  const agent = await fresh();
  const agentPage = await agent.newPage();
  await agentPage.goto(data.url + '/ui/');
  await agentPage.waitForSelector('#login-form');
  await agentPage.fill('#token', agentToken);
  await agentPage.fill('#login-store', 'alpha');
  await agentPage.click('#login-form button');
  await agentPage.waitForFunction(() => document.querySelector('#login-error').textContent.length > 0);
  await agentPage.fill('#token', agentToken);
  await agentPage.fill('#login-store', 'beta');
  await agentPage.click('#login-form button');
  await agentPage.waitForSelector('#files');
  const paths = await agentPage.$$eval('#files tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(paths, ['/memories/b.md']);
  const links = await agentPage.$$eval('#nav a', (as) => as.map((a) => a.textContent));
  assert.deepEqual(links, ['Files'], 'no operator page');
  await shot(agentPage, 'agent-files');
  await agent.close();
});

test('a store made through the memory-stores API shows its name and description', async () => {
  const dir = join(work, 'data-labels');
  const data = await serve(['--data', dir], dir);
  const auth = { Authorization: 'Bearer ' + data.token, 'Content-Type': 'application/json' };
  const made = await fetch(data.url + '/v1/memory_stores', {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 'Team notes', description: 'What the team keeps <b>bold</b>' }),
  });
  const answer = await made.text();
  assert.equal(made.status, 200, answer);
  const id = JSON.parse(answer).id;
  const plain = await fetch(data.url + '/v1/stores', { method: 'POST', headers: auth, body: JSON.stringify({ name: 'plain' }) });
  assert.equal(plain.status, 201);
  const { context, page, errors } = await loggedIn(data, ['--data', dir]);
  await page.waitForSelector('#stores');
  const rows = await page.$$eval('#stores tbody tr td:first-child', (tds) => tds.map((td) => ({
    link: td.querySelector('a').textContent,
    description: td.querySelector('.store-description')?.textContent ?? null,
    all: td.textContent,
  })));
  const labelled = rows.find((r) => r.link === 'Team notes');
  assert.ok(labelled, JSON.stringify(rows));
  assert.equal(labelled.description, 'What the team keeps <b>bold</b>', 'shown as written');
  assert.ok(labelled.all.includes(id.replace(/^memstore_/, '')), 'beside its directory name: ' + labelled.all);
  assert.deepEqual(rows.find((r) => r.link === 'plain'), { link: 'plain', description: null, all: 'plain' });
  await shot(page, 'stores-labelled');
  await page.click('#stores a >> text=Team notes');
  // Its label is chained: the store's one event records it.
  await page.waitForSelector('#timeline');
  assert.match(await page.textContent('#timeline tbody'), /store-label/);
  assert.deepEqual(errors, []);
  await context.close();
});

test('the newest page of the timeline follows the head', async () => {
  const { context, page } = await loggedIn(main, ['--db', main.dir]);
  await page.waitForSelector('#timeline');
  const before = await head(main);
  assert.equal(await page.textContent('#head'), 'head seq ' + before);
  tool(main.dir, 'later', [{ command: 'create', path: '/memories/later.md', file_text: 'new\n' }]);
  await page.waitForFunction((seq) => document.querySelector('#head')?.textContent === 'head seq ' + seq, before + 1);
  assert.match(await page.textContent('#timeline tbody tr:first-child'), /later/);
  await context.close();
});

// ---- the operator's pages: access, redactions, verify's progress and replication ----

const SECRET = 'QZVVIEWERSECRETVZQ';

// A store of its own, so the redaction changes no event the tests above count.
let pages; // { dir, url, token, ... }
async function pagesServer() {
  if (pages) return pages;
  const dir = join(work, 'pages.mnemo.db');
  pages = await serve(['--db', dir], dir);
  tool(dir, 'planner', [
    { command: 'create', path: '/memories/secret.md', file_text: 'pin ' + SECRET + '\n' },
    { command: 'view', path: '/memories/secret.md' },
    { command: 'create', path: '/memories/keep.md', file_text: 'keep\n' },
  ]);
  return pages;
}

async function asAgent(server, secret, input) {
  return fetch(server.url + '/v1/memory', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + secret, 'Content-Type': 'application/json' },
    body: JSON.stringify(input),
  });
}

test('the access page issues a token shown once, grants, and revokes only after confirming', async () => {
  const server = await pagesServer();
  const { context, page, errors } = await loggedIn(server, ['--db', server.dir]);
  await page.waitForSelector('#timeline');
  await page.click('#nav a[href="#/access"]');
  await page.waitForSelector('#issue-form');
  await page.fill('#issue-form input[name=agent]', 'reviewer');
  await page.fill('#issue-form input[name=label]', 'browser test');
  await page.click('#issue-token');
  assert.equal(await page.textContent('#issue-token-confirm'), 'Confirm issue of a token for agent reviewer');
  await page.click('#issue-token-confirm');
  await page.waitForSelector('#issued-token');
  const secret = await page.textContent('#issued-token');
  assert.match(secret, /^mnemo_[0-9a-f]{16}_/);
  assert.match(await page.textContent('#issued-note'), /Copy it now: it is not shown again/);
  const row = page.locator('#tokens tbody tr', { hasText: 'reviewer' });
  await row.waitFor();
  const id = await row.locator('td').first().textContent();
  assert.ok(secret.startsWith('mnemo_' + id + '_'), secret + ' is token ' + id);
  assert.ok(!(await page.textContent('#tokens')).includes(secret), 'the list holds no secret');
  await shot(page, 'access');

  // The token works, as its agent.
  const used = await asAgent(server, secret, { command: 'view', path: '/memories' });
  assert.equal(used.status, 200, await used.text());
  const log = await fetch(server.url + '/v1/log?agent=reviewer', { headers: { Authorization: 'Bearer ' + server.token } });
  assert.equal((await log.text()).trim().split('\n').length, 1, 'one call logged under reviewer');

  // A grant, behind its confirmation, then revoked behind its own.
  await page.fill('#grant-form input[name=agent]', 'reviewer');
  await page.fill('#grant-form input[name=prefix]', '/memories/reviews');
  await page.selectOption('#grant-form select[name=access]', 'read-write');
  await page.click('#grant');
  assert.equal(await page.textContent('#grant-confirm'), 'Confirm grant of read-write on /memories/reviews to agent reviewer');
  await page.click('#grant-confirm');
  const grant = page.locator('#grants tbody tr', { hasText: 'reviewer' });
  await grant.waitFor();
  assert.match(await page.textContent('#access-result'), /Granted read-write on \/memories\/reviews to agent reviewer/);
  assert.deepEqual(await grant.locator('td').allTextContents(), ['reviewer', '/memories/reviews', 'read-write', 'Revoke']);
  await grant.locator('button').click();
  assert.equal(await grant.locator('button.danger').textContent(), 'Confirm revoke of read-write on /memories/reviews from agent reviewer');
  await grant.locator('button.danger').click();
  await grant.waitFor({ state: 'detached' });
  assert.match(await page.textContent('#access-result'), /reviewer/);

  // Revoking asks first; until confirmed the token still works.
  await page.click('#token-revoke-' + id);
  assert.equal(await page.textContent('#token-revoke-' + id + '-confirm'), 'Confirm revoke of token ' + id + ' for agent reviewer');
  assert.equal((await asAgent(server, secret, { command: 'view', path: '/memories' })).status, 200);
  await page.click('#token-revoke-' + id + '-confirm');
  await row.locator('text=revoked at').waitFor();
  assert.match(await page.textContent('#access-result'), new RegExp('Revoked token ' + id + ' of agent reviewer'));
  await shot(page, 'access-revoked');
  const refused = await asAgent(server, secret, { command: 'view', path: '/memories' });
  assert.equal(refused.status, 401, await refused.text());
  // Leaving the page and coming back: the secret is not shown again.
  await page.click('#nav a[href="#/timeline"]');
  await page.waitForSelector('#timeline');
  await page.click('#nav a[href="#/access"]');
  await page.waitForSelector('#tokens');
  assert.ok(!(await page.textContent('main')).includes(secret));
  assert.deepEqual(errors, []);
  await context.close();
});

test('an agent session sees no Access link, and the page says it is the operator\'s', async () => {
  const server = await pagesServer();
  const r = await fetch(server.url + '/v1/tokens', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + server.token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ agent: 'auditor', label: 'viewer' }),
  });
  assert.equal(r.status, 200);
  const { token } = await r.json();
  const context = await fresh();
  const page = await context.newPage();
  await page.goto(server.url + '/ui/');
  await page.fill('#token', token);
  await page.click('#login-form button');
  await page.waitForSelector('#logout');
  assert.match(await page.textContent('#who'), /agent auditor/);
  const nav = await page.$$eval('#nav a', (links) => links.map((a) => a.getAttribute('href')));
  assert.ok(nav.length > 0 && !nav.includes('#/access') && !nav.includes('#/redact'), JSON.stringify(nav));
  await page.goto(server.url + '/ui/#/access');
  await page.waitForSelector('#operator-only');
  assert.match(await page.textContent('#operator-only'), /for the operator/);
  await shot(page, 'access-agent');
  await page.goto(server.url + '/ui/#/redact');
  await page.waitForSelector('#operator-only');
  await context.close();
});

test('a redaction runs dry first, then for real; the event says so and the log verifies with progress', async () => {
  const server = await pagesServer();
  const { context, page, errors } = await loggedIn(server, ['--db', server.dir]);
  await page.waitForSelector('#timeline');
  await page.click('#nav a[href="#/redact"]');
  await page.waitForSelector('#redact-form');
  assert.match(await page.textContent('#redactions-box'), /No redactions/);
  await page.fill('#redact-form input[name=reason]', 'asked to be forgotten');
  await page.fill('#redact-form textarea[name=texts]', SECRET);
  await page.click('#redact-dry-run');
  await page.waitForSelector('#plan-seqs');
  // What the server's own dry run says (the create that holds it, the view whose answer showed
  // it, and what else depended on them), changing nothing.
  const asked = await fetch(server.url + '/v1/redact', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + server.token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ reason: 'x', texts: [SECRET], dry_run: true }),
  });
  const plan = await asked.json();
  assert.ok(plan.seqs.includes(1) && plan.seqs.includes(2), JSON.stringify(plan));
  const seqs = plan.seqs.join(', ');
  assert.equal(await page.textContent('#plan-seqs'), seqs);
  assert.deepEqual(await page.$$eval('#plan-paths li', (li) => li.map((x) => x.textContent)), plan.paths);
  assert.ok(plan.paths.includes('/memories/secret.md'), JSON.stringify(plan));
  // Changing the form takes the offer away: a new dry run is needed.
  await page.fill('#redact-form input[name=reason]', 'asked to be forgotten, twice');
  await page.waitForSelector('#redact-stale');
  assert.equal(await page.$('#redact-real'), null);
  await page.click('#redact-dry-run');
  await page.waitForSelector('#redact-real');
  assert.equal(await page.textContent('#redact-real'), `Redact for real: erase ${plan.seqs.length} events`);
  await shot(page, 'redact-dry-run');
  const before = await head(server);
  await page.click('#redact-real');
  await page.waitForSelector('#redact-result');
  assert.equal((await page.textContent('#redact-result')).split('\n')[0],
    `redacted ${plan.seqs.length} events (${seqs}); event ${before + 1} records it`);
  await page.waitForSelector('#redactions');
  const row = await page.$$eval('#redactions tbody tr td', (tds) => tds.map((td) => td.textContent));
  assert.equal(row[0], String(before + 1));
  assert.equal(row[2], 'operator');
  assert.equal(row[3], 'asked to be forgotten, twice');
  assert.equal(row[4], seqs);
  await shot(page, 'redactions');

  await page.goto(server.url + '/ui/#/event?seq=1');
  await page.waitForSelector('#verified');
  assert.match(await page.textContent('main'), new RegExp('Redacted by operator at seq ' + (before + 1) + ' \\(.*\\): asked to be forgotten, twice'));
  assert.ok(!(await page.textContent('main')).includes(SECRET), 'the text is gone');
  await shot(page, 'redacted-event');

  // The redaction's own page is an admin command's, and the events it names are no file.
  await page.goto(server.url + '/ui/#/event?seq=' + (before + 1));
  await page.waitForSelector('#verified');
  const headings = await page.$$eval('main h2', (hs) => hs.map((h) => h.textContent));
  assert.deepEqual(headings.slice(0, 2), ['The admin command as sent', 'The answer the admin command got']);
  assert.ok((await page.textContent('main dl')).includes('events ' + seqs));
  assert.deepEqual(await page.$$eval('main a[href^="#/file"]', (as) => as.map((a) => a.textContent)), [],
    'the events it names are not linked as a file');
  await shot(page, 'admin-event');
  await page.goto(server.url + '/ui/#/timeline');
  await page.waitForSelector('#timeline');
  const adminRow = await page.$$eval('#timeline tbody tr', (trs, seq) => {
    const tr = trs.find((t) => t.children[0].textContent === String(seq));
    return tr && [tr.children[4].textContent, tr.children[4].querySelectorAll('a').length];
  }, before + 1);
  assert.deepEqual(adminRow, ['events ' + seqs, 0]);

  // The log still verifies; the count moves as the server's progress lines come.
  await page.click('#nav a[href="#/verify"]');
  await page.waitForSelector('#replication-none');
  assert.match(await page.textContent('#replication-none'), /Not replicated/);
  await page.evaluate(() => {
    window.__counts = [];
    // Each count as it was set (a text node per setting), even when two come in one task.
    new MutationObserver((changes) => changes.forEach((c) => c.addedNodes.forEach((n) => window.__counts.push(n.textContent))))
      .observe(document.querySelector('#verify-count'), { childList: true, characterData: true, subtree: true });
  });
  await page.click('#run-verify');
  await page.waitForSelector('#verify-status');
  assert.equal(await page.textContent('#verify-status'), 'INTACT');
  const events = before + 1;
  assert.equal(await page.textContent('#verify-count'), `${events} of ${events} events checked`);
  const counts = await page.evaluate(() => window.__counts);
  assert.ok(counts.includes(`0 of ${events} events checked`), JSON.stringify(counts));
  assert.equal(await page.getAttribute('#verify-progress', 'max'), String(events));
  await shot(page, 'verify-progress');
  assert.deepEqual(errors, []);
  await context.close();
});

test('an event page traces a write and puts its file back after a dry run and a confirming click', async () => {
  const dir = join(work, 'incident.mnemo.db');
  const server = await serve(['--db', dir], dir);
  tool(dir, 'intake', [
    { command: 'create', path: '/memories/acme.md', file_text: 'plan: basic\n' },
    { command: 'insert', path: '/memories/acme.md', insert_line: 1, insert_text: 'refund: always\n' },
  ]);
  tool(dir, 'support', [{ command: 'view', path: '/memories/acme.md' }]);
  const { context, page, errors } = await loggedIn(server, ['--db', dir]);
  await page.waitForSelector('#timeline');
  await page.goto(server.url + '/ui/#/event?seq=2');
  await page.waitForSelector('#trace-run');
  await page.click('#trace-run');
  await page.waitForSelector('#trace-events');
  const rows = await page.$$eval('#trace-events tbody tr', (trs) => trs.map((tr) => [tr.children[0].textContent, tr.children[1].textContent, tr.children[3].textContent]));
  assert.deepEqual(rows, [['3', 'support', 'shown']]);
  assert.match(await page.textContent('#trace-live'), /\/memories\/acme\.md \(15 bytes\)/);
  assert.match(await page.textContent('#trace-exact'), /^Exact/);
  const before = await head(server);
  await page.click('#revert-dry-run');
  await page.waitForSelector('#revert-calls');
  assert.equal(await page.textContent('#revert-undone'), '2');
  assert.equal(await head(server), before, 'a dry run writes nothing');
  await page.click('#revert-real');
  await page.waitForSelector('#revert-real-confirm');
  assert.equal(await head(server), before, 'the first click writes nothing');
  await shot(page, 'incident-dry-run');
  await page.click('#revert-real-confirm');
  await page.waitForSelector('#revert-result');
  assert.match(await page.textContent('#revert-result'), /^reverted \/memories\/acme\.md to seq 1/);
  assert.ok((await head(server)) > before);
  const cat = await fetch(server.url + '/v1/cat?path=/memories/acme.md', { headers: { Authorization: 'Bearer ' + server.token } });
  assert.equal(await cat.text(), 'plan: basic\n');
  // The first event has no earlier tree to go back to; a view changed nothing to trace.
  // (Each page waited for by its heading: the one before it stays until it is drawn.)
  const eventPage = (seq) => page.waitForFunction((n) => document.querySelector('main h1')?.textContent.startsWith('Event ' + n + ' '), seq);
  await page.goto(server.url + '/ui/#/event?seq=1');
  await eventPage(1);
  await page.waitForSelector('#trace-run');
  assert.equal(await page.$('#revert-dry-run'), null);
  await page.goto(server.url + '/ui/#/event?seq=3');
  await eventPage(3);
  assert.equal(await page.$('#trace-run'), null);
  assert.deepEqual(errors, []);
  await context.close();
});

test('the verify page shows where a replicating server\'s replica stands', async () => {
  const dir = join(work, 'replicated.mnemo.db');
  const replica = 'file://' + join(work, 'replica');
  const server = await serve(['--db', dir, '--replicate', replica, '--replicate-interval', '0.05'], dir);
  // The store gets a signing key before its first event: that event's checkpoint is signed.
  execFileSync(BIN, ['key', 'create', '--db', dir], { encoding: 'utf8' });
  tool(dir, 'planner', [{ command: 'create', path: '/memories/r.md', file_text: 'r\n' }]);
  const { context, page, errors } = await loggedIn(server, ['--db', dir]);
  await page.waitForSelector('#timeline');
  // Shipped: the replica's checkpoint names the head.
  let state;
  for (let i = 0; i < 200; i++) {
    const r = await fetch(server.url + '/v1/replication', { headers: { Authorization: 'Bearer ' + server.token } });
    state = await r.json();
    if (state.lag_events === 0 && state.replicated.seq === 1) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  assert.equal(state.replicated.seq, 1, JSON.stringify(state));
  await page.click('#nav a[href="#/verify"]');
  await page.waitForSelector('#replication');
  assert.equal(await page.textContent('#replication-url'), replica);
  assert.match(await page.textContent('#replication-checkpoint'), /^1:[0-9a-f]{64}$/);
  assert.match(await page.textContent('#replication-lag'), /^0 events, up to date$/);
  assert.equal(await page.textContent('#replication-error'), 'none');
  assert.match(await page.textContent('#replication-signed'), /^yes, by the store's key$/);
  await page.click('#run-verify');
  await page.waitForSelector('#verify-status');
  assert.equal(await page.textContent('#verify-status'), 'INTACT');
  await shot(page, 'verify-replicated');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a --data server\'s store has its own access and redaction pages', async () => {
  const dir = join(work, 'data-pages');
  const data = await serve(['--data', dir], dir);
  const made = await fetch(data.url + '/v1/stores', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + data.token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'gamma' }),
  });
  assert.equal(made.status, 201);
  const { context, page, errors } = await loggedIn(data, ['--data', dir]);
  await page.waitForSelector('#stores');
  assert.equal(await page.$('#nav a[href^="#/access"]'), null, 'no store picked: no store\'s access');
  await page.click('#stores a >> text=gamma');
  await page.click('#nav a[href="#/access?store=gamma"]');
  await page.waitForSelector('#issue-form');
  await page.fill('#issue-form input[name=agent]', 'worker');
  await page.click('#issue-token');
  await page.click('#issue-token-confirm');
  await page.waitForSelector('#issued-token');
  // Issued by that store: listed in it.
  const listed = await fetch(data.url + '/v1/stores/gamma/tokens', { headers: { Authorization: 'Bearer ' + data.token } });
  assert.match(await listed.text(), /"agent":"worker"/);
  await page.click('#nav a[href="#/redact?store=gamma"]');
  await page.waitForSelector('#redactions-box');
  assert.match(await page.textContent('#redactions-box'), /No redactions/);
  assert.deepEqual(errors, []);
  await context.close();
});
