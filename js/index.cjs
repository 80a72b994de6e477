'use strict';
// mnemo-db: the Node client of a Mnemo store. Plain CommonJS with no dependencies; index.mjs is
// the ES module face of this same file, and index.d.cts / index.d.mts are the types.

const { execFile } = require('node:child_process');
const http = require('node:http');

/** The profile `memoryTool()` asks for when none is given. */
const DEFAULT_PROFILE = 'typescript-sdk';
const PROFILES = ['spec', 'python-sdk', 'typescript-sdk'];
const COMMANDS = ['view', 'create', 'str_replace', 'insert', 'delete', 'rename'];

/** Every error this package throws. `status` is the HTTP status when a server answered. */
class MnemoError extends Error {
  constructor(message, status) {
    super(message);
    this.name = new.target.name;
    this.status = status;
  }
}
/** No server answered at the URL (not running, wrong port), or `mnemo link` could not start one. */
class ServerUnreachable extends MnemoError {}
/** 400: the request was not one the server takes. */
class BadRequest extends MnemoError {}
/** 401: no token, a wrong one, or one revoked. */
class Unauthorized extends MnemoError {}
/** 403: the token's agent may not do this (an agent token on an operator's route, a grant). */
class Forbidden extends MnemoError {}
/** 404: no such thing (an unknown token id, a seq or store the server does not hold). */
class NotFound extends MnemoError {}
/** 409: the request conflicts with the state of the server. */
class Conflict extends MnemoError {}
/** 409 on a memory call: the server answers with other settings (its profile, root, limits). */
class SettingsRefused extends Conflict {}
/** 413: the request is over the server's size limit; nothing was read or recorded. */
class PayloadTooLarge extends MnemoError {}
/** 5xx, or an answer that is not what the route gives. */
class ServerError extends MnemoError {}

const BY_STATUS = { 400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: PayloadTooLarge };

function errorFor(status, text, route) {
  let message = text;
  try {
    const body = JSON.parse(text);
    if (body && typeof body.error === 'string') message = body.error;
    else if (body && body.error && typeof body.error.message === 'string') message = body.error.message;
  } catch {
    // not JSON: the text as it came
  }
  const Kind = status === 409 && route === 'memory' ? SettingsRefused : BY_STATUS[status] ?? ServerError;
  return new Kind(`${route}: the server answered ${status}: ${message}`, status);
}

function checkString(value, what) {
  if (typeof value !== 'string' || value === '') {
    throw new TypeError(`${what} must be a non-empty string, got ${value === '' ? 'an empty string' : typeof value}`);
  }
}

function checkProfile(profile) {
  if (!PROFILES.includes(profile)) {
    throw new TypeError(`profile must be one of ${PROFILES.join(', ')}, got ${JSON.stringify(profile)}`);
  }
}

