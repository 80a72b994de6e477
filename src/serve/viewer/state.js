// @ts-check
// What the viewer holds between pages: the logged-in session, and the page on show.

/** @import { Me } from './api.js' */

/**
 * The page on show: its view, its query's parameters, and on a server of many stores the store
 * it reads.
 * @typedef {{ view: string, params: Record<string, string>, store: string | null }} Current
 */

export const state = {
  /** @type {Me | null} the session, or null before a login and after a logout */
  me: null,
  /** @type {Current} */
  current: { view: 'timeline', params: {}, store: null },
};

/**
 * The session a page is shown to (pages are rendered only while there is one).
 * @returns {Me}
 */
export function signedIn() {
  if (!state.me) throw new Error('not logged in');
  return state.me;
}
