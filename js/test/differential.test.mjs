// Differential test: `mnemo tool --profile typescript-sdk` against the TypeScript SDK's own
// `BetaLocalFilesystemMemoryTool` (@anthropic-ai/sdk 1.16.0, pinned by package-lock.json).
//
// Seeded random sequences of the six commands go to both sides. The SDK side runs each input the
// way its tool runner does (`runRunnableTool` on `betaMemoryTool(tool)`: a thrown error becomes
// `Error: <message>` with is_error), so what is compared is what the model would read. The Mnemo
// side is one long-running `mnemo tool` process (one JSON line in, one tool_result line out).
// Every result (content and is_error) must be equal, then the final trees byte for byte.
//
// Not generated, because Mnemo differs there on purpose (docs/agent-builders.md lists them):
//   * paths whose parents run through a regular file (the SDK fails with a Node error that
//     names the host path, such as `ENOTDIR: not a directory, realpath '/tmp/...'`);
//   * renaming a directory into its own subtree (EINVAL, with host paths);
//   * an `old_str` holding a newline (anthropic-sdk-typescript #1180: the SDK never finds one);
//   * an omitted `new_str` (the SDK writes the text `undefined`), mistyped fields, traversal
//     spellings (`..`, `/memoriesX`), which Mnemo refuses.
// The SDK leaves empty directories on disk where Mnemo's are implicit: after each SDK step the
// harness removes empty directories, which is the store's rule. A directory's size column is the
// filesystem's on the SDK side and always 4K in Mnemo, so directory lines of a listing compare
// with the size blanked.
//
// Steps: MNEMO_TS_DIFF_STEPS (default 2000), over 4 seeds from MNEMO_TS_DIFF_SEED (default
// 20250818). MNEMO_BIN names the mnemo binary.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, readdirSync, rmdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { BetaLocalFilesystemMemoryTool, betaMemoryTool } from '@anthropic-ai/sdk/tools/memory/node';
import { runRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';

const MNEMO = process.env.MNEMO_BIN || 'mnemo';
const STEPS = Number(process.env.MNEMO_TS_DIFF_STEPS || 2000);
const SEED = Number(process.env.MNEMO_TS_DIFF_SEED || 20250818);
const SEEDS = 4;
const ROOT = '/memories';
const HEADER = 'Here\'re the files and directories up to 2 levels deep in ';

if (!Number.isInteger(STEPS) || STEPS < 1) {
  throw new Error(`MNEMO_TS_DIFF_STEPS must be a positive whole number, got ${process.env.MNEMO_TS_DIFF_STEPS}`);
}

/** xorshift32: a small seeded generator, so a seed replays the same inputs. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4294967296;
  };
  return {
    random: next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (items) => items[Math.floor(next() * items.length)],
  };
}

const DIRS = ['a', 'b', 'c', 'notes'];
const RARE_DIRS = ['node_modules', '.hid', 'Ü', 'B'];
const FILES = ['x.txt', 'y.md'];
// `～` (U+FF5E) and `😀` (U+1F600) sort one way by code point and the other by UTF-16 unit.
const RARE_FILES = ['z.txt', 'é.md', '10.txt', '9.txt', 'A.md', '.h.txt', 'sp ace.md', '😀.md', '～.md', 'a', 'notes'];
const LINES = [
  'alpha', 'beta', 'alpha', 'gamma delta', '', '  indented', 'tab\tseparated\t', '`tick` and ``double``',
  '$& $1 $$ \\1 \\n', 'naïve café ☕', 'emoji 😀 and 𝄞', 'x', 'TODO: x', 'carriage\r', 'sep\u2028inside',
  'ff\x0cvt\x0bnel\x85', 'end.',
];
const SIZED = [999, 1023, 1024, 1025, 1280, 1536, 2047, 2304, 2816, 3328, 4096, 5000, 10240, 10291];
const MISSING = ['not-present-anywhere', 'ALPHA', '\t\t\t'];
const WEIGHTS = [['view', 24], ['create', 22], ['str_replace', 20], ['insert', 14], ['delete', 8], ['rename', 12]];

/** The SDK's tree: files (relative path -> text) and directories (relative paths). */
function snapshot(root) {
  const files = new Map();
  const dirs = [];
  const walk = (dir, prefix) => {
    for (const name of readdirSync(dir).sort()) {
      const rel = prefix + name;
      const full = join(dir, name);
      if (statSync(full).isDirectory()) {
        dirs.push(rel);
        walk(full, rel + '/');
      } else {
        files.set(rel, readFileSync(full, 'utf-8'));
      }
    }
  };
  walk(root, '');
  return {
    files,
    dirs,
    hasFileAbove: (rel) => {
      const parts = rel.split('/');
      for (let i = 1; i < parts.length; i++) if (files.has(parts.slice(0, i).join('/'))) return true;
      return false;
    },
    exists: (rel) => rel === '' || files.has(rel) || dirs.includes(rel),
  };
}

/** Removes directories under `root` that hold nothing, bottom-up (the store's rule). */
function prune(root) {
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        const full = join(dir, entry.name);
        walk(full);
        if (readdirSync(full).length === 0) rmdirSync(full);
      }
    }
  };
  walk(root);
}

