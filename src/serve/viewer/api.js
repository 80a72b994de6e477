// @ts-check
// Talking to the server: the session's requests to the store's JSON routes (each with the
// session's CSRF token), and the shapes of the answers the pages read.
import { state } from './state.js';

/**
 * Who the session is: `GET /ui/api/session`'s answer, with the CSRF token its login gave this
 * tab.
 * @typedef {object} Me
 * @property {'operator' | 'agent'} principal
 * @property {string | null} agent the agent's name; null for the operator
 * @property {string | null} store on a server of many stores, the one an agent's session reads
 * @property {boolean} data whether the server is one of many stores (`mnemo serve --data`)
 * @property {string} csrf
 */

/**
 * `POST /ui/api/login`'s answer.
 * @typedef {{ principal: 'operator' | 'agent', agent: string | null, store: string | null, csrf: string }} LoggedIn
 */

/** @typedef {{ seq: number, hash: string }} Checkpoint */

/**
 * One event as `/v1/log` lists it (a line of `mnemo log --json`).
 * @typedef {object} LogEvent
 * @property {number} seq
 * @property {string} time
 * @property {string} agent
 * @property {string} command
 * @property {string[]} paths
 * @property {boolean} is_error
 */

/**
 * One event of a file's history (a line of `/v1/history`): a log line, and the file's paths in it.
 * @typedef {LogEvent & { file_paths?: string[] }} Version
 */

/**
 * What an event changed (`change` of `/v1/show`).
 * @typedef {{ kind: 'created' | 'edited', path: string, diff: string }
 *   | { kind: 'deleted', path: string, files: string[] }
 *   | { kind: 'moved', from: string, to: string, files: [string, string][] }
 *   | { kind: 'policy', what: string }} Change
 */

/**
 * The redaction that erased an event.
 * @typedef {{ by: string, seq: number, time: string, reason: string }} Redaction
 */

/**
 * One event whole: `/v1/show`'s answer.
 * @typedef {object} Shown
 * @property {number} seq
 * @property {string} time
 * @property {string} agent
 * @property {string} command
 * @property {boolean} is_error
 * @property {string | null} tool_use_id
 * @property {string[]} paths
 * @property {unknown} input the call as sent (for an admin command, the command: `{"Redact": {...}}`, ...)
 * @property {string} answer
 * @property {boolean} verified
 * @property {Redaction | null} [redaction]
 * @property {Change | null} change
 */

/**
 * `/v1/ls`'s answer.
 * @typedef {{ files: { path: string, bytes: number, created: number, updated: number }[] }} Listing
 */

/**
 * `/v1/records`'s answer: the files the session may read.
 * @typedef {{ files: { path: string, content: string, created: number, updated: number }[] }} Records
 */

/**
 * `/v1/verify`'s report.
 * @typedef {object} VerifyReport
 * @property {{ seq: number, kind: string, detail: string }[]} violations
 * @property {string | null} checkpoint
 * @property {number} events
 * @property {Checkpoint} head
 * @property {number} elapsed_ms
 * @property {string[]} notes
 */

/**
 * A line of `/v1/verify?progress=1`: how far the replay is, the report, or why it stopped.
 * @typedef {{ progress: { done: number, of: number } } | { error: string } | VerifyReport} VerifyLine
 */

/**
 * `/v1/replication` on a server that ships its log to a replica.
 * @typedef {object} Shipping
 * @property {string} url
 * @property {Checkpoint} replicated
 * @property {number} head
 * @property {number} lag_events
 * @property {number | null} behind_ms
 * @property {number} shipments
 * @property {boolean | null} [signed] null before the first shipment
 * @property {string | null} error
 */

/**
 * `/v1/replication` on a server that follows a replica.
 * @typedef {object} Following
 * @property {string} following
 * @property {Checkpoint} head
 * @property {number | null} replica_head
 * @property {number | null} lag_events
 * @property {number} updates
 * @property {string | null} error
 */

/**
 * The last verify a server ran on a store.
 * @typedef {{ intact: boolean, head: number, first_bad: number | null, time: string }} Verified
 */

/**
 * One store of `/v1/stores?details=true`.
 * @typedef {object} StoreRow
 * @property {string} name its directory's name, which its routes use
 * @property {boolean} open
 * @property {{ name: string, description: string } | null} [label] the name and description it was made with
 * @property {Checkpoint | null} [head]
 * @property {string | null} [last_write]
 * @property {number | null} [bytes]
 * @property {Verified | null} [verified]
 * @property {{ node: string, epoch: number, alive: boolean } | null} [holder] a fleet's store: the node its lease names
 */

/**
 * `/v1/stores`'s answer.
 * @typedef {{ stores: StoreRow[], next: string | null, open: number, max_open: number }} StoresPage
 */

/** @typedef {{ agent: string, prefix: string, access: string }} Grant */

/**
 * One agent token of `/v1/tokens`.
 * @typedef {object} TokenRow
 * @property {string} id
 * @property {string} agent
 * @property {string} label
 * @property {number} issued_seq
 * @property {string} issued_at
 * @property {string} issued_by
 * @property {{ seq: number, by: string } | null} revoked
 */

