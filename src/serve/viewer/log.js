// @ts-check
// How the log's events are shown, on the timeline, an event's page and a file's history.
import { diffBlock, el, text } from './dom.js';
import { link } from './router.js';

/** @import { Shown } from './api.js' */

// The admin commands, as the log names them (`mnemo log`'s command column).
const ADMIN = new Set(['acl-grant', 'acl-revoke', 'token-issue', 'token-revoke', 'config-set', 'store-label', 'redact', 'revert']);

/**
 * What an event is, by its command: an admin command, a write of the memory-stores API, or a
 * memory-tool call.
 * @param {string} command
 * @returns {'admin' | 'api' | 'tool'}
 */
export function kindOf(command) {
  if (ADMIN.has(command)) return 'admin';
  return command.startsWith('api.') ? 'api' : 'tool';
}

/**
 * The file paths of an event, which link to their history: a memory-tool call's or an API
 * write's. An admin command names a grant's prefix, a token, an agent, a setting or events,
 * which are no files.
 * @param {string} command
 * @param {string[]} paths
 */
export function filePaths(command, paths) {
  return kindOf(command) === 'admin' ? [] : paths.filter((p) => p.startsWith('/'));
}

/**
 * An event's paths, each linked to its file's history when it is one.
 * @param {string} command
 * @param {string[]} paths
 */
export function pathsShown(command, paths) {
  const files = filePaths(command, paths);
  return paths.map((p, i) => [i ? ', ' : '', files.includes(p) ? link('file', { path: p }, text(p)) : text(p)]);
}

/**
 * What an event changed, with a created or edited file's diff.
 * @param {Shown} shown
 */
export function changeOf(shown) {
  const c = shown.change;
  if (!c) return el('p', { class: 'note' }, 'No change: this call only read, or was refused.');
  switch (c.kind) {
    case 'created':
    case 'edited':
      return el('div', {}, el('p', {}, c.kind + ' ', link('file', { path: c.path }, text(c.path))), diffBlock(c.diff));
    case 'deleted':
      return el('div', {}, el('p', {}, 'deleted ', text(c.path)), el('ul', {}, c.files.map((f) => el('li', {}, text(f)))));
    case 'moved':
      return el('div', {}, el('p', {}, 'moved ', text(c.from), ' → ', link('file', { path: c.to }, text(c.to))),
        el('ul', {}, c.files.map(([a, b]) => el('li', {}, text(a), ' → ', text(b)))));
    case 'policy':
      return el('p', {}, 'policy: ', text(c.what));
    default:
      // A kind this viewer does not know yet (a newer server's): named as it is.
      return el('p', { class: 'note' }, 'change: ' + /** @type {{ kind: string }} */ (c).kind);
  }
}

/**
 * The file a change is about: the path it created, edited or deleted, or where it moved a file.
 * @param {Shown['change']} c
 */
export function changedPath(c) {
  if (!c) return undefined;
  if ('path' in c) return c.path;
  if ('to' in c) return c.to;
  return undefined;
}
