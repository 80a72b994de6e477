// @ts-check
// Logging in: by a one-time link's secret (`mnemo ui`), or with a token through the form.
import { CSRF_KEY, refusal } from './api.js';
import { el, reason, show } from './dom.js';

/** @import { LoggedIn } from './api.js' */

/**
 * Posts a link's secret or a token; the session's cookie comes back, and its CSRF token.
 * @param {{ link: string } | { token: string, store?: string }} body
 */
export async function loginWith(body) {
  const response = await fetch('/ui/api/login', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(refusal(await response.text()));
  // The session's CSRF token comes with the login's answer only, and stays with this tab: the
  // cookie reaches every server of this host, whatever its port, but this tab's storage only
  // this page.
  const session = /** @type {LoggedIn} */ (await response.json());
  sessionStorage.setItem(CSRF_KEY, session.csrf);
}

/**
 * The login form, with `message` above it; `then` runs once it has logged in.
 * @param {string} message
 * @param {() => Promise<void>} then
 */
export function loginPage(message, then) {
  const input = el('input', { type: 'password', id: 'token', autocomplete: 'off', placeholder: 'operator token' });
  const storeInput = el('input', { type: 'text', id: 'login-store', autocomplete: 'off', placeholder: 'store name' });
  const status = el('p', { id: 'login-error', class: 'error' }, message || '');
  const form = el('form', {
    id: 'login-form', class: 'login',
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        /** @type {{ token: string, store?: string }} */
        const body = { token: input.value };
        if (storeInput.value.trim()) body.store = storeInput.value.trim();
        await loginWith(body);
        input.value = '';
        await then();
      } catch (e) {
        status.textContent = reason(e);
      }
    },
  },
  el('label', { for: 'token' }, 'Token (the operator\'s, from the server file, or an agent token)'),
  input,
  el('label', { for: 'login-store' }, 'Store (an agent token of a server of many stores: the store that issued it)'),
  storeInput,
  el('button', { type: 'submit' }, 'Log in'));
  document.getElementById('nav')?.replaceChildren();
  document.getElementById('who')?.replaceChildren();
  show(el('h1', {}, 'Log in to the mnemo viewer'),
    el('p', { class: 'note' }, 'Run `mnemo ui` for a one-time login link, or give a token.'),
    status, form);
}