/**
 * The answer of an admin change (a grant, a revoke).
 * @typedef {{ seq: number | null, result: string }} Changed
 */

/**
 * `POST /v1/tokens`'s answer: the token, shown this once.
 * @typedef {Changed & { id: string, agent: string, token: string }} Issued
 */

/**
 * `POST /v1/redact`'s answer (with `dry_run`, what it would do).
 * @typedef {Changed & { seqs: number[], paths: string[], unsearched?: number[] }} RedactPlan
 */

/** @import { Params } from './router.js' */

/** Where the session's store tab keeps its CSRF token. */
export const CSRF_KEY = 'mnemo-csrf';

/** @type {() => Promise<void>} */
let signedOut = async () => {};

/**
 * What to do when the server says the session is over (a 401): the entry module's start, given
 * here so that this module need not import it.
 * @param {() => Promise<void>} then
 */
export function onSignedOut(then) {
  signedOut = then;
}

/** The prefix of the store's routes. */
export function base() {
  const me = state.me;
  if (me && me.data) {
    // An agent's session reads its token's store only.
    const store = me.store || state.current.store;
    if (!store) throw new Error('pick a store first');
    return '/v1/stores/' + encodeURIComponent(store) + '/';
  }
  return '/v1/';
}

/**
 * Why the server refused: its JSON `error`, else its whole answer.
 * @param {string} body
 */
export function refusal(body) {
  try {
    return JSON.parse(body).error || body;
  } catch {
    return body; // not JSON
  }
}

/**
 * @typedef {{ method?: string, headers?: Record<string, string>, body?: string }} Sent
 */

/**
 * The session's request to `url`: the answer's text, or an Error "STATUS: why".
 * @param {string} url
 * @param {Sent} [options]
 * @returns {Promise<string>}
 */
export async function request(url, options) {
  /** @type {Record<string, string>} */
  const headers = Object.assign({}, (options && options.headers) || {});
  if (state.me) headers['X-Mnemo-CSRF'] = state.me.csrf;
  /** @type {RequestInit} */
  const init = { credentials: 'same-origin', cache: 'no-store', ...options, headers };
  const response = await fetch(url, init);
  const body = await response.text();
  if (!response.ok) {
    const why = refusal(body);
    if (response.status === 401 && state.me) { state.me = null; await signedOut(); }
    throw new Error(response.status + ': ' + why);
  }
  return body;
}

/**
 * @param {Params} [params]
 */
function query(params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') query.set(k, String(v));
  }
  const q = query.toString();
  return q ? '?' + q : '';
}

/**
 * A GET of one of the store's routes: the answer's text.
 * @param {string} route
 * @param {Params} [params]
 */
export async function read(route, params) {
  return request(base() + route + query(params));
}

/**
 * A GET of one of the store's JSON routes: the answer, whose shape the caller names.
 * @param {string} route
 * @param {Params} [params]
 * @returns {Promise<unknown>}
 */
export async function json(route, params) {
  return JSON.parse(await read(route, params));
}

/**
 * A GET of one of the store's NDJSON routes: its lines, whose shape the caller names.
 * @param {string} route
 * @param {Params} [params]
 * @returns {Promise<unknown[]>}
 */
export async function lines(route, params) {
  const body = await read(route, params);
  return body.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

/** The store's head. */
export async function head() {
  return /** @type {Checkpoint} */ (await json('head'));
}

/**
 * A POST or DELETE of JSON to one of the store's routes: the answer's JSON.
 * @param {string} method
 * @param {string} route
 * @param {unknown} [body]
 * @returns {Promise<unknown>}
 */
export async function change(method, route, body) {
  /** @type {Sent} */
  const options = { method };
  if (body !== undefined) {
    options.headers = { 'Content-Type': 'application/json' };
    options.body = JSON.stringify(body);
  }
  return JSON.parse(await request(base() + route, options));
}

/**
 * The answer of an optional route, or null when the server answers 404 (it has no such thing).
 * @param {string} route
 * @returns {Promise<unknown>}
 */
export async function optional(route) {
  try {
    return await json(route);
  } catch (e) {
    if (e instanceof Error && e.message.startsWith('404:')) return null;
    throw e;
  }
}

/**
 * A GET of NDJSON whose lines are handed to `each` as they arrive.
 * @param {string} route
 * @param {Record<string, string>} params
 * @param {(line: unknown) => void} each
 */
export async function streamLines(route, params, each) {
  const query = new URLSearchParams(params).toString();
  /** @type {Record<string, string>} */
  const headers = {};
  if (state.me) headers['X-Mnemo-CSRF'] = state.me.csrf;
  const response = await fetch(base() + route + (query ? '?' + query : ''), {
    credentials: 'same-origin', cache: 'no-store', headers,
  });
  if (!response.ok) {
    const body = await response.text();
    throw new Error(response.status + ': ' + refusal(body));
  }
  if (!response.body) throw new Error('the server answered with no body');
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let held = '';
  for (;;) {
    const { done, value } = await reader.read();
    held += decoder.decode(value || new Uint8Array(), { stream: !done });
    const parts = held.split('\n');
    held = done ? '' : parts.pop() || '';
    for (const part of parts) if (part.trim() !== '') each(JSON.parse(part));
    if (done) return;
  }
}
