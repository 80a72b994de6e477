// @ts-check
// The tree: the files as they are now or were after any seq (time travel), each file's content
// on demand.
import { head, json, read } from './api.js';
import { el, reason, show, text } from './dom.js';
import { link, route } from './router.js';

/** @import { Listing } from './api.js' */

/** @param {Record<string, string>} params */
export async function tree(params) {
  const top = await head();
  const at = params.at ? Number(params.at) : null;
  const listing = /** @type {Listing} */ (await json('ls', { dir: params.dir || '/memories', at: at === null ? undefined : at }));
  const seqInput = el('input', { type: 'number', id: 'tree-at', min: 0, max: top.seq, value: at === null ? top.seq : at });
  const slider = el('input', { type: 'range', id: 'tree-slider', min: 0, max: top.seq, value: at === null ? top.seq : at });
  slider.addEventListener('input', () => { seqInput.value = slider.value; });
  slider.addEventListener('change', () => { location.hash = route('tree', { at: slider.value, dir: params.dir }); });
  const form = el('form', {
    class: 'filters', id: 'tree-form',
    onsubmit: (e) => { e.preventDefault(); location.hash = route('tree', { at: seqInput.value, dir: params.dir }); },
  }, el('label', {}, 'after seq', seqInput), el('label', {}, 'time travel', slider), el('button', { type: 'submit' }, 'Show'));
  const rows = listing.files.map((f) => {
    const content = el('details', {}, el('summary', {}, 'content'));
    content.addEventListener('toggle', async () => {
      if (!content.open || content.dataset.loaded) return;
      content.dataset.loaded = '1';
      try {
        const body = await read('cat', { path: f.path, at: at === null ? undefined : at });
        content.appendChild(text(body, 'pre'));
      } catch (e) {
        content.appendChild(el('p', { class: 'error' }, reason(e)));
      }
    });
    return el('tr', {},
      el('td', {}, link('file', { path: f.path }, text(f.path))),
      el('td', {}, String(f.bytes)),
      el('td', {}, link('event', { seq: f.created }, String(f.created))),
      el('td', {}, link('event', { seq: f.updated }, String(f.updated))),
      el('td', {}, content));
  });
  show(el('h1', {}, 'Tree ', at === null ? 'now (seq ' + top.seq + ')' : 'after seq ' + at),
    form,
    listing.files.length
      ? el('table', { id: 'tree' },
        el('thead', {}, el('tr', {}, ['path', 'bytes', 'created', 'updated', ''].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows))
      : el('p', { class: 'note' }, 'No files.'));
}
