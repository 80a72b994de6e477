// The SDK's tool runner with `betaMemoryTool(client.memoryTool())`, against a fake Messages API:
// the tool_result blocks the API receives equal what `mnemo tool` answers for the same tool_use
// blocks on a fresh store, byte for byte (errors included, which reach the model through the
// runner's error path).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import Anthropic from '@anthropic-ai/sdk';
import { betaMemoryTool } from '@anthropic-ai/sdk/helpers/beta/memory';
import { MnemoClient } from 'mnemo-db';
import { fakeMessagesApi, memoryUse, mnemoToolResults } from './fake_api.mjs';

const BIN = process.env.MNEMO_BIN || 'mnemo';

// One call a turn: the runner runs a turn's calls concurrently, so their order would not be fixed.
const CALLS = [
  { command: 'view', path: '/memories' },
  { command: 'create', path: '/memories/notes/tea.md', file_text: 'likes: tea\nhates: coffee\n' },
  { command: 'create', path: '/memories/notes/tea.md', file_text: 'again' },
  { command: 'str_replace', path: '/memories/notes/tea.md', old_str: 'tea', new_str: 'green tea' },
  { command: 'str_replace', path: '/memories/notes/tea.md', old_str: 'missing', new_str: 'x' },
  { command: 'insert', path: '/memories/notes/tea.md', insert_line: 9, insert_text: 'x' },
  { command: 'insert', path: '/memories/notes/tea.md', insert_line: 1, insert_text: 'since: 2020\n' },
  { command: 'view', path: '/memories/notes/tea.md', view_range: [2, -1] },
  { command: 'rename', old_path: '/memories/notes', new_path: '/memories/people' },
  { command: 'view', path: '/memories/../etc/passwd' },
  { command: 'delete', path: '/memories/nothing.md' },
  { command: 'view', path: '/memories' },
  { command: 'delete', path: '/memories/people' },
];
const TURNS = [
  ...CALLS.map((input, i) => [memoryUse(`toolu_${String(i + 1).padStart(2, '0')}`, input)]),
  [{ type: 'text', text: 'Noted.' }],
];

// Every profile: `spec` and `python-sdk` errors do not start with `Error: `, so they reach the
// runner as the SDK's `ToolError`, whose text it sends unchanged.
for (const profile of ['typescript-sdk', 'spec', 'python-sdk']) {
  test(`the tool runner sends the model what mnemo tool answers, errors included (${profile})`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mnemo-js-runner-'));
    const api = await fakeMessagesApi(TURNS);
    const mnemo = await MnemoClient.open(join(dir, 'runner.mnemo.db'), { agent: 'runner', bin: BIN, profile });
    try {
      const anthropic = new Anthropic({ apiKey: 'test-key', baseURL: api.url });
      const final = await anthropic.beta.messages.toolRunner({
        model: 'claude-opus-4-8',
        max_tokens: 1024,
        tools: [betaMemoryTool(mnemo.memoryTool({ profile }))],
        messages: [{ role: 'user', content: 'Remember that I like tea.' }],
      });
      assert.deepEqual(final.content, [{ type: 'text', text: 'Noted.' }]);
      const sent = api.toolResults();
      const blocks = TURNS.flat().filter((b) => b.type === 'tool_use');
      const expected = await mnemoToolResults(BIN, join(dir, 'reference.mnemo.db'), profile, blocks);
      assert.equal(sent.length, blocks.length);
      for (let i = 0; i < blocks.length; i++) {
        const want = expected[i];
        assert.equal(sent[i].tool_use_id, want.tool_use_id);
        assert.equal(sent[i].content, want.content, `content of ${want.tool_use_id}`);
        assert.equal(sent[i].is_error === true, want.is_error === true, `is_error of ${want.tool_use_id}`);
      }
      // Both outcomes went through the runner.
      assert.ok(sent.some((r) => r.is_error === true) && sent.some((r) => r.is_error !== true));
      // Every call is an event of the store's log, which verifies.
      const log = await mnemo.log({ agent: 'runner' });
      assert.equal(log.length, blocks.length);
      const report = await mnemo.verify();
      assert.equal(report.violations.length, 0, JSON.stringify(report));
    } finally {
      mnemo.close();
      await api.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
