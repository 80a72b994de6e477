// README's TypeScript quick start, run as written: the block is read from README.md and run by
// node in a scratch directory where `mnemo-db` and `@anthropic-ai/sdk` resolve, with the SDK
// pointed (ANTHROPIC_BASE_URL) at a fake Messages API that asks for two memory calls.
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

/** The first ```js block after README's `## TypeScript` heading. */
function quickStart() {
  const readme = readFileSync(join(pkg, '..', 'README.md'), 'utf-8');
  const section = readme.slice(readme.indexOf('\n## TypeScript\n'));
  const match = /```js\n([\s\S]*?)```/.exec(section);
  assert.ok(match, 'README has a ```js block under ## TypeScript');
  return match[1];
}

test("README's TypeScript quick start runs as written", async () => {
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
    writeFileSync(join(dir, 'quickstart.mjs'), quickStart());
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
