// @ts-check
// A file's history (the `file` view): every event that touched it, followed through renames,
// each with its change on demand.
import { json, lines } from './api.js';
import { agentName, el, reason, show, text } from './dom.js';
import { changeOf } from './log.js';
import { link } from './router.js';

/** @import { Shown, Version } from './api.js' */

/** @param {Record<string, string>} params */
export async function file(params) {
  const path = params.path;
  const versions = /** @type {Version[]} */ (await lines('history', { path }));
  const rows = versions.map((v) => {
    const details = el('details', {}, el('summary', {}, 'diff'));
    details.addEventListener('toggle', async () => {
      if (!details.open || details.dataset.loaded) return;
      details.dataset.loaded = '1';
      try {
        const shown = /** @type {Shown} */ (await json('show', { seq: v.seq }));
        details.appendChild(changeOf(shown));
      } catch (e) {
        details.appendChild(el('p', { class: 'error' }, reason(e)));
      }
    });
    return el('tr', { class: v.is_error ? 'error' : '' },
      el('td', {}, link('event', { seq: v.seq }, String(v.seq))),
      el('td', { class: 'mono' }, v.time),
      el('td', {}, agentName(v.agent)),
      el('td', {}, v.command),
      el('td', {}, (v.file_paths || []).map((p, i) => [i ? ', ' : '', text(p)])),
      el('td', {}, details));
  });
  show(el('h1', {}, 'History of ', text(path)),
    el('p', { class: 'note' }, 'Every event that touched this file, followed through renames.'),
    el('table', { id: 'history' },
      el('thead', {}, el('tr', {}, ['seq', 'time', 'agent', 'command', 'file as', 'change'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows)));
}