class Generator {
  constructor(r) {
    this.r = r;
  }
  dirName() {
    return this.r.random() < 0.08 ? this.r.pick(RARE_DIRS) : this.r.pick(DIRS);
  }
  fileName() {
    return this.r.random() < 0.12 ? this.r.pick(RARE_FILES) : this.r.pick(FILES);
  }
  fresh(kind) {
    const depth = this.r.pick([1, 1, 2, 2, 3]);
    const parts = [];
    for (let i = 0; i < depth - 1; i++) parts.push(this.dirName());
    parts.push(kind === 'dir' ? this.dirName() : this.fileName());
    return parts.join('/');
  }
  pick(snap, kind, pExisting = 0.7) {
    const pool = kind === 'file' ? [...snap.files.keys()] : snap.dirs;
    return pool.length && this.r.random() < pExisting ? this.r.pick(pool) : this.fresh(kind);
  }
  spell(rel) {
    if (rel === '') return this.r.pick([ROOT, ROOT, ROOT + '/', ROOT + '//']);
    const roll = this.r.random();
    if (roll < 0.06) return `${ROOT}/${rel}/`;
    if (roll < 0.1) return `${ROOT}//${rel}`;
    if (roll < 0.13 && rel.includes('/')) return `${ROOT}/${rel.replace('/', '//')}`;
    return `${ROOT}/${rel}`;
  }
  text() {
    const roll = this.r.random();
    if (roll < 0.05) return '';
    if (roll < 0.08) {
      const line = this.r.pick(LINES.slice(0, 4)).repeat(this.r.int(1, 6));
      return Array(this.r.int(60, 400)).fill(line).join('\n');
    }
    if (roll < 0.11) return this.sized(this.r.pick(SIZED));
    const sep = this.r.pick(['\n', '\n', '\n', '\n', '\r\n', '\r']);
    const lines = Array.from({ length: this.r.int(1, 9) }, () => this.r.pick(LINES));
    return lines.join(sep) + this.r.pick(['', '', '\n', '\n', '\n', '\r\n', '\n\n']);
  }
  sized(size) {
    let out = '';
    for (;;) {
      const line = this.r.pick(LINES) + '\n';
      if (Buffer.byteLength(out + line) > size) break;
      out += line;
    }
    return out + 'p'.repeat(size - Buffer.byteLength(out));
  }
  fragment() {
    const roll = this.r.random();
    if (roll < 0.1) return '';
    let core;
    if (roll < 0.55) core = this.r.pick(LINES);
    else {
      const sep = this.r.pick(['\n', '\n', '\r\n']);
      core = Array.from({ length: this.r.int(2, 4) }, () => this.r.pick(LINES)).join(sep);
    }
    return core + this.r.pick(['', '', '', '', '\n', '\n', '\n', '\n\n', '\r\n']);
  }
  oldStr(content) {
    const roll = this.r.random();
    let old;
    if (!content || roll < 0.12) old = this.r.pick([...MISSING, ...LINES.slice(0, 6)]);
    else if (roll < 0.16) old = '';
    else if (roll < 0.6) {
      // By code point: a slice through a surrogate pair is no text a model can send.
      const chars = Array.from(content);
      const start = this.r.int(0, chars.length - 1);
      old = chars.slice(start, start + this.r.int(1, 15)).join('');
    } else if (roll < 0.9) old = this.r.pick(content.split('\n'));
    else old = content;
    // #1180: the SDK never matches a multi-line old_str; keep to one line.
    return old.split('\n')[0];
  }
  viewRange(content) {
    const roll = this.r.random();
    const n = content.split('\n').length;
    if (roll < 0.4) return undefined;
    if (roll < 0.44) return null;
    if (roll < 0.48) return [];
    if (roll < 0.52) return [this.r.int(-1, n + 1)];
    if (roll < 0.56) return [1, n, n];
    return [this.r.int(-2, n + 3), this.r.random() < 0.3 ? -1 : this.r.int(-4, n + 4)];
  }
  target(snap) {
    const roll = this.r.random();
    const files = [...snap.files.keys()];
    if (roll < 0.8 && files.length) return this.r.pick(files);
    if (roll < 0.88 && snap.dirs.length) return this.r.pick(snap.dirs);
    return this.fresh('file');
  }
  candidate(snap) {
    const total = WEIGHTS.reduce((s, [, w]) => s + w, 0);
    let roll = this.r.random() * total;
    let command = 'view';
    for (const [name, w] of WEIGHTS) {
      if (roll < w) {
        command = name;
        break;
      }
      roll -= w;
    }
    let input;
    const paths = [];
    switch (command) {
      case 'view': {
        const roll2 = this.r.random();
        const rel = roll2 < 0.15 ? '' : roll2 < 0.45 ? this.pick(snap, 'dir', 0.85) : this.target(snap);
        paths.push(rel);
        input = { command, path: this.spell(rel) };
        const range = this.viewRange(snap.files.get(rel) ?? 'x\ny');
        if (range !== undefined) input.view_range = range;
        break;
      }
      case 'create': {
        const roll2 = this.r.random();
        const rel =
          roll2 < 0.02 ? '' : roll2 < 0.1 && snap.dirs.length ? this.r.pick(snap.dirs) : this.pick(snap, 'file', 0.2);
        paths.push(rel);
        input = { command, path: this.spell(rel), file_text: this.text() };
        break;
      }
      case 'str_replace': {
        const rel = this.target(snap);
        paths.push(rel);
        input = { command, path: this.spell(rel), old_str: this.oldStr(snap.files.get(rel) ?? ''), new_str: this.fragment() };
        break;
      }
      case 'insert': {
        const rel = this.target(snap);
        paths.push(rel);
        const n = (snap.files.get(rel) ?? '').split('\n').length;
        const line = this.r.random() < 0.8 ? this.r.int(0, n) : this.r.pick([-3, -1, n + 1, n + 7]);
        input = { command, path: this.spell(rel), insert_line: line, insert_text: this.fragment() };
        break;
      }
      case 'delete': {
        const roll2 = this.r.random();
        const rel =
          roll2 < 0.03 ? '' : roll2 < 0.45 ? this.pick(snap, 'file', 0.9) : roll2 < 0.8 ? this.pick(snap, 'dir', 0.9) : this.fresh('file');
        paths.push(rel);
        input = { command, path: this.spell(rel) };
        break;
      }
      case 'rename': {
        const roll2 = this.r.random();
        const old =
          roll2 < 0.03 ? '' : roll2 < 0.5 ? this.pick(snap, 'file', 0.9) : roll2 < 0.85 ? this.pick(snap, 'dir', 0.9) : this.fresh(this.r.pick(['file', 'dir']));
        const roll3 = this.r.random();
        let neu;
        if (roll3 < 0.03) neu = '';
        else if (roll3 < 0.08) neu = old;
        else if (roll3 < 0.13 && old) neu = `${old}/${this.r.pick([...DIRS, ...FILES])}`;
        else if (roll3 < 0.35) neu = this.pick(snap, this.r.pick(['file', 'dir']), 0.9);
        else neu = this.fresh(this.r.pick(['file', 'file', 'dir']));
        paths.push(old, neu);
        const inside = old !== '' && neu.startsWith(old + '/');
        if (inside && !snap.exists(neu)) return null; // EINVAL with host paths: a deviation
        input = { command, old_path: this.spell(old), new_path: this.spell(neu) };
        break;
      }
    }
    // ENOTDIR with host paths (a deviation): no path below a regular file.
    if (paths.some((rel) => snap.hasFileAbove(rel))) return null;
    return input;
  }
  next(snap) {
    for (let i = 0; i < 500; i++) {
      const input = this.candidate(snap);
      if (input) return input;
    }
    throw new Error('the generator could not produce an input; check the skip rules');
  }
}

