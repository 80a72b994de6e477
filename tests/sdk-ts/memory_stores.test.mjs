// The memory-stores API of `mnemo serve --data`, driven by the official TypeScript SDK in both
// pinned versions (@anthropic-ai/sdk 1.16.0 and 1.17.0, `client.beta.memoryStores`): each route
// through the SDK's own methods, auto-pagination, the errors it raises as its classes (a path
// conflict naming the memory in the way), the values the store holds, and writes whose answer was
// cut off and that the SDK sent again, applied once.
// Run by tests/memory_stores_ts.sh (MNEMO_BIN names the built binary).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic116 from '@anthropic-ai/sdk';
import Anthropic117 from 'anthropic-sdk-1.17';

const installed = (name) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
const SDKS = [
  ['1.16.0', Anthropic116, installed('@anthropic-ai/sdk')],
  ['1.17.0', Anthropic117, installed('anthropic-sdk-1.17')],
];

const sha256 = (text) => createHash('sha256').update(text, 'utf8').digest('hex');
let server;
let file;
let dir;

before(async () => {
  const mnemo = process.env.MNEMO_BIN;
  assert.ok(mnemo, 'MNEMO_BIN must name the mnemo binary');
  dir = mkdtempSync(join(tmpdir(), 'mnemo-ts-'));
  const data = join(dir, 'data');
  server = spawn(mnemo, ['serve', '--data', data, '--listen', '127.0.0.1:0'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const serverFile = join(data, 'mnemo-server.json');
  for (let i = 0; i < 600 && !file; i++) {
    if (existsSync(serverFile)) {
      try {
        file = JSON.parse(readFileSync(serverFile, 'utf8'));
      } catch {}
    }
    if (!file) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(file, 'the server wrote its server file');
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function toolCall(store, command) {
  const answer = await fetch(`${file.url}/v1/stores/${store}/memory`, {
    method: 'POST',
    headers: { authorization: `Bearer ${file.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(command),
  }).then((r) => r.json());
  assert.notEqual(answer.is_error, true, JSON.stringify(answer));
  return answer;
}

async function rejects(promise, ErrorClass, type) {
  let error;
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof ErrorClass, `${e?.constructor?.name}: ${e?.message}`);
    assert.equal(e.error?.type, 'error');
    assert.equal(e.error?.error?.type, type);
    assert.match(e.requestID ?? '', /^req_[0-9a-f]{24}$/);
    assert.equal(e.error?.request_id, e.requestID);
    error = e.error.error;
    return true;
  });
  return error;
}

/** A TCP proxy on loopback in front of the server that can drop answers: the request reaches
 * the server and is answered, but the client sees its connection close instead, as when a
 * network fails after the write. */
async function droppingProxy(upstream) {
  const { hostname, port, host } = new URL(upstream);
  const proxy = { toDrop: 0, dropped: 0 };
  let ownHost;
  const server = createServer((client) => {
    const up = connect(Number(port), hostname);
    // fetch names the proxy as the Host; the server answers only to its own name.
    client.on('data', (chunk) => up.write(Buffer.from(chunk.toString('latin1').replace(ownHost, `host: ${host}\r`), 'latin1')));
    up.on('data', (chunk) => {
      if (proxy.toDrop > 0) {
        proxy.toDrop--;
        proxy.dropped++;
        client.destroy();
        up.destroy();
        return;
      }
      client.write(chunk);
    });
    const end = () => {
      client.destroy();
      up.destroy();
    };
    client.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  ownHost = new RegExp(`^host: 127\\.0\\.0\\.1:${server.address().port}\r$`, 'im');
  proxy.close = () => new Promise((resolve) => server.close(resolve));
  return proxy;
}

for (const [version, Anthropic, actual] of SDKS) {
test(`@anthropic-ai/sdk ${version} is the one installed`, () => {
  assert.equal(actual, version);
});

test(`every memory-stores route answers the TypeScript SDK ${version}`, async () => {
  const client = new Anthropic({ apiKey: file.token, baseURL: file.url, maxRetries: 0 });
  const stores = client.beta.memoryStores;
  // The stores the other tests of this server made.
  const earlier = [];
  for await (const s of stores.list()) earlier.push(s.id);

  const made = await stores.create({ name: 'ts store', metadata: { user: '7' } });
  assert.equal(made.type, 'memory_store');
  assert.match(made.id, /^memstore_[a-z0-9_-]+$/);
  assert.deepEqual(made.metadata, { user: '7' });
  assert.equal(made.archived_at, null);
  assert.ok(!Number.isNaN(Date.parse(made.created_at)));
  assert.deepEqual(await stores.retrieve(made.id), made);
  const renamed = await stores.update(made.id, { name: 'renamed', metadata: { user: null, plan: 'x' } });
  assert.equal(renamed.name, 'renamed');
  assert.deepEqual(renamed.metadata, { plan: 'x' });
  const other = await stores.create({ name: 'other' });
  const listed = [];
  for await (const s of stores.list({ limit: 1 })) listed.push(s.id);
  assert.deepEqual(listed.sort(), [...earlier, made.id, other.id].sort());

  const name = made.id.slice('memstore_'.length);
  for (let i = 0; i < 45; i++) {
    await toolCall(name, { command: 'create', path: `/memories/n/${String(i).padStart(2, '0')}.md`, file_text: `n${i}\n` });
  }
  const memories = client.beta.memoryStores.memories;
  const all = [];
  for await (const m of memories.list(made.id, { limit: 10 })) all.push(m);
  assert.equal(all.length, 45);
  for (const m of all) {
    assert.equal(m.type, 'memory');
    assert.equal(m.content, null);
    const n = Number(m.path.slice(3, 5));
    assert.equal(m.content_sha256, sha256(`n${n}\n`));
  }
  const prefixes = [];
  for await (const item of memories.list(made.id, { depth: 1 })) prefixes.push([item.type, item.path]);
  assert.deepEqual(prefixes, [['memory_prefix', '/n/']]);

  const created = await memories.create(made.id, { path: '/ts/a.md', content: 'one\n' });
  assert.equal(created.content_sha256, sha256('one\n'));
  const updated = await memories.update(created.id, {
    memory_store_id: made.id,
    content: 'two\n',
    path: '/ts/b.md',
    precondition: { type: 'content_sha256', content_sha256: created.content_sha256 },
    view: 'full',
  });
  assert.equal(updated.id, created.id);
  assert.equal(updated.path, '/ts/b.md');
  assert.equal(updated.content, 'two\n');
  await rejects(
    memories.update(created.id, {
      memory_store_id: made.id,
      content: 'lost',
      precondition: { type: 'content_sha256', content_sha256: created.content_sha256 },
    }),
    Anthropic.ConflictError,
    'memory_precondition_failed_error',
  );
  await rejects(
    memories.create(made.id, { path: '/ts/b.md', content: 'again' }),
    Anthropic.ConflictError,
    'memory_path_conflict_error',
  );
  const retrieved = await memories.retrieve(created.id, { memory_store_id: made.id });
  assert.equal(retrieved.content, 'two\n');

  const versions = client.beta.memoryStores.memoryVersions;
  const lineage = [];
  for await (const v of versions.list(made.id, { memory_id: created.id })) lineage.push(v);
  assert.deepEqual(lineage.map((v) => v.operation), ['modified', 'created']);
  assert.equal(lineage[0].created_by.type, 'api_actor');
  const first = await versions.retrieve(lineage[1].id, { memory_store_id: made.id });
  assert.equal(first.content, 'one\n');
  assert.equal(first.path, '/ts/a.md');

  // Redaction as the hosted API does it: the current version of a live memory is refused; the
  // first one, which the memory has moved past, is redacted and stays a version.
  await rejects(versions.redact(lineage[0].id, { memory_store_id: made.id }), Anthropic.ConflictError, 'conflict_error');
  const isRedacted = (v) => {
    assert.notEqual(v.redacted_at, null);
    assert.equal(v.redacted_by.type, 'api_actor');
    assert.equal(v.redacted_by.api_key_id, 'operator');
    for (const field of ['content', 'path', 'content_sha256', 'content_size_bytes']) assert.equal(v[field], null, field);
  };
  isRedacted(await versions.redact(lineage[1].id, { memory_store_id: made.id }));
  isRedacted(await versions.retrieve(lineage[1].id, { memory_store_id: made.id, view: 'full' }));
  const still = [];
  for await (const v of versions.list(made.id, { memory_id: created.id, view: 'full' })) still.push(v);
  assert.deepEqual(still.map((v) => v.id), lineage.map((v) => v.id));
  assert.equal(still[0].content, 'two\n');
  isRedacted(still[1]);
  const deleted = await memories.delete(created.id, { memory_store_id: made.id, expected_content_sha256: sha256('two\n') });
  assert.deepEqual(deleted, { type: 'memory_deleted', id: created.id });
  isRedacted(await versions.redact(lineage[0].id, { memory_store_id: made.id }));
  await rejects(memories.retrieve(created.id, { memory_store_id: made.id }), Anthropic.NotFoundError, 'not_found_error');

  await rejects(stores.retrieve('memstore_missing'), Anthropic.NotFoundError, 'not_found_error');
  await rejects(memories.list(made.id, { path_prefix: 'n' }), Anthropic.BadRequestError, 'invalid_request_error');
  const stranger = new Anthropic({ apiKey: 'not-a-token', baseURL: file.url, maxRetries: 0 });
  await rejects(stranger.beta.memoryStores.list(), Anthropic.AuthenticationError, 'authentication_error');

  const archived = await stores.archive(other.id);
  assert.notEqual(archived.archived_at, null);
  const gone = await stores.delete(other.id);
  assert.deepEqual(gone, { type: 'memory_store_deleted', id: other.id });
  await rejects(stores.retrieve(other.id), Anthropic.NotFoundError, 'not_found_error');

  const verify = await fetch(`${file.url}/v1/stores/${name}/verify`, {
    headers: { authorization: `Bearer ${file.token}` },
  }).then((r) => r.json());
  assert.equal(verify.status, 'intact');
});

test(`a path conflict names the memory in the way, as the SDK ${version}'s error object does`, async () => {
  const client = new Anthropic({ apiKey: file.token, baseURL: file.url, maxRetries: 0 });
  const store = await client.beta.memoryStores.create({ name: `conflicts ${version}` });
  const memories = client.beta.memoryStores.memories;
  const held = await memories.create(store.id, { path: '/a/b.md', content: 'held\n' });
  const other = await memories.create(store.id, { path: '/c.md', content: 'other\n' });
  for (const [asked, call] of [
    ['at the path', () => memories.create(store.id, { path: '/a/b.md', content: 'again' })],
    ['above the path', () => memories.create(store.id, { path: '/a/b.md/c.md', content: 'x' })],
    ['under the path', () => memories.create(store.id, { path: '/a', content: 'x' })],
    ['a move onto it', () => memories.update(other.id, { memory_store_id: store.id, path: '/a/b.md' })],
  ]) {
    const error = await rejects(call(), Anthropic.ConflictError, 'memory_path_conflict_error');
    assert.equal(error.conflicting_memory_id, held.id, asked);
    assert.equal(error.conflicting_path, '/a/b.md', asked);
    // The API's paths, never the memory tool's.
    assert.doesNotMatch(error.message, /\/memories/, asked);
  }
});

test(`a write whose answer is cut off, sent again by the SDK ${version}, is applied once`, async () => {
  const proxy = await droppingProxy(file.url);
  try {
    const client = new Anthropic({ apiKey: file.token, baseURL: proxy.url, maxRetries: 2 });
    const direct = new Anthropic({ apiKey: file.token, baseURL: file.url, maxRetries: 0 });
    const store = await client.beta.memoryStores.create({ name: `retries ${version}` });
    const memories = client.beta.memoryStores.memories;
    const versionsOf = async (id) => {
      const seen = [];
      for await (const v of direct.beta.memoryStores.memoryVersions.list(store.id, { memory_id: id })) {
        seen.push(v.operation);
      }
      return seen;
    };

    // With an Idempotency-Key (the SDK sends the same headers again): the retry is answered
    // with the memory the first try made.
    proxy.toDrop = 1;
    const keyed = await memories.create(
      store.id,
      { path: '/keyed.md', content: 'once\n' },
      { headers: { 'Idempotency-Key': `create-${version}` } },
    );
    assert.equal(proxy.dropped, 1);
    assert.equal(keyed.path, '/keyed.md');
    assert.deepEqual(await versionsOf(keyed.id), ['created']);

    // Without one, the SDK's retry of a create meets the memory the first try made: 409, which
    // names that memory, and nothing is written twice.
    proxy.toDrop = 1;
    const error = await rejects(
      memories.create(store.id, { path: '/bare.md', content: 'once\n' }),
      Anthropic.ConflictError,
      'memory_path_conflict_error',
    );
    assert.equal(proxy.dropped, 2);
    assert.equal(error.conflicting_path, '/bare.md');
    const bare = await direct.beta.memoryStores.memories.retrieve(error.conflicting_memory_id, {
      memory_store_id: store.id,
    });
    assert.equal(bare.content, 'once\n');
    assert.deepEqual(await versionsOf(bare.id), ['created']);

    // An update with a precondition: its retry finds the content changed (409), so it is not
    // applied twice; one without: its retry changes nothing, so it makes no second version.
    proxy.toDrop = 1;
    await rejects(
      memories.update(bare.id, {
        memory_store_id: store.id,
        content: 'twice\n',
        precondition: { type: 'content_sha256', content_sha256: sha256('once\n') },
      }),
      Anthropic.ConflictError,
      'memory_precondition_failed_error',
    );
    proxy.toDrop = 1;
    const updated = await memories.update(keyed.id, { memory_store_id: store.id, content: 'again\n', view: 'full' });
    assert.equal(updated.content, 'again\n');
    assert.equal(proxy.dropped, 4);
    assert.deepEqual(await versionsOf(bare.id), ['modified', 'created']);
    assert.deepEqual(await versionsOf(keyed.id), ['modified', 'created']);

    const name = store.id.slice('memstore_'.length);
    const verify = await fetch(`${file.url}/v1/stores/${name}/verify`, {
      headers: { authorization: `Bearer ${file.token}` },
    }).then((r) => r.json());
    assert.equal(verify.status, 'intact');
  } finally {
    await proxy.close();
  }
});
}
