// @ts-check
// Navigation: the views live in the address's #fragment (`#/VIEW?QUERY`); links are built only
// from numbers and encodeURIComponent'd values under it.
import { el } from './dom.js';
import { state } from './state.js';

/** @import { Children } from './dom.js' */

/**
 * A query's values; null, undefined and '' are left out.
 * @typedef {Record<string, string | number | null | undefined>} Params
 */

/**
 * A view's address: on a server of many stores, in the store on show unless `params` names one.
 * @param {string} view
 * @param {Params} [params]
 */
export function route(view, params) {
  const query = new URLSearchParams();
  /** @type {Params} */
  const all = Object.assign({}, params || {});
  const store = state.current.store;
  if (state.me && state.me.data && store && all.store === undefined && view !== 'stores') all.store = store;
  for (const [k, v] of Object.entries(all)) {
    if (v !== undefined && v !== null && v !== '') query.set(k, String(v));
  }
  const q = query.toString();
  return '#/' + view + (q ? '?' + q : '');
}

/**
 * @param {string} view
 * @param {Params} params
 * @param {Children} label
 */
export function link(view, params, label) {
  return el('a', { href: route(view, params) }, label);
}

/** The view the address names, and its parameters. */
export function parse() {
  const hash = location.hash.slice(2);
  const [view, q] = hash.split('?');
  const params = Object.fromEntries(new URLSearchParams(q || ''));
  return { view: view || 'timeline', params };
}

/** @type {ReturnType<typeof setInterval> | null} */
let poll = null;

/**
 * Runs `act` every `ms` while the page on show stays (a new render stops it).
 * @param {number} ms
 * @param {() => Promise<void>} act
 */
export function every(ms, act) {
  stopPolling();
  poll = setInterval(act, ms);
}

export function stopPolling() {
  if (poll) { clearInterval(poll); poll = null; }
}

/** @type {() => Promise<void>} */
let renderer = async () => {};

/**
 * What shows the view the address names: the entry module's, given here so that pages can ask
 * for it without importing it.
 * @param {() => Promise<void>} render
 */
export function onRender(render) {
  renderer = render;
}

/** Shows the view the address names again. */
export function render() {
  return renderer();
}
