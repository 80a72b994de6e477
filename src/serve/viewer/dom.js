// @ts-check
// Building the page. Every text from the store (memory contents, paths, agent names, answers) is
// put in with textContent or a text node, never as HTML; links go only to this page's own views.

const INVISIBLE = /[\u200B-\u200F\u202A-\u202E\u2060-\u2069\uFEFF]/;

/**
 * One thing a node is built of: text (a string or a number, as a text node), a node, or nothing
 * (null, undefined or false, left out).
 * @typedef {Node | string | number | null | undefined | false} Child
 */

/**
 * What a node is built of: children, or lists of them, or lists of such lists (as a page's
 * `map`s make them).
 * @typedef {Child | Child[] | (Child | Child[])[]} Children
 */

/**
 * A new element's attributes: `class`, `href` (only `#/...`), `on...` listeners, and the rest as
 * attributes (true as present, and null, undefined or false left out).
 * @typedef {{
 *   [name: string]: unknown,
 *   onclick?: (event: MouseEvent) => unknown,
 *   onsubmit?: (event: SubmitEvent) => unknown,
 * }} Attrs
 */

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Children} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = String(value);
    else if (key === 'href') node.setAttribute('href', safeHref(value));
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), /** @type {EventListener} */ (value));
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) append(node, child);
  return node;
}

/**
 * @param {Node} node
 * @param {Children} child
 */
function append(node, child) {
  if (child === undefined || child === null || child === false) return;
  if (Array.isArray(child)) {
    for (const each of child) append(node, each);
  } else {
    node.appendChild(typeof child === 'string' || typeof child === 'number'
      ? document.createTextNode(String(child)) : child);
  }
}

/**
 * Only links to this page's own views.
 * @param {unknown} value
 */
function safeHref(value) {
  const text = String(value);
  return text.startsWith('#/') ? text : '#/';
}

/**
 * A text from the store: shown as written, isolated from the page's direction, and flagged when
 * it holds invisible or direction-changing characters.
 * @param {unknown} value
 * @param {'span' | 'pre'} [tag]
 * @returns {HTMLElement}
 */
export function text(value, tag) {
  const node = el(tag || 'span', { class: 'text' });
  node.textContent = String(value);
  return flagged(node, value);
}

/**
 * The node, with a mark beside it when `value` holds characters that hide or reorder text.
 * @param {HTMLElement} node
 * @param {unknown} value
 * @returns {HTMLElement}
 */
export function flagged(node, value) {
  if (!INVISIBLE.test(String(value))) return node;
  const mark = el('span', { class: 'warn', title: 'holds invisible or bidi control characters: what shows is not all there is, or not in its order' }, 'hidden or reordering characters');
  return node.tagName === 'PRE' ? el('div', {}, mark, node) : el('span', {}, node, ' ', mark);
}

/** @param {unknown} name */
export function agentName(name) {
  const node = el('bdi', { class: 'agent' });
  node.textContent = String(name);
  return flagged(node, name);
}

/**
 * Puts `nodes` in the page's main area, in place of what was there.
 * @param {...(Node | null | undefined | false)} nodes
 */
export function show(...nodes) {
  const app = /** @type {HTMLElement} */ (document.getElementById('app'));
  app.replaceChildren(...nodes.filter((n) => n !== undefined && n !== null && n !== false));
}

/**
 * What went wrong, in words.
 * @param {unknown} e
 */
export function reason(e) {
  return e instanceof Error ? e.message : String(e);
}

/** @param {unknown} e */
export function fail(e) {
  show(el('h1', {}, 'Something went wrong'), el('p', { class: 'error' }, reason(e)));
}

/** @param {string} diff */
export function diffBlock(diff) {
  const pre = el('pre', { class: 'diff text' });
  for (const line of String(diff).split('\n')) {
    let cls = '';
    if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    else if (line.startsWith('@@')) cls = 'hunk';
    const span = el('span', { class: cls });
    span.textContent = line + '\n';
    pre.appendChild(span);
  }
  return flagged(pre, diff);
}

/**
 * @param {string} id
 * @param {string[]} heads
 * @param {Children} rows
 */
export function table(id, heads, rows) {
  return el('table', { id },
    el('thead', {}, el('tr', {}, heads.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
}

/**
 * A form's fields, by name (the viewer's forms hold no files).
 * @param {HTMLFormElement} form
 * @returns {Record<string, string>}
 */
export function formValues(form) {
  return Object.fromEntries([...new FormData(form)].map(([name, value]) => [name, String(value)]));
}

/**
 * A button that acts only after a second, explicit click on the button that replaces it, which
 * says what will happen (`question`); Cancel puts the first back.
 * @param {string} id
 * @param {string} label
 * @param {Children} question
 * @param {() => Promise<unknown>} act
 */
export function confirming(id, label, question, act) {
  const box = el('span', { class: 'confirm' });
  const first = el('button', {
    type: 'button', id,
    onclick: () => {
      const yes = el('button', {
        type: 'button', id: id + '-confirm', class: 'danger',
        onclick: async () => {
          yes.disabled = true;
          no.disabled = true;
          await act();
        },
      }, question);
      const no = el('button', { type: 'button', onclick: () => box.replaceChildren(first) }, 'Cancel');
      box.replaceChildren(yes, ' ', no);
    },
  }, label);
  box.appendChild(first);
  return box;
}

/** @param {string} title */
export function operatorOnly(title) {
  show(el('h1', {}, title),
    el('p', { class: 'note', id: 'operator-only' }, 'This page is for the operator: log in with the operator\'s token (or a link from `mnemo ui`). An agent session reaches only its own memory, and the server refuses it these routes.'));
}
