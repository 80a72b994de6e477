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
  await page.waitForSelector('#timeline');
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
  await page.waitForSelector('#timeline');
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