/** One long-running `mnemo tool` on a fresh store: one JSON line in, one tool_result line out. */
class MnemoTool {
  constructor(db) {
    this.db = db;
    this.proc = spawn(
      MNEMO,
      ['tool', '--profile', 'typescript-sdk', '--durability', 'buffered', '--no-start', '--db', db],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    this.waiting = [];
    this.lines = [];
    createInterface({ input: this.proc.stdout }).on('line', (line) => {
      const waiter = this.waiting.shift();
      if (waiter) waiter(line);
      else this.lines.push(line);
    });
  }
  call(input) {
    this.proc.stdin.write(JSON.stringify(input) + '\n');
    const line = this.lines.length
      ? Promise.resolve(this.lines.shift())
      : new Promise((resolve) => this.waiting.push(resolve));
    return line.then((text) => {
      const reply = JSON.parse(text);
      assert.equal(reply.type, 'tool_result');
      assert.ok(!('is_error' in reply) || reply.is_error === true, `is_error must be absent or true: ${text}`);
      return { content: reply.content, isError: reply.is_error === true };
    });
  }
  close() {
    this.proc.stdin.end();
    return new Promise((resolve) => this.proc.on('exit', resolve));
  }
  files() {
    const out = new Map();
    const listing = execFileSync(MNEMO, ['ls', '/', '--db', this.db], { encoding: 'utf-8' });
    for (const row of listing.split('\n').filter(Boolean)) {
      const match = /^\s*\S+ {2}(\/.*)$/.exec(row);
      assert.ok(match, `unexpected mnemo ls line: ${JSON.stringify(row)}`);
      out.set(match[1], execFileSync(MNEMO, ['cat', match[1], '--db', this.db]));
    }
    return out;
  }
}

/** A result with the size column of a listing's directory lines blanked. */
function normalise({ content, isError }) {
  if (isError || !content.startsWith(HEADER)) return { content, isError };
  const [header, ...rows] = content.split('\n');
  const out = rows.map((row, i) => {
    const tab = row.indexOf('\t');
    const path = row.slice(tab + 1);
    return tab >= 0 && (i === 0 || path.endsWith('/')) ? `<dir>\t${path}` : row;
  });
  return { content: [header, ...out].join('\n'), isError };
}

function sdkFiles(root) {
  const out = new Map();
  const walk = (dir, prefix) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) walk(full, `${prefix}/${entry.name}`);
      else out.set(`${prefix}/${entry.name}`, readFileSync(full));
    }
  };
  walk(root, ROOT);
  return out;
}

