// @ts-check
// The mnemo viewer: pages over the server's JSON read routes. This is the entry module
// (`index.html` loads it); it logs in, keeps the navigation bar, and shows the page the address
// names. Each page is a module of its own; `dom.js` builds nodes, `api.js` talks to the server,
// `router.js` makes and reads the addresses, `state.js` holds the session.
import { access } from './access.js';
import { CSRF_KEY, onSignedOut, request } from './api.js';
import { agentName, el, fail, reason, show, text } from './dom.js';
import { event } from './event.js';
import { files } from './files.js';
import { file } from './history.js';
import { loginPage, loginWith } from './login.js';
import { redact } from './redact.js';
import { link, onRender, parse, stopPolling } from './router.js';
import { state } from './state.js';
import { stores } from './stores.js';
import { timeline } from './timeline.js';
import { tree } from './tree.js';
import { verify } from './verify.js';

/** @import { Me } from './api.js' */

/**
 * The pages, by the view that names them in the address (`#/VIEW?QUERY`).
 * @type {Map<string, (params: Record<string, string>) => Promise<void>>}
 */
const PAGES = new Map(Object.entries({ timeline, event, file, tree, verify, stores, files, access, redact }));

async function start() {
  const hash = location.hash;
  let message = '';
  if (hash.startsWith('#login=')) {
    const secret = hash.slice('#login='.length);
    // Off the address bar and out of the history at once.
    history.replaceState(null, '', location.pathname);
    try {
      await loginWith({ link: secret });
    } catch (e) {
      message = reason(e);
    }
  }
  const response = await fetch('/ui/api/session', { credentials: 'same-origin', cache: 'no-store' });
  const csrf = sessionStorage.getItem(CSRF_KEY);
  if (!response.ok || !csrf) {
    state.me = null;
    loginPage(message || (response.ok ? 'This tab holds no session of its own: log in here (each tab logs in apart).' : ''), start);
    return;
  }
  /** @type {Me} */
  const me = Object.assign(await response.json(), { csrf });
  state.me = me;
  const who = /** @type {HTMLElement} */ (document.getElementById('who'));
  who.replaceChildren(me.principal === 'operator' ? 'operator' : el('span', {}, 'agent ', agentName(me.agent)), ' ',
    el('button', { id: 'logout', onclick: logout }, 'Log out'));
  const landing = me.principal !== 'operator' ? 'files' : me.data ? 'stores' : 'timeline';
  if (!location.hash.startsWith('#/')) location.replace('#/' + landing);
  await render();
}

async function logout() {
  try {
    await request('/ui/api/logout', { method: 'POST' });
  } catch {
    // gone already
  }
  sessionStorage.removeItem(CSRF_KEY);
  state.me = null;
  loginPage('Logged out.', start);
}

/** @param {Me} me */
function nav(me) {
  const bar = /** @type {HTMLElement} */ (document.getElementById('nav'));
  if (me.principal !== 'operator') {
    // An agent's session: the files its grants let it read, nothing of the operator's.
    bar.replaceChildren(link('files', {}, 'Files'));
    return;
  }
  const store = state.current.store;
  const items = [];
  if (me.data) items.push(link('stores', { store: undefined }, 'Stores'));
  if (!me.data || store) {
    items.push(link('timeline', {}, 'Timeline'), link('tree', {}, 'Tree'), link('verify', {}, 'Verify'));
  }
  if (me.principal === 'operator' && (!me.data || store)) items.push(link('access', {}, 'Access'), link('redact', {}, 'Redactions'));
  bar.replaceChildren(...items);
  if (me.data && store) bar.appendChild(el('span', { class: 'note' }, 'store ', text(store)));
}

async function render() {
  const me = state.me;
  if (!me) return;
  stopPolling();
  const { view, params } = parse();
  state.current = { view, params, store: params.store || null };
  nav(me);
  const page = PAGES.get(view);
  if (!page) { show(el('h1', {}, 'No such page')); return; }
  if (me.data && view !== 'stores' && !state.current.store && !me.store) { location.replace('#/stores'); return; }
  try {
    await page(params);
  } catch (e) {
    fail(e);
  }
}

onRender(render);
onSignedOut(start);
window.addEventListener('hashchange', () => { if (!location.hash.startsWith('#login=')) render(); else start(); });
document.addEventListener('DOMContentLoaded', () => { start().catch(fail); });
