// @ts-check
// The stores of a server of many stores (`mnemo serve --data`), the operator's landing page.
import { request } from './api.js';
import { el, show, text } from './dom.js';

/** @import { StoreRow, StoresPage, Verified } from './api.js' */

const PAGE = 50;

/** @param {number | null | undefined} n */
function bytesShown(n) {
  if (n === undefined || n === null) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return (unit ? value.toFixed(1) : String(value)) + ' ' + units[unit];
}

/** @param {Verified | null | undefined} v */
function verifiedShown(v) {
  if (!v) return el('span', { class: 'note' }, 'not verified since the server started');
  return v.intact
    ? el('span', {}, el('span', { class: 'mark ok' }, 'INTACT'), ' to seq ' + v.head + ', ' + v.time)
    : el('span', {}, el('span', { class: 'mark bad' }, 'BROKEN'), ' at seq ' + v.first_bad + ', ' + v.time);
}

/** @param {StoreRow['holder']} h */
function holderShown(h) {
  if (!h) return '—';
  return el('span', { class: 'mono' }, text(h.node), h.alive ? '' : el('span', { class: 'note' }, ' (dead)'), ' epoch ' + h.epoch);
}

/** @param {Record<string, string>} params */
export async function stores(params) {
  const query = new URLSearchParams({ limit: String(PAGE), details: 'true' });
  if (params.after) query.set('after', params.after);
  const listing = /** @type {StoresPage} */ (JSON.parse(await request('/v1/stores?' + query.toString())));
  // A store made through the memory-stores API has a name and a description of its own (its
  // label) beside the name of its directory, which its routes use.
  /** @param {StoreRow} s */
  const named = (s) => {
    const label = s.label || { name: '', description: '' };
    const titled = label.name && label.name !== s.name;
    return el('td', { class: 'store-name' },
      el('a', { href: '#/timeline?store=' + encodeURIComponent(s.name) }, text(titled ? label.name : s.name)),
      titled ? el('span', { class: 'note mono' }, ' ', text(s.name)) : '',
      label.description ? el('div', { class: 'note store-description' }, text(label.description)) : '');
  };
  // A fleet's node (`mnemo serve --fleet`) says which node holds each store.
  const fleet = listing.stores.some((s) => s.holder);
  const rows = listing.stores.map((s) => el('tr', {},
    named(s),
    el('td', {}, s.open ? 'open' : 'closed'),
    el('td', { class: 'mono' }, s.head ? String(s.head.seq) : '—'),
    el('td', { class: 'mono' }, s.last_write || '—'),
    el('td', {}, bytesShown(s.bytes)),
    el('td', {}, verifiedShown(s.verified)),
    ...(fleet ? [el('td', {}, holderShown(s.holder))] : [])));
  const pager = el('div', { class: 'pager' });
  if (params.after) pager.appendChild(el('a', { href: '#/stores' }, 'first page'));
  if (listing.next) pager.appendChild(el('a', { href: '#/stores?after=' + encodeURIComponent(listing.next) }, 'more →'));
  show(el('h1', {}, 'Stores'),
    el('p', { class: 'note' }, listing.open + ' of at most ' + listing.max_open + ' open'),
    el('table', { id: 'stores' },
      el('thead', {}, el('tr', {}, ['store', 'state', 'head seq', 'last event', 'size', 'last verify', ...(fleet ? ['held by'] : [])].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows)),
    pager);
}
