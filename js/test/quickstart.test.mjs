// The TypeScript quick starts, run as written: the main README's and the package's own (js/README.md,
// what the npm registry shows). Each block is read from its README and run by node in a scratch
// directory where `mnemo-db` and `@anthropic-ai/sdk` resolve, with the SDK pointed
// (ANTHROPIC_BASE_URL) at a fake Messages API that asks for two memory calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { fakeMessagesApi, memoryUse } from './fake_api.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, '..');
const BIN = resolve(process.env.MNEMO_BIN || 'mnemo');

/** The first ```js block after the `heading` of the README at `path`. */
function quickStart(path, heading) {
  const readme = readFileSync(path, 'utf-8');
  const at = readme.indexOf('\n' + heading + '\n');
  assert.ok(at >= 0, `${path} has a ${heading} heading`);
  const match = /```js\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(match, `${path} has a \`\`\`js block under ${heading}`);
  return match[1];
}

const READMES = [
  ["README's TypeScript quick start", join(pkg, '..', 'README.md'), '## TypeScript'],
  ["the package README's quick start (js/README.md)", join(pkg, 'README.md'), '## Quick start'],
];

test('the package README shows the same quick start as the main README', () => {
  assert.equal(quickStart(READMES[1][1], READMES[1][2]), quickStart(READMES[0][1], READMES[0][2]));
});

for (const [name, path, heading] of READMES) test(`${name} runs as written`, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-js-quickstart-'));
  const api = await fakeMessagesApi([
    [memoryUse('toolu_a', { command: 'view', path: '/memories' })],
    [memoryUse('toolu_b', { command: 'create', path: '/memories/preferences.md', file_text: 'drinks: tea\n' })],
    [{ type: 'text', text: 'I will remember that you prefer tea.' }],
  ]);
  try {
    mkdirSync(join(dir, 'node_modules', '@anthropic-ai'), { recursive: true });
    symlinkSync(pkg, join(dir, 'node_modules', 'mnemo-db'));
    symlinkSync(join(pkg, 'node_modules', '@anthropic-ai', 'sdk'), join(dir, 'node_modules', '@anthropic-ai', 'sdk'));
    writeFileSync(join(dir, 'quickstart.mjs'), quickStart(path, heading));
    const env = { ...process.env, ANTHROPIC_BASE_URL: api.url, ANTHROPIC_API_KEY: 'test-key', MNEMO_BIN: BIN };
    const stdout = await new Promise((ok, fail) =>
      execFile(process.execPath, ['quickstart.mjs'], { cwd: dir, env, timeout: 60_000 }, (err, out, errText) =>
        err ? fail(new Error(`the quick start failed: ${errText}`)) : ok(out),
      ),
    );
    assert.match(stdout, /I will remember that you prefer tea\./);
    assert.match(stdout, /intact/);
    // The model's create went through the runner into the store.
    const results = api.toolResults();
    assert.deepEqual(
      results.map((r) => [r.tool_use_id, r.content, r.is_error === true]),
      [
        ['toolu_a', "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4K\t/memories", false],
        ['toolu_b', 'File created successfully at: /memories/preferences.md', false],
      ],
    );
    const stored = execFileSync(BIN, ['cat', '/memories/preferences.md', '--db', join(dir, 'memory.mnemo.db')], { encoding: 'utf-8' });
    assert.equal(stored, 'drinks: tea\n');
  } finally {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
