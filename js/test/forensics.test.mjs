// trace and revert through the client: where a bad write's content went, a dry run that writes
// nothing, the revert refused on a conflict until forced, the store verifying after, and an
// agent token refused both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { MnemoClient, BadRequest, Forbidden } from 'mnemo-db';

const BIN = process.env.MNEMO_BIN || 'mnemo';

test('a bad write is traced, reverted after a dry run and a refused conflict, and the store verifies', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-js-forensics-'));
  try {
    const db = join(dir, 'forensics.mnemo.db');
    const { url, token } = JSON.parse(execFileSync(BIN, ['link', '--db', db, '--idle-exit', '5'], { encoding: 'utf-8' }));
    const as = (agent) => MnemoClient.connect(url, { token, agent });
    await as('intake').call({ command: 'create', path: '/memories/acme.md', file_text: 'plan: basic\n' });
    await as('intake').call({ command: 'insert', path: '/memories/acme.md', insert_line: 1, insert_text: 'refund: always\n' });
    await as('support').call({ command: 'view', path: '/memories/acme.md' });
    await as('billing').call({ command: 'str_replace', path: '/memories/acme.md', old_str: 'basic', new_str: 'gold' });

    const operator = as('alice');
    const traced = await operator.trace(2);
    assert.equal(traced.exact, true);
    assert.deepEqual(traced.events.map((e) => [e.seq, e.agent, e.shown]), [[3, 'support', true], [4, 'billing', true]]);
    assert.deepEqual(traced.live.map((f) => f.path), ['/memories/acme.md']);

    const head = (await operator.head()).seq;
    const plan = await operator.revert({ to: 1, path: '/memories' });
    assert.deepEqual(plan.undone, [2, 4]);
    assert.equal(plan.conflicts.length, 1, JSON.stringify(plan));
    assert.equal((await operator.head()).seq, head, 'a dry run writes nothing');
    await assert.rejects(operator.revert({ to: 1, path: '/memories', dryRun: false }), BadRequest);
    assert.equal((await operator.head()).seq, head, 'a refused revert writes nothing');
    const done = await operator.revert({ to: 1, path: '/memories', dryRun: false, force: true });
    assert.equal(done.record, head + 1);
    assert.deepEqual((await operator.trace(2)).live, []);
    assert.equal((await operator.verify()).status, 'intact');

    const issued = await operator.tokens.create({ agent: 'support' });
    const agent = MnemoClient.connect(url, { token: issued.token });
    await assert.rejects(agent.trace(2), Forbidden);
    await assert.rejects(agent.revert({ to: 1 }), Forbidden);
    assert.throws(() => operator.revert({ to: 1, agent: 'intake' }), /revert takes/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
