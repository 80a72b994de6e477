// @ts-check
// The timeline: the log newest first, filtered, and live on its newest page.
import { head, lines } from './api.js';
import { agentName, el, formValues, show } from './dom.js';
import { pathsShown } from './log.js';
import { every, link, parse, render, route } from './router.js';

/** @import { LogEvent } from './api.js' */

const PAGE = 50;
const POLL_MS = 3000;

// A filtered timeline reads the log newest first in stretches of SCAN events, until a page is
// full or SEARCH_MS have passed, so a filter that matches little costs a bounded read.
const SCAN = 20000;
const SEARCH_MS = 150;

/**
 * A datetime-local value (the browser's local time) as milliseconds since the epoch.
 * @param {string | undefined} value
 */
function localMs(value) {
  if (!value) return undefined;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? ms : undefined;
}

/** @param {Record<string, string>} params */
export async function timeline(params) {
  const filters = {
    agent: params.agent, path: params.path, command: params.command,
    error: params.error === 'yes' ? 'true' : params.error === 'no' ? 'false' : undefined,
    since_ms: localMs(params.since), until_ms: localMs(params.until),
  };
  const filtered = Object.values(filters).some((v) => v !== undefined && v !== '');
  const top = await head();
  const newest = params.before === undefined;
  let before = newest ? top.seq + 1 : Math.max(1, Number(params.before));
  /** @type {LogEvent[]} */
  const events = [];
  const started = performance.now();
  while (before > 1 && events.length < PAGE) {
    const want = PAGE - events.length;
    const got = /** @type {LogEvent[]} */ (await lines('log', Object.assign({ before, limit: want, scan: filtered ? SCAN : undefined }, filters)));
    events.push(...got);
    if (!filtered || got.length === want) before = got.length ? got[got.length - 1].seq : before;
    else before = Math.max(1, before - SCAN);
    if (!filtered || performance.now() - started > SEARCH_MS) break;
  }

  /**
   * @param {string} name
   * @param {string} label
   * @param {string} [placeholder]
   * @param {string} [type]
   */
  const field = (name, label, placeholder, type) => el('label', {}, label,
    el('input', { name, type: type || 'text', value: params[name] || '', placeholder: placeholder || '' }));
  const errorSelect = el('select', { name: 'error' },
    el('option', { value: '' }, 'any'), el('option', { value: 'yes' }, 'errors'), el('option', { value: 'no' }, 'no errors'));
  errorSelect.value = params.error || '';
  const form = el('form', {
    class: 'filters', id: 'filters',
    onsubmit: (e) => {
      e.preventDefault();
      location.hash = route('timeline', formValues(form));
    },
  },
  field('agent', 'agent'), field('path', 'path', '/memories/...'), field('command', 'command', 'create, view, ...'),
  el('label', {}, 'result', errorSelect),
  field('since', 'from (local time)', '', 'datetime-local'), field('until', 'to', '', 'datetime-local'),
  el('button', { type: 'submit' }, 'Filter'));

  const rows = events.map((e) => el('tr', { class: e.is_error ? 'error' : '' },
    el('td', {}, link('event', { seq: e.seq }, String(e.seq))),
    el('td', { class: 'mono' }, e.time),
    el('td', {}, agentName(e.agent)),
    el('td', {}, e.command),
    el('td', {}, pathsShown(e.command, e.paths)),
    el('td', {}, e.is_error ? 'error' : 'ok')));
  const table = el('table', { id: 'timeline' },
    el('thead', {}, el('tr', {}, ['seq', 'time', 'agent', 'command', 'paths', 'result'].map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));

  const keep = { agent: params.agent, path: params.path, command: params.command, error: params.error, since: params.since, until: params.until };
  const pager = el('div', { class: 'pager', id: 'timeline-pager' });
  if (!newest) pager.appendChild(link('timeline', keep, 'newest'));
  if (before > 1) pager.appendChild(link('timeline', Object.assign({ before }, keep), filtered ? 'search older →' : 'older →'));
  const searched = filtered
    ? el('span', { class: 'note', id: 'searched' }, 'searched seqs ' + before + ' to ' + (newest ? top.seq : Number(params.before) - 1))
    : null;
  pager.appendChild(el('span', { class: 'note', id: 'head' }, 'head seq ' + top.seq));
  show(el('h1', {}, 'Timeline'), form, pager, searched,
    events.length ? table : el('p', { class: 'note' }, before > 1 ? 'No matching events in this stretch; search older.' : 'No events here.'));

  if (newest) {
    // Live: the newest page follows the head.
    every(POLL_MS, async () => {
      try {
        const now = await head();
        if (now.seq !== top.seq && parse().view === 'timeline') await render();
      } catch {
        // the next time
      }
    });
  }
}
