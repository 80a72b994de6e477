// @ts-check
// The files the session may read, now: an agent's through its grants (`/v1/records`, which logs
// nothing), the operator's all. An agent's session lands here.
import { json } from './api.js';
import { agentName, el, show, text } from './dom.js';
import { signedIn } from './state.js';

/** @import { Records } from './api.js' */

export async function files() {
  const me = signedIn();
  const listing = /** @type {Records} */ (await json('records', { tag: 'memorytool' }));
  const rows = listing.files.map((f) => {
    const content = el('details', {}, el('summary', {}, 'content'));
    content.appendChild(text(f.content, 'pre'));
    return el('tr', {},
      el('td', {}, text(f.path)),
      el('td', {}, String(new TextEncoder().encode(f.content).length)),
      el('td', {}, String(f.created)),
      el('td', {}, String(f.updated)),
      el('td', {}, content));
  });
  const who = me.principal === 'operator' ? 'every file' : el('span', {}, 'what ', agentName(me.agent), '\'s grants let it read');
  show(el('h1', {}, 'Files'),
    el('p', { class: 'note' }, 'Now: ', who, me.store ? el('span', {}, ', in store ', text(me.store)) : ''),
    listing.files.length
      ? el('table', { id: 'files' },
        el('thead', {}, el('tr', {}, ['path', 'bytes', 'created', 'updated', ''].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows))
      : el('p', { class: 'note' }, 'No files you may read.'));
}