/** Headers that name the agent: as it is when it is visible ASCII, else percent-encoded. */
function agentHeaders(agent) {
  if (agent === undefined) return {};
  checkString(agent, 'agent');
  return /^[\x21-\x7e]+$/.test(agent) ? { 'X-Mnemo-Agent': agent } : { 'X-Mnemo-Agent-Encoded': encodeURIComponent(agent) };
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

function ndjson(text) {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/** Runs `mnemo link` for the store at `dbPath`: the URL and operator token of its server. */
function link(bin, dbPath, profile, idleExit) {
  const args = ['link', '--db', dbPath, '--profile', profile];
  if (idleExit !== undefined) args.push('--idle-exit', String(idleExit));
  return new Promise((resolve, reject) => {
    execFile(bin, args, (err, stdout, stderr) => {
      if (err) {
        const why = err.code === 'ENOENT' ? `no mnemo binary at ${bin} (set MNEMO_BIN, or put mnemo on PATH)` : stderr.trim() || err.message;
        reject(new ServerUnreachable(`cannot reach or start the server of ${dbPath}: ${why}`));
        return;
      }
      try {
        const found = JSON.parse(stdout);
        checkString(found.url, 'the url mnemo link printed');
        checkString(found.token, 'the token mnemo link printed');
        resolve(found);
      } catch {
        reject(new ServerError(`mnemo link printed no server for ${dbPath}`));
      }
    });
  });
}

/**
 * The client of one store behind a `mnemo serve`: `connect` to a URL with a token, or `open` a
 * local store (its server is found, or started, by the `mnemo` binary).
 */
class MnemoClient {
  #url;
  #token;
  #agent;
  #prefix;
  #relink;
  #attached;

  /** Use `MnemoClient.connect` or `MnemoClient.open`. */
  constructor(url, token, { store, agent, relink } = {}) {
    this.#url = url.replace(/\/+$/, '');
    this.#token = token;
    this.#agent = agent;
    this.#prefix = store === undefined ? '' : `/v1/stores/${encodeURIComponent(store)}`;
    this.#relink = relink;
  }

  /** A client of the server at `url`, presenting `token` (an agent token, or the operator's). */
  static connect(url, { token, store, agent } = {}) {
    checkString(url, 'url');
    if (!/^https?:\/\//.test(url)) throw new TypeError(`url must start with http:// or https://, got ${JSON.stringify(url)}`);
    checkString(token, 'token');
    if (store !== undefined) checkString(store, 'store');
    agentHeaders(agent);
    return new this(url, token, { store, agent });
  }

  /**
   * A client of the local store at `dbPath` (created if it does not exist), acting as `agent`:
   * through the server that holds it, or one started now with `profile` (`mnemo link`, from
   * `MNEMO_BIN` or `PATH`). The client stays attached, so the server outlives its idle time
   * while this process runs; `close()` lets it go.
   */
  static async open(dbPath, { agent, profile = DEFAULT_PROFILE, bin = process.env.MNEMO_BIN || 'mnemo', idleExit } = {}) {
    checkString(dbPath, 'dbPath');
    checkProfile(profile);
    agentHeaders(agent);
    const relink = () => link(bin, dbPath, profile, idleExit);
    const found = await relink();
    const client = new this(found.url, found.token, { agent, relink });
    client.#attach();
    return client;
  }

  /** The server's base URL. */
  get url() {
    return this.#url;
  }

  /** The agent calls are recorded under (undefined: the token's, or the server's default). */
  get agent() {
    return this.#agent;
  }

  /** Stops holding the server (it exits after its idle time once no client is attached). */
  close() {
    this.#attached?.destroy();
    this.#attached = undefined;
  }

  /** A connection the server counts as a client, held without keeping this process alive. */
  #attach() {
    const request = http.get(`${this.#url}${this.#prefix}/v1/attach`, { headers: this.#headers() });
    request.on('socket', (socket) => socket.unref());
    request.on('response', (response) => response.resume());
    request.on('error', () => {});
    this.#attached = request;
  }

  #headers() {
    return { Authorization: `Bearer ${this.#token}`, ...agentHeaders(this.#agent) };
  }

  async #fetch(method, path, { body, route = path } = {}) {
    const init = { method, headers: this.#headers() };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
    let response;
    try {
      response = await fetch(`${this.#url}${this.#prefix}${path}`, init);
    } catch (err) {
      const cause = err?.cause?.code ?? err?.cause?.message ?? err.message;
      const unreachable = new ServerUnreachable(`${route}: no server answered at ${this.#url} (${cause})`);
      // Refused: the request never reached a server, so sending it again cannot run it twice.
      unreachable.refused = err?.cause?.code === 'ECONNREFUSED';
      throw unreachable;
    }
    const text = await response.text();
    if (!response.ok) throw errorFor(response.status, text, route);
    return text;
  }

  /**
   * A request; when the server of an opened store is gone (the connection was refused, so
   * nothing was sent), `mnemo link` starts it again and the request goes to the new one, once.
   */
  async #request(method, path, options) {
    try {
      return await this.#fetch(method, path, options);
    } catch (err) {
      if (!(err instanceof ServerUnreachable) || !err.refused || !this.#relink) throw err;
      const found = await this.#relink();
      this.#url = found.url.replace(/\/+$/, '');
      this.#token = found.token;
      this.close();
      this.#attach();
      return this.#fetch(method, path, options);
    }
  }

  async #json(method, path, options) {
    const text = await this.#request(method, path, options);
    try {
      return JSON.parse(text);
    } catch {
      throw new ServerError(`${options?.route ?? path}: the answer is not JSON`);
    }
  }

  /**
   * One memory-tool call (a `tool_use` block or its bare input), answered and recorded by the
   * store: the `tool_result` block, byte for byte what `mnemo tool` prints.
   */
  async call(input, { profile } = {}) {
    if (profile !== undefined) checkProfile(profile);
    return this.#json('POST', `/v1/memory${query({ profile })}`, { body: input, route: 'memory' });
  }

  /**
   * The handlers `betaMemoryTool` from `@anthropic-ai/sdk/helpers/beta/memory` takes: each call
   * goes to the store, and the SDK's tool runner sends the model exactly the text the store
   * answered (an error as `is_error`). `profile` (default `typescript-sdk`) must be the server's,
   * else every call fails with `SettingsRefused`.
   */
  memoryTool({ profile = DEFAULT_PROFILE } = {}) {
    checkProfile(profile);
    const handlers = {};
    for (const command of COMMANDS) {
      handlers[command] = async (input) => {
        const result = await this.call(input, { profile });
        if (typeof result?.content !== 'string') throw new ServerError('memory: the answer is not a tool_result');
        if (result.is_error !== true) return result.content;
        throw await this.constructor.toolError(result.content);
      };
    }
    return handlers;
  }

  /**
   * The error a handler throws for an error result whose text is `content`, such that the SDK's
   * tool runner sends `content` unchanged: the runner sends `Error: ` and a plain error's
   * message, and a `ToolError`'s content as it is.
   */
  static async toolError(content) {
    if (content.startsWith('Error: ')) return new Error(content.slice('Error: '.length));
    let ToolError;
    try {
      ToolError = await this.sdkToolError();
    } catch {
      // no SDK: the runner (whatever it is) gets a plain error
    }
    return ToolError ? new ToolError(content) : new Error(content);
  }

  /** The SDK's `ToolError` class, as a CommonJS program loads it (index.mjs: as an ES module). */
  static async sdkToolError() {
    return require('@anthropic-ai/sdk/lib/tools/ToolError').ToolError;
  }

  /** The head of the log: `{seq, hash, checkpoint}`. */
  head() {
    return this.#json('GET', '/v1/head');
  }

  /** Replays the log and proves it (`mnemo verify --json`); `expect`: a checkpoint `SEQ:HASH`. */
  verify({ expect } = {}) {
    return this.#json('GET', `/v1/verify${query({ expect })}`, { route: 'verify' });
  }

  /** The events, as `mnemo log --json` lists them. */
  async log({ agent, path, from, limit } = {}) {
    return ndjson(await this.#request('GET', `/v1/log${query({ agent, path, from, limit })}`, { route: 'log' }));
  }

  /** The files under `dir` (default the root; `/` for the whole store), now or after event `at`. */
  ls({ dir, at } = {}) {
    return this.#json('GET', `/v1/ls${query({ dir, at })}`, { route: 'ls' });
  }

  /** A file's content, now or after event `at`. */
  cat(path, { at } = {}) {
    checkString(path, 'path');
    return this.#request('GET', `/v1/cat${query({ path, at })}`, { route: 'cat' });
  }

  /** The events that touched `path`, as `mnemo history --json`. */
  async history(path) {
    checkString(path, 'path');
    return ndjson(await this.#request('GET', `/v1/history${query({ path })}`, { route: 'history' }));
  }

  /** One event whole, as `mnemo show --json`. */
  show(seq) {
    if (!Number.isInteger(seq) || seq < 1) throw new TypeError(`seq must be a whole number from 1, got ${seq}`);
    return this.#json('GET', `/v1/show${query({ seq })}`, { route: 'show' });
  }

  /** The files changed between two events, as `mnemo diff --json`. */
  async diff({ from, to, path } = {}) {
    return ndjson(await this.#request('GET', `/v1/diff${query({ from, to, path })}`, { route: 'diff' }));
  }

  /** The access grants: `list()`, `grant({agent, prefix, access})`, `revoke({agent, prefix})`. */
  get acl() {
    return {
      list: async () => ndjson(await this.#request('GET', '/v1/acl', { route: 'acl' })),
      grant: ({ agent, prefix, access }) =>
        this.#json('POST', '/v1/acl', { body: { action: 'grant', agent, prefix, access }, route: 'acl' }),
      revoke: ({ agent, prefix }) => this.#json('POST', '/v1/acl', { body: { action: 'revoke', agent, prefix }, route: 'acl' }),
    };
  }

  /** Agent tokens: `list()`, `create({agent, label})` (the token is in the answer, once), `revoke(id)`. */
  get tokens() {
    return {
      list: async () => ndjson(await this.#request('GET', '/v1/tokens', { route: 'tokens' })),
      create: ({ agent, label }) => this.#json('POST', '/v1/tokens', { body: { agent, label }, route: 'tokens' }),
      revoke: (id) => {
        checkString(id, 'id');
        return this.#json('DELETE', `/v1/tokens/${encodeURIComponent(id)}`, { route: 'tokens' });
      },
    };
  }

  /** Erases events for good (by seq, path or text), recorded as a chained admin event. */
  redact({ reason, seqs, paths, texts, dryRun } = {}) {
    checkString(reason, 'reason');
    const body = { reason, seqs, paths, texts, dry_run: dryRun };
    return this.#json('POST', '/v1/redact', { body, route: 'redact' });
  }

  /**
   * Where the content event `seq` wrote went (or all the file `path` held right after it), as
   * `mnemo trace --json`: the later events shown it, and those that carried it on or took it out.
   * The operator's only.
   */
  trace(seq, { path } = {}) {
    if (!Number.isInteger(seq) || seq < 1) throw new TypeError(`seq must be a whole number from 1, got ${seq}`);
    if (path !== undefined) checkString(path, 'path');
    return this.#json('GET', `/v1/trace${query({ seq, path })}`, { route: 'trace' });
  }

  /**
   * Puts files back by appending ordinary calls, recorded as a revert, as `mnemo revert`:
   * `{ to, path }` (the files under `path`, else every file, as after event `to`) or
   * `{ agent, since }` (the files `agent` changed after `since`). A dry run, writing nothing,
   * unless `dryRun: false`; conflicts are refused unless `force`. The operator's only.
   */
  revert({ to, path, agent, since, dryRun = true, force = false } = {}) {
    const byAgent = agent !== undefined || since !== undefined;
    if (byAgent === (to !== undefined) || (byAgent && (agent === undefined || since === undefined || path !== undefined))) {
      throw new TypeError('revert takes { to, path } or { agent, since }');
    }
    const body = { to, path, agent, since, dry_run: dryRun, force };
    return this.#json('POST', '/v1/revert', { body, route: 'revert' });
  }
}

module.exports = {
  MnemoClient,
  MnemoError,
  ServerUnreachable,
  BadRequest,
  Unauthorized,
  Forbidden,
  NotFound,
  Conflict,
  SettingsRefused,
  PayloadTooLarge,
  ServerError,
};
