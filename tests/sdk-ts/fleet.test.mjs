// The memory-stores API through any node of a fleet, driven by the official TypeScript SDK in both
// pinned versions: two `mnemo serve --fleet` nodes share a `file://` bucket on loopback, the
// stores are made through node a (which holds them), and the SDK talks to node b, which forwards
// each call to a and lists the fleet's stores.
// Run by tests/memory_stores_ts.sh (MNEMO_BIN names the built binary).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic116 from '@anthropic-ai/sdk';
import Anthropic117 from 'anthropic-sdk-1.17';

const SDKS = [
  ['1.16.0', Anthropic116],
  ['1.17.0', Anthropic117],
];

let dir;
const nodes = [];

const freePort = () =>
  new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });

async function startNode(bucket, id) {
  const data = join(dir, id);
  const port = await freePort();
  const proc = spawn(
    process.env.MNEMO_BIN,
    ['serve', '--data', data, '--fleet', bucket, '--node-id', id, '--listen', `127.0.0.1:${port}`, '--lease-ttl', '2'],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  nodes.push(proc);
  const serverFile = join(data, 'mnemo-server.json');
  for (let i = 0; i < 600; i++) {
    if (existsSync(serverFile)) {
      try {
        const file = JSON.parse(readFileSync(serverFile, 'utf8'));
        if (file.pid === proc.pid) return { id, ...file };
      } catch {}
    }
    assert.equal(proc.exitCode, null, `node ${id} exited`);
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`node ${id} wrote no server file`);
}

let a;
let b;

before(async () => {
  assert.ok(process.env.MNEMO_BIN, 'MNEMO_BIN must name the mnemo binary');
  dir = mkdtempSync(join(tmpdir(), 'mnemo-ts-fleet-'));
  const bucket = `file://${join(dir, 'bucket')}`;
  a = await startNode(bucket, 'a');
  b = await startNode(bucket, 'b');
});

after(async () => {
  for (const proc of nodes) {
    if (proc.exitCode === null) {
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await exited;
    }
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function holder(store) {
  const listed = await fetch(`${b.url}/v1/stores?details=true`, {
    headers: { authorization: `Bearer ${b.token}` },
  }).then((r) => r.json());
  return listed.stores.find((s) => s.name === store)?.holder?.node;
}

for (const [version, Anthropic] of SDKS) {
  test(`the TypeScript SDK ${version} works through a node that does not hold the store`, async () => {
    const throughA = new Anthropic({ apiKey: a.token, baseURL: a.url, maxRetries: 0 });
    const client = new Anthropic({ apiKey: b.token, baseURL: b.url, maxRetries: 0 });
    const stores = client.beta.memoryStores;
    const earlier = [];
    for await (const s of stores.list({ include_archived: true })) earlier.push(s.id);
    const made = await throughA.beta.memoryStores.create({ name: `fleet ${version}`, metadata: { v: version } });
    const other = await throughA.beta.memoryStores.create({ name: `other ${version}` });
    assert.deepEqual(await stores.retrieve(made.id), made);

    const memories = stores.memories;
    const created = await memories.create(made.id, { path: '/fleet/a.md', content: 'one\n' });
    const updated = await memories.update(created.id, {
      memory_store_id: made.id,
      content: 'two\n',
      precondition: { type: 'content_sha256', content_sha256: created.content_sha256 },
      view: 'full',
    });
    assert.equal(updated.content, 'two\n');
    const listed = [];
    for await (const m of memories.list(made.id)) listed.push(m.path);
    assert.deepEqual(listed, ['/fleet/a.md']);
    assert.equal((await memories.retrieve(created.id, { memory_store_id: made.id })).content, 'two\n');

    // The list through b is the fleet's, page by page, though b holds none of these stores.
    const all = [];
    for await (const s of stores.list({ limit: 1, include_archived: true })) all.push(s.id);
    assert.deepEqual(all.sort(), [...earlier, made.id, other.id].sort());
    const archived = await stores.archive(other.id);
    assert.notEqual(archived.archived_at, null);
    const shown = [];
    for await (const s of stores.list()) shown.push(s.id);
    assert.ok(shown.includes(made.id) && !shown.includes(other.id), JSON.stringify(shown));

    assert.equal(await holder(made.id.slice('memstore_'.length)), 'a', 'b forwarded every call');
  });
}
