// The package's types (index.d.cts, index.d.mts) compile under `tsc --strict` in an ES module and
// in a CommonJS program, and `memoryTool()` is what the SDK's `betaMemoryTool` takes. The
// programs in test/types/ are only type-checked, never run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, cpSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

test('the types compile with the SDK, as an ES module and as CommonJS', async () => {
  // A scratch project where `mnemo-db` resolves through its package.json, as it would installed.
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-js-types-'));
  try {
    cpSync(join(here, 'types'), dir, { recursive: true });
    mkdirSync(join(dir, 'node_modules', '@anthropic-ai'), { recursive: true });
    symlinkSync(pkg, join(dir, 'node_modules', 'mnemo-db'));
    symlinkSync(join(pkg, 'node_modules', '@anthropic-ai', 'sdk'), join(dir, 'node_modules', '@anthropic-ai', 'sdk'));
    const out = await new Promise((ok) =>
      execFile(process.execPath, [tsc, '-p', dir], (err, stdout) => ok({ code: err ? err.code : 0, stdout })),
    );
    assert.equal(out.code, 0, `tsc found errors:\n${out.stdout}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