async function runSeed(seed, steps) {
  const base = mkdtempSync(join(tmpdir(), 'mnemo-ts-diff-'));
  const sdk = await BetaLocalFilesystemMemoryTool.init(join(base, 'sdk'));
  const tool = betaMemoryTool(sdk);
  const root = join(base, 'sdk', 'memories');
  const mnemo = new MnemoTool(join(base, 'store.mnemo.db'));
  const gen = new Generator(rng(seed));
  const tally = {};
  const inputs = [];
  try {
    for (let step = 0; step < steps; step++) {
      const input = gen.next(snapshot(root));
      inputs.push(input);
      const reference = await runRunnableTool(tool, structuredClone(input), { toolUse: undefined });
      prune(root);
      const got = await mnemo.call(input);
      const want = normalise({ content: reference.content, isError: reference.isError });
      const have = normalise(got);
      if (want.content !== have.content || want.isError !== have.isError) {
        const tail = inputs.slice(-8).map((i) => '  ' + JSON.stringify(i)).join('\n');
        assert.fail(
          `seed ${seed}, step ${step}: the results differ\n` +
            `input: ${JSON.stringify(input)}\n` +
            `sdk   (is_error=${want.isError}): ${JSON.stringify(reference.content)}\n` +
            `mnemo (is_error=${have.isError}): ${JSON.stringify(got.content)}\n` +
            `the last inputs:\n${tail}`,
        );
      }
      const key = `${input.command} ${want.isError ? 'error' : 'ok'}`;
      tally[key] = (tally[key] ?? 0) + 1;
    }
  } finally {
    await mnemo.close();
  }
  const theirs = sdkFiles(root);
  const ours = mnemo.files();
  assert.deepEqual([...ours.keys()].sort(), [...theirs.keys()].sort(), `seed ${seed}: the final trees hold other files`);
  for (const [path, bytes] of theirs) {
    assert.ok(ours.get(path).equals(bytes), `seed ${seed}: ${path} differs at the end`);
  }
  rmSync(base, { recursive: true, force: true });
  return tally;
}

test(`typescript-sdk profile against BetaLocalFilesystemMemoryTool: ${STEPS} random steps`, async (t) => {
  const started = Date.now();
  const per = Math.ceil(STEPS / SEEDS);
  const totals = {};
  for (let i = 0; i < SEEDS; i++) {
    const tally = await runSeed(SEED + i, per);
    for (const [k, v] of Object.entries(tally)) totals[k] = (totals[k] ?? 0) + v;
  }
  // Both outcomes of every command were reached, so the comparison covered them.
  for (const [command] of WEIGHTS) {
    assert.ok(totals[`${command} ok`] > 0, `no successful ${command} was compared`);
    assert.ok(totals[`${command} error`] > 0, `no failing ${command} was compared`);
  }
  const summary = Object.entries(totals).sort().map(([k, v]) => `${k} ${v}`).join(', ');
  t.diagnostic(`${per * SEEDS} steps, 0 mismatches, ${((Date.now() - started) / 1000).toFixed(1)} s; ${summary}`);
});
