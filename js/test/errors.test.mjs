// The client's errors are typed: a server that is down, a wrong token (401), a memory call whose
// profile is not the server's (409), and a call over the server's request-size limit (413).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  MnemoClient,
  MnemoError,
  ServerUnreachable,
  Unauthorized,
  SettingsRefused,
  Conflict,
  PayloadTooLarge,
} from 'mnemo-db';

const BIN = process.env.MNEMO_BIN || 'mnemo';

/** A loopback port nothing listens on (taken, then released). */
async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A server for a fresh store, started by `mnemo link` with `args`: its URL and token. */
function served(dir, ...args) {
  const out = execFileSync(BIN, ['link', '--db', join(dir, 'errors.mnemo.db'), '--idle-exit', '5', ...args], { encoding: 'utf-8' });
  return JSON.parse(out);
}

test('a server that is down is ServerUnreachable, and the message holds no token', async () => {
  const token = 'mnemo_0123456789abcdef_secret';
  const client = MnemoClient.connect(`http://127.0.0.1:${await closedPort()}`, { token });
  await assert.rejects(client.head(), (err) => {
    assert.ok(err instanceof ServerUnreachable && err instanceof MnemoError, String(err));
    assert.ok(!err.message.includes(token), err.message);
    return true;
  });
  // And through the handlers: the runner would send the model this error.
  await assert.rejects(client.memoryTool().view({ command: 'view', path: '/memories' }), ServerUnreachable);
});

test('open() without a mnemo binary says how to give one', async () => {
  await assert.rejects(MnemoClient.open('x.mnemo.db', { bin: '/nonexistent/mnemo' }), (err) => {
    assert.ok(err instanceof ServerUnreachable, String(err));
    assert.match(err.message, /MNEMO_BIN/);
    return true;
  });
});

test('bad arguments are refused before anything is sent', () => {
  assert.throws(() => MnemoClient.connect('localhost:1', { token: 't' }), /http:\/\//);
  assert.throws(() => MnemoClient.connect('http://127.0.0.1:1', {}), /token must be a non-empty string/);
  const client = MnemoClient.connect('http://127.0.0.1:1', { token: 't' });
  assert.throws(() => client.memoryTool({ profile: 'java-sdk' }), /profile must be one of spec, python-sdk, typescript-sdk/);
  assert.throws(() => client.show(0), /seq must be a whole number/);
});

test('a wrong token is Unauthorized (401), a foreign profile SettingsRefused (409), and neither is logged', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-js-errors-'));
  try {
    const { url, token } = served(dir, '--profile', 'typescript-sdk');
    const wrong = MnemoClient.connect(url, { token: 'mnemo_0000000000000000_' + '0'.repeat(64) });
    await assert.rejects(wrong.head(), (err) => err instanceof Unauthorized && err.status === 401);
    await assert.rejects(wrong.call({ command: 'view', path: '/memories' }), Unauthorized);

    const operator = MnemoClient.connect(url, { token, agent: 'errors' });
    const spec = operator.memoryTool({ profile: 'spec' });
    await assert.rejects(spec.view({ command: 'view', path: '/memories' }), (err) => {
      assert.ok(err instanceof SettingsRefused && err instanceof Conflict && err.status === 409, String(err));
      assert.match(err.message, /profile typescript-sdk here, spec in the caller's/);
      return true;
    });
    assert.equal((await operator.head()).seq, 0, 'nothing was recorded');
    // The server's own profile answers.
    assert.equal(await operator.memoryTool().view({ command: 'view', path: '/memories' }), 'Here\'re the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4K\t/memories');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a call over the request-size limit is PayloadTooLarge (413) and not recorded', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-js-errors-'));
  try {
    const { url, token } = served(dir, '--profile', 'typescript-sdk', '--max-request-bytes', '4096');
    const client = MnemoClient.connect(url, { token });
    const tool = client.memoryTool();
    const big = { command: 'create', path: '/memories/big.md', file_text: 'x'.repeat(8192) };
    await assert.rejects(tool.create(big), (err) => err instanceof PayloadTooLarge && err.status === 413);
    assert.equal((await client.head()).seq, 0, 'nothing was recorded');
    assert.equal(await tool.create({ ...big, file_text: 'small' }), 'File created successfully at: /memories/big.md');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the CommonJS entry is the same client and the same error classes', async () => {
  const { createRequire } = await import('node:module');
  const cjs = createRequire(import.meta.url)('mnemo-db');
  assert.equal(cjs.ServerUnreachable, ServerUnreachable, 'one class for both entries');
  assert.ok(Object.getPrototypeOf(MnemoClient) === cjs.MnemoClient, 'the ES module client extends the CommonJS one');
  const client = cjs.MnemoClient.connect(`http://127.0.0.1:${await closedPort()}`, { token: 't' });
  await assert.rejects(client.verify(), ServerUnreachable);
  // Through the CommonJS entry a `typescript-sdk` error needs no SDK class: a plain Error whose
  // message is the text after `Error: `, which the runner puts back.
  const error = await cjs.MnemoClient.toolError('Error: The path /memories/x does not exist');
  assert.equal(error.constructor, Error);
  assert.equal(error.message, 'The path /memories/x does not exist');
});

test('an opened store whose server went away gets a new one, and the call is answered once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-js-errors-'));
  const db = join(dir, 'restart.mnemo.db');
  const client = await MnemoClient.open(db, { agent: 'restart', bin: BIN });
  try {
    assert.equal(await client.memoryTool().create({ command: 'create', path: '/memories/a.md', file_text: 'a\n' }), 'File created successfully at: /memories/a.md');
    const first = JSON.parse(execFileSync(BIN, ['link', '--db', db, '--no-start'], { encoding: 'utf-8' }));
    process.kill(first.pid, 'SIGTERM');
    for (let i = 0; i < 200; i++) {
      try {
        process.kill(first.pid, 0);
        await new Promise((resolve) => setTimeout(resolve, 25));
      } catch {
        break;
      }
    }
    assert.equal(await client.memoryTool().view({ command: 'view', path: '/memories/a.md' }), "Here's the content of /memories/a.md with line numbers:\n     1\ta\n     2\t");
    assert.notEqual(new URL(client.url).port, new URL(first.url).port, 'a new server answered');
    assert.equal((await client.log()).length, 2, 'each call recorded once');
  } finally {
    client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
