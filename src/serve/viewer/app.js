// The mnemo viewer: pages over the server's JSON read routes.
//
// Every text from the store (memory contents, paths, agent names, answers) is put in the page
// with textContent or a text node, never as HTML; links are built only from numbers and
// encodeURIComponent'd values under this page's own #fragment.
'use strict';

(function () {
  const PAGE = 50;
  const POLL_MS = 3000;
  const INVISIBLE = /[\u200B-\u200F\u202A-\u202E\u2060-\u2069\uFEFF]/;
  let me = null; // {principal, agent, csrf, data, store}
  const CSRF_KEY = 'mnemo-csrf';
  let poll = null;

  // ---- building the page ----

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'href') node.setAttribute('href', safeHref(value));
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.appendChild(typeof child === 'string' || typeof child === 'number'
        ? document.createTextNode(String(child)) : child);
    }
    return node;
  }

  // Only links to this page's own views.
  function safeHref(value) {
    const text = String(value);
    return text.startsWith('#/') ? text : '#/';
  }

  // A text from the store: shown as written, isolated from the page's direction, and flagged
  // when it holds invisible or direction-changing characters.
  function text(value, tag) {
    const node = el(tag || 'span', { class: 'text' });
    node.textContent = String(value);
    return flagged(node, value);
  }

  // The node, with a mark beside it when `value` holds characters that hide or reorder text.
  function flagged(node, value) {
    if (!INVISIBLE.test(String(value))) return node;
    const mark = el('span', { class: 'warn', title: 'holds invisible or bidi control characters: what shows is not all there is, or not in its order' }, 'hidden or reordering characters');
    return node.tagName === 'PRE' ? el('div', {}, mark, node) : el('span', {}, node, ' ', mark);
  }

  function agentName(name) {
    const node = el('bdi', { class: 'agent' });
    node.textContent = String(name);
    return flagged(node, name);
  }

  function show(...nodes) {
    const app = document.getElementById('app');
    app.replaceChildren(...nodes.filter((n) => n !== undefined && n !== null && n !== false));
  }

  function fail(e) {
    show(el('h1', {}, 'Something went wrong'), el('p', { class: 'error' }, String(e && e.message || e)));
  }

  function link(view, params, label) {
    return el('a', { href: route(view, params) }, label);
  }

  // The admin commands, as the log names them (`mnemo log`'s command column).
  const ADMIN = new Set(['acl-grant', 'acl-revoke', 'token-issue', 'token-revoke', 'config-set', 'redact']);

  // What an event is, by its command: an admin command, a write of the memory-stores API, or a
  // memory-tool call.
  function kindOf(command) {
    if (ADMIN.has(command)) return 'admin';
    return command.startsWith('api.') ? 'api' : 'tool';
  }

  // The file paths of an event, which link to their history: a memory-tool call's or an API
  // write's. An admin command names a grant's prefix, a token, an agent, a setting or events,
  // which are no files.
  function filePaths(command, paths) {
    return kindOf(command) === 'admin' ? [] : paths.filter((p) => p.startsWith('/'));
  }

  // An event's paths, each linked to its file's history when it is one.
  function pathsShown(command, paths) {
    const files = filePaths(command, paths);
    return paths.map((p, i) => [i ? ', ' : '', files.includes(p) ? link('file', { path: p }, text(p)) : text(p)]);
  }

  function route(view, params) {
    const query = new URLSearchParams();
    const all = Object.assign({}, params || {});
    if (me && me.data && current.store && all.store === undefined && view !== 'stores') all.store = current.store;
    for (const [k, v] of Object.entries(all)) {
      if (v !== undefined && v !== null && v !== '') query.set(k, String(v));
    }
    const q = query.toString();
    return '#/' + view + (q ? '?' + q : '');
  }

  function diffBlock(diff) {
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

  // ---- talking to the server ----

  let current = { view: 'timeline', params: {}, store: null };

  function base() {
    if (me && me.data) {
      // An agent's session reads its token's store only.
      const store = me.store || current.store;
      if (!store) throw new Error('pick a store first');
      return '/v1/stores/' + encodeURIComponent(store) + '/';
    }
    return '/v1/';
  }

  async function request(url, options) {
    const opts = Object.assign({ credentials: 'same-origin', cache: 'no-store' }, options || {});
    opts.headers = Object.assign({}, opts.headers || {});
    if (me) opts.headers['X-Mnemo-CSRF'] = me.csrf;
    const response = await fetch(url, opts);
    const body = await response.text();
    if (!response.ok) {
      let why = body;
      try { why = JSON.parse(body).error || body; } catch (_) { /* not JSON */ }
      if (response.status === 401 && me) { me = null; await start(); }
      throw new Error(response.status + ': ' + why);
    }
    return body;
  }

  async function read(route, params) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null && v !== '') query.set(k, String(v));
    }
    const q = query.toString();
    return request(base() + route + (q ? '?' + q : ''));
  }

  async function json(route, params) {
    return JSON.parse(await read(route, params));
  }

  async function lines(route, params) {
    const body = await read(route, params);
    return body.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
  }

  // ---- login ----

  async function loginWith(body) {
    const response = await fetch('/ui/api/login', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      let why = await response.text();
      try { why = JSON.parse(why).error; } catch (_) { /* not JSON */ }
      throw new Error(why);
    }
    // The session's CSRF token comes with the login's answer only, and stays with this tab: the
    // cookie reaches every server of this host, whatever its port, but this tab's storage only
    // this page.
    const session = await response.json();
    sessionStorage.setItem(CSRF_KEY, session.csrf);
  }

  function loginPage(message) {
    const input = el('input', { type: 'password', id: 'token', autocomplete: 'off', placeholder: 'operator token' });
    const storeInput = el('input', { type: 'text', id: 'login-store', autocomplete: 'off', placeholder: 'store name' });
    const status = el('p', { id: 'login-error', class: 'error' }, message || '');
    const form = el('form', {
      id: 'login-form', class: 'login',
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          const body = { token: input.value };
          if (storeInput.value.trim()) body.store = storeInput.value.trim();
          await loginWith(body);
          input.value = '';
          await start();
        } catch (e) {
          status.textContent = e.message;
        }
      },
    },
    el('label', { for: 'token' }, 'Token (the operator\'s, from the server file, or an agent token)'),
    input,
    el('label', { for: 'login-store' }, 'Store (an agent token of a server of many stores: the store that issued it)'),
    storeInput,
    el('button', { type: 'submit' }, 'Log in'));
    document.getElementById('nav').replaceChildren();
    document.getElementById('who').replaceChildren();
    show(el('h1', {}, 'Log in to the mnemo viewer'),
      el('p', { class: 'note' }, 'Run `mnemo ui` for a one-time login link, or give a token.'),
      status, form);
  }

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
        message = e.message;
      }
    }
    const response = await fetch('/ui/api/session', { credentials: 'same-origin', cache: 'no-store' });
    const csrf = sessionStorage.getItem(CSRF_KEY);
    if (!response.ok || !csrf) {
      me = null;
      loginPage(message || (response.ok ? 'This tab holds no session of its own: log in here (each tab logs in apart).' : ''));
      return;
    }
    me = await response.json();
    me.csrf = csrf;
    const who = document.getElementById('who');
    who.replaceChildren(me.principal === 'operator' ? 'operator' : el('span', {}, 'agent ', agentName(me.agent)), ' ',
      el('button', { id: 'logout', onclick: logout }, 'Log out'));
    const landing = me.principal !== 'operator' ? 'files' : me.data ? 'stores' : 'timeline';
    if (!location.hash.startsWith('#/')) location.replace('#/' + landing);
    await render();
  }

  async function logout() {
    try {
      await request('/ui/api/logout', { method: 'POST' });
    } catch (_) { /* gone already */ }
    sessionStorage.removeItem(CSRF_KEY);
    me = null;
    loginPage('Logged out.');
  }

  // ---- navigation ----

  function parse() {
    const hash = location.hash.slice(2);
    const [view, q] = hash.split('?');
    const params = Object.fromEntries(new URLSearchParams(q || ''));
    return { view: view || 'timeline', params };
  }

  function nav() {
    const items = [];
    if (me.principal !== 'operator') {
      // An agent's session: the files its grants let it read, nothing of the operator's.
      document.getElementById('nav').replaceChildren(link('files', {}, 'Files'));
      return;
    }
    if (me.data) items.push(link('stores', { store: undefined }, 'Stores'));
    if (!me.data || current.store) {
      items.push(link('timeline', {}, 'Timeline'), link('tree', {}, 'Tree'), link('verify', {}, 'Verify'));
    }
    if (me.principal === 'operator' && (!me.data || current.store)) items.push(link('access', {}, 'Access'), link('redact', {}, 'Redactions'));
    const bar = document.getElementById('nav');
    bar.replaceChildren(...items);
    if (me.data && current.store) bar.appendChild(el('span', { class: 'note' }, 'store ', text(current.store)));
  }

  async function render() {
    if (!me) return;
    if (poll) { clearInterval(poll); poll = null; }
    const { view, params } = parse();
    current = { view, params, store: params.store || null };
    nav();
    const pages = { timeline, event, file, tree, verify, stores, files, access, redact };
    const page = pages[view];
    if (!page) { show(el('h1', {}, 'No such page')); return; }
    if (me.data && view !== 'stores' && !current.store && !me.store) { location.replace('#/stores'); return; }
    try {
      await page(params);
    } catch (e) {
      fail(e);
    }
  }

  // ---- pages ----

  async function head() {
    return json('head');
  }

  // A filtered timeline reads the log newest first in stretches of SCAN events, until a page
  // is full or SEARCH_MS have passed, so a filter that matches little costs a bounded read.
  const SCAN = 20000;
  const SEARCH_MS = 150;

  // A datetime-local value (the browser's local time) as milliseconds since the epoch.
  function localMs(value) {
    if (!value) return undefined;
    const ms = new Date(value).getTime();
    return Number.isFinite(ms) ? ms : undefined;
  }

  async function timeline(params) {
    const filters = {
      agent: params.agent, path: params.path, command: params.command,
      error: params.error === 'yes' ? 'true' : params.error === 'no' ? 'false' : undefined,
      since_ms: localMs(params.since), until_ms: localMs(params.until),
    };
    const filtered = Object.values(filters).some((v) => v !== undefined && v !== '');
    const top = await head();
    const newest = params.before === undefined;
    let before = newest ? top.seq + 1 : Math.max(1, Number(params.before));
    const events = [];
    const started = performance.now();
    while (before > 1 && events.length < PAGE) {
      const want = PAGE - events.length;
      const got = await lines('log', Object.assign({ before, limit: want, scan: filtered ? SCAN : undefined }, filters));
      events.push(...got);
      if (!filtered || got.length === want) before = got.length ? got[got.length - 1].seq : before;
      else before = Math.max(1, before - SCAN);
      if (!filtered || performance.now() - started > SEARCH_MS) break;
    }

    const field = (name, label, placeholder, type) => el('label', {}, label,
      el('input', { name, type: type || 'text', value: params[name] || '', placeholder: placeholder || '' }));
    const errorSelect = el('select', { name: 'error' },
      el('option', { value: '' }, 'any'), el('option', { value: 'yes' }, 'errors'), el('option', { value: 'no' }, 'no errors'));
    errorSelect.value = params.error || '';
    const form = el('form', {
      class: 'filters', id: 'filters',
      onsubmit: (e) => {
        e.preventDefault();
        const data = Object.fromEntries(new FormData(e.target));
        location.hash = route('timeline', data);
      },
    },
    field('agent', 'agent'), field('path', 'path', '/memories/...'), field('command', 'command', 'create, view, ...'),
    el('label', {}, 'result', errorSelect),
    field('since', 'from (local time)', '', 'datetime-local'), field('until', 'to', '', 'datetime-local'),
    el('button', { type: 'submit' }, 'Filter'));

    const rows = events.map((e) => el('tr', { class: e.is_error ? 'error' : '' },
      el('td', {}, link('event', { seq: e.seq }, String(e.seq))),
      el('td', { class: 'mono' }, e.time),
      el('td', {}, agentName(e.agent)),
      el('td', {}, e.command),
      el('td', {}, pathsShown(e.command, e.paths)),
      el('td', {}, e.is_error ? 'error' : 'ok')));
    const table = el('table', { id: 'timeline' },
      el('thead', {}, el('tr', {}, ['seq', 'time', 'agent', 'command', 'paths', 'result'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows));

    const keep = { agent: params.agent, path: params.path, command: params.command, error: params.error, since: params.since, until: params.until };
    const pager = el('div', { class: 'pager', id: 'timeline-pager' });
    if (!newest) pager.appendChild(link('timeline', keep, 'newest'));
    if (before > 1) pager.appendChild(link('timeline', Object.assign({ before }, keep), filtered ? 'search older →' : 'older →'));
    const searched = filtered
      ? el('span', { class: 'note', id: 'searched' }, 'searched seqs ' + before + ' to ' + (newest ? top.seq : Number(params.before) - 1))
      : null;
    pager.appendChild(el('span', { class: 'note', id: 'head' }, 'head seq ' + top.seq));
    show(el('h1', {}, 'Timeline'), form, pager, searched,
      events.length ? table : el('p', { class: 'note' }, before > 1 ? 'No matching events in this stretch; search older.' : 'No events here.'));

    if (newest) {
      // Live: the newest page follows the head.
      poll = setInterval(async () => {
        try {
          const now = await head();
          if (now.seq !== top.seq && parse().view === 'timeline') await render();
        } catch (_) { /* next time */ }
      }, POLL_MS);
    }
  }

  function changeOf(shown) {
    const c = shown.change;
    if (!c) return el('p', { class: 'note' }, 'No change: this call only read, or was refused.');
    switch (c.kind) {
      case 'created':
      case 'edited':
        return el('div', {}, el('p', {}, c.kind + ' ', link('file', { path: c.path }, text(c.path))), diffBlock(c.diff));
      case 'deleted':
        return el('div', {}, el('p', {}, 'deleted ', text(c.path)), el('ul', {}, c.files.map((f) => el('li', {}, text(f)))));
      case 'moved':
        return el('div', {}, el('p', {}, 'moved ', text(c.from), ' → ', link('file', { path: c.to }, text(c.to))),
          el('ul', {}, c.files.map(([a, b]) => el('li', {}, text(a), ' → ', text(b)))));
      case 'policy':
        return el('p', {}, 'policy: ', text(c.what));
      default:
        return el('p', { class: 'note' }, 'change: ' + c.kind);
    }
  }

  async function event(params) {
    const seq = Number(params.seq);
    const shown = await json('show', { seq });
    const mark = shown.verified
      ? el('span', { class: 'mark ok', id: 'verified' }, '✓ re-derived and checked')
      : el('span', { class: 'mark bad', id: 'verified' }, 'answer not re-derived');
    const facts = el('dl', {},
      el('dt', {}, 'seq'), el('dd', {}, String(shown.seq)),
      el('dt', {}, 'time'), el('dd', {}, shown.time),
      el('dt', {}, 'agent'), el('dd', { id: 'event-agent' }, agentName(shown.agent)),
      el('dt', {}, 'command'), el('dd', {}, shown.command),
      el('dt', {}, 'result'), el('dd', {}, shown.is_error ? el('span', { class: 'error' }, 'error') : 'ok'),
      el('dt', {}, 'tool_use_id'), el('dd', {}, shown.tool_use_id ? text(shown.tool_use_id) : '—'),
      el('dt', {}, kindOf(shown.command) === 'admin' ? 'names' : 'paths'), el('dd', { id: 'event-paths' }, pathsShown(shown.command, shown.paths)));
    const input = el('pre', { class: 'text', id: 'event-input' });
    input.textContent = JSON.stringify(shown.input, null, 2);
    const answer = el('pre', { class: 'text', id: 'event-answer' });
    answer.textContent = shown.answer;
    const sent = flagged(input, input.textContent);
    const saw = flagged(answer, shown.answer);
    const nodes = [el('h1', {}, 'Event ' + shown.seq + ' ', mark), facts];
    if (shown.redaction) {
      const r = shown.redaction;
      nodes.push(el('p', { class: 'warn' }, 'Redacted by ', agentName(r.by), ' at seq ' + r.seq + ' (' + r.time + '): ', text(r.reason)));
    }
    // Headed for what the event is: only a memory-tool call was answered to a model.
    const [asSent, answered] = {
      admin: ['The admin command as sent', 'The answer the admin command got'],
      api: ['The memory-stores API write as sent', 'The answer the API client got'],
      tool: ['The call as sent', 'The answer the model saw'],
    }[kindOf(shown.command)];
    nodes.push(el('h2', { id: 'event-sent-heading' }, asSent), sent,
      el('h2', { id: 'event-answer-heading' }, answered), saw,
      el('h2', {}, 'The change'), changeOf(shown));
    const pager = el('div', { class: 'pager', id: 'event-pager' });
    if (seq > 1) pager.appendChild(link('event', { seq: seq - 1 }, '← event ' + (seq - 1)));
    pager.appendChild(link('event', { seq: seq + 1 }, 'event ' + (seq + 1) + ' →'));
    nodes.push(pager);
    const path = shown.change && (shown.change.path || shown.change.to) || filePaths(shown.command, shown.paths)[0];
    if (path && shown.change) {
      const same = el('div', { class: 'pager', id: 'same-file' }, 'Same file: ');
      nodes.push(same);
      try {
        const versions = await lines('history', { path });
        const seqs = versions.map((v) => v.seq);
        const at = seqs.indexOf(seq);
        if (at > 0) same.appendChild(link('event', { seq: seqs[at - 1] }, '← previous (' + seqs[at - 1] + ')'));
        if (at >= 0 && at < seqs.length - 1) same.appendChild(link('event', { seq: seqs[at + 1] }, 'next (' + seqs[at + 1] + ') →'));
        same.appendChild(link('file', { path }, 'its history'));
      } catch (e) {
        same.appendChild(el('span', { class: 'note' }, e.message));
      }
    }
    show(...nodes);
  }

  async function file(params) {
    const path = params.path;
    const versions = await lines('history', { path });
    const rows = versions.map((v) => {
      const details = el('details', {}, el('summary', {}, 'diff'));
      details.addEventListener('toggle', async () => {
        if (!details.open || details.dataset.loaded) return;
        details.dataset.loaded = '1';
        try {
          const shown = await json('show', { seq: v.seq });
          details.appendChild(changeOf(shown));
        } catch (e) {
          details.appendChild(el('p', { class: 'error' }, e.message));
        }
      });
      return el('tr', { class: v.is_error ? 'error' : '' },
        el('td', {}, link('event', { seq: v.seq }, String(v.seq))),
        el('td', { class: 'mono' }, v.time),
        el('td', {}, agentName(v.agent)),
        el('td', {}, v.command),
        el('td', {}, (v.file_paths || []).map((p, i) => [i ? ', ' : '', text(p)])),
        el('td', {}, details));
    });
    show(el('h1', {}, 'History of ', text(path)),
      el('p', { class: 'note' }, 'Every event that touched this file, followed through renames.'),
      el('table', { id: 'history' },
        el('thead', {}, el('tr', {}, ['seq', 'time', 'agent', 'command', 'file as', 'change'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows)));
  }

  async function tree(params) {
    const top = await head();
    const at = params.at ? Number(params.at) : null;
    const listing = await json('ls', { dir: params.dir || '/memories', at: at === null ? undefined : at });
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
          content.appendChild(el('p', { class: 'error' }, e.message));
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

  async function verify() {
    const out = el('div', { id: 'verify-report' });
    const bar = el('progress', { id: 'verify-progress', max: 1, value: 0 });
    const count = el('span', { id: 'verify-count', class: 'note' });
    const progress = el('p', { class: 'progress' }, bar, ' ', count);
    const shown = (done, of) => {
      bar.max = Math.max(1, of);
      bar.value = Math.min(done, bar.max);
      count.textContent = done + ' of ' + of + ' events checked';
    };
    const button = el('button', {
      id: 'run-verify',
      onclick: async () => {
        button.disabled = true;
        shown(0, 0);
        out.replaceChildren(el('p', { class: 'note' }, 'Replaying the log…'));
        try {
          let last = null;
          await streamLines('verify', { progress: 1 }, (line) => {
            if (line.progress) shown(line.progress.done, line.progress.of);
            else last = line;
          });
          if (!last) throw new Error('the server ended the answer before its report');
          if (last.error !== undefined) throw new Error(last.error);
          shown(last.events, last.events);
          out.replaceChildren(verifyReport(last));
        } catch (e) {
          out.replaceChildren(el('p', { class: 'error' }, e.message));
        }
        button.disabled = false;
      },
    }, 'Run verify');
    const replica = el('div', { id: 'replication-box' }, el('p', { class: 'note' }, 'Asking…'));
    show(el('h1', {}, 'Verify'),
      el('p', { class: 'note' }, 'Replays the whole log: re-derives every answer and checks the chain and the index.'),
      button, progress, out,
      el('h2', {}, 'Replication'), replica);
    await replicationState(replica);
  }

  function verifyReport(r) {
    const nodes = [];
    if (!r.violations.length) {
      nodes.push(el('p', {}, el('span', { class: 'mark ok', id: 'verify-status' }, 'INTACT')));
    } else {
      const first = r.violations.slice().sort((a, b) => a.seq - b.seq)[0];
      nodes.push(el('p', {}, el('span', { class: 'mark bad', id: 'verify-status' }, 'BROKEN'),
        ' first bad seq ', el('strong', { id: 'verify-bad-seq' }, String(first.seq)), ': ', text(first.kind), ' — ', text(first.detail)));
      nodes.push(el('ul', {}, r.violations.slice(0, 50).map((v) => el('li', {}, 'seq ' + v.seq + ' ', text(v.kind), ': ', text(v.detail)))));
    }
    nodes.push(el('dl', {},
      el('dt', {}, 'checkpoint'), el('dd', { class: 'mono', id: 'verify-checkpoint' }, r.checkpoint || '—'),
      el('dt', {}, 'events'), el('dd', {}, String(r.events)),
      el('dt', {}, 'head'), el('dd', { class: 'mono' }, r.head.seq + ':' + r.head.hash),
      el('dt', {}, 'took'), el('dd', {}, r.elapsed_ms.toFixed(1) + ' ms')));
    if (r.notes.length) nodes.push(el('ul', {}, r.notes.map((n) => el('li', { class: 'note' }, text(n)))));
    return el('div', {}, nodes);
  }

  function bytesShown(n) {
    if (n === undefined || n === null) return '—';
    const units = ['B', 'KB', 'MB', 'GB', 'TB'];
    let value = n;
    let unit = 0;
    while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
    return (unit ? value.toFixed(1) : String(value)) + ' ' + units[unit];
  }

  function verifiedShown(v) {
    if (!v) return el('span', { class: 'note' }, 'not verified since the server started');
    return v.intact
      ? el('span', {}, el('span', { class: 'mark ok' }, 'INTACT'), ' to seq ' + v.head + ', ' + v.time)
      : el('span', {}, el('span', { class: 'mark bad' }, 'BROKEN'), ' at seq ' + v.first_bad + ', ' + v.time);
  }

  // ---- the operator's pages: access, redactions; verify's progress and replication ----

  // A POST or DELETE of JSON to one of the store's routes; the answer's JSON.
  async function change(method, route, body) {
    const options = { method };
    if (body !== undefined) {
      options.headers = { 'Content-Type': 'application/json' };
      options.body = JSON.stringify(body);
    }
    return JSON.parse(await request(base() + route, options));
  }

  // The answer of an optional route, or null when the server answers 404 (it has no such thing).
  async function optional(route) {
    try {
      return await json(route);
    } catch (e) {
      if (String(e.message).startsWith('404:')) return null;
      throw e;
    }
  }

  // A GET of NDJSON whose lines are handed to `each` as they arrive.
  async function streamLines(route, params, each) {
    const query = new URLSearchParams(params).toString();
    const response = await fetch(base() + route + (query ? '?' + query : ''), {
      credentials: 'same-origin', cache: 'no-store', headers: { 'X-Mnemo-CSRF': me.csrf },
    });
    if (!response.ok) {
      const body = await response.text();
      let why = body;
      try { why = JSON.parse(body).error || body; } catch (_) { /* not JSON */ }
      throw new Error(response.status + ': ' + why);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let held = '';
    for (;;) {
      const { done, value } = await reader.read();
      held += decoder.decode(value || new Uint8Array(), { stream: !done });
      const parts = held.split('\n');
      held = done ? '' : parts.pop();
      for (const part of parts) if (part.trim() !== '') each(JSON.parse(part));
      if (done) return;
    }
  }

  // A button that acts only after a second, explicit click on the button that replaces it, which
  // says what will happen (`question`); Cancel puts the first back.
  function confirming(id, label, question, act) {
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

  function operatorOnly(title) {
    show(el('h1', {}, title),
      el('p', { class: 'note', id: 'operator-only' }, 'This page is for the operator: log in with the operator\'s token (or a link from `mnemo ui`). An agent session reaches only its own memory, and the server refuses it these routes.'));
  }

  function table(id, heads, rows) {
    return el('table', { id },
      el('thead', {}, el('tr', {}, heads.map((h) => el('th', {}, h)))),
      el('tbody', {}, rows));
  }

  async function access() {
    if (me.principal !== 'operator') { operatorOnly('Access'); return; }
    const status = el('div', { id: 'access-status' });
    const grantsBox = el('div', { id: 'grants-box' });
    const tokensBox = el('div', { id: 'tokens-box' });

    // A change's outcome in the status area, then the lists as they are now.
    async function done(act) {
      try {
        const answer = await act();
        if (answer) status.replaceChildren(answer);
      } catch (e) {
        status.replaceChildren(el('p', { class: 'error', id: 'access-error' }, e.message));
      }
      try {
        await refresh();
      } catch (e) {
        status.appendChild(el('p', { class: 'error' }, e.message));
      }
    }
    const said = (answer) => el('p', { id: 'access-result' }, text(answer.result));

    async function refresh() {
      const [grants, tokens] = await Promise.all([lines('acl'), lines('tokens')]);
      grantsBox.replaceChildren(grants.length
        ? table('grants', ['agent', 'prefix', 'access', ''], grants.map((g, i) => el('tr', {},
          el('td', {}, agentName(g.agent)), el('td', {}, text(g.prefix)), el('td', {}, g.access),
          el('td', {}, confirming('grant-revoke-' + i, 'Revoke',
            ['Confirm revoke of ', g.access, ' on ', text(g.prefix), ' from agent ', agentName(g.agent)],
            () => done(async () => said(await change('POST', 'acl', { action: 'revoke', agent: g.agent, prefix: g.prefix }))))))))
        : el('p', { class: 'note' }, 'No grants: no agent reaches any memory.'));
      tokensBox.replaceChildren(tokens.length
        ? table('tokens', ['id', 'agent', 'label', 'issued', 'state'], tokens.map((t) => el('tr', { class: t.revoked ? 'revoked' : '' },
          el('td', { class: 'mono' }, t.id),
          el('td', {}, agentName(t.agent)),
          el('td', {}, text(t.label)),
          el('td', {}, link('event', { seq: t.issued_seq }, 'seq ' + t.issued_seq), ' ', el('span', { class: 'mono' }, t.issued_at), ' by ', agentName(t.issued_by)),
          el('td', {}, t.revoked
            ? ['revoked at ', link('event', { seq: t.revoked.seq }, 'seq ' + t.revoked.seq), ' by ', agentName(t.revoked.by)]
            : confirming('token-revoke-' + t.id, 'Revoke',
              ['Confirm revoke of token ', t.id, ' for agent ', agentName(t.agent)],
              () => done(async () => said(await change('DELETE', 'tokens/' + encodeURIComponent(t.id)))))))))
        : el('p', { class: 'note' }, 'No agent tokens issued.'));
    }

    const field = (name, label, attrs) => el('label', {}, label, el('input', Object.assign({ name, required: true, autocomplete: 'off' }, attrs || {})));
    const issueForm = el('form', { class: 'filters', id: 'issue-form', onsubmit: (e) => e.preventDefault() },
      field('agent', 'agent'), field('label', 'label', { required: false, placeholder: 'what it is for' }));
    // The form's button asks first: it becomes "Confirm ..." (saying what, from the form) and
    // Cancel; editing the form takes the question back.
    const ask = (form, id, label, question, act) => {
      const slot = el('span', {});
      const reset = () => slot.replaceChildren(el('button', {
        type: 'button', id,
        onclick: () => {
          if (!form.reportValidity()) return;
          const data = Object.fromEntries(new FormData(form));
          const yes = el('button', {
            type: 'button', id: id + '-confirm', class: 'danger',
            onclick: async () => {
              yes.disabled = true;
              no.disabled = true;
              await act(data);
              reset();
            },
          }, question(data));
          const no = el('button', { type: 'button', onclick: reset }, 'Cancel');
          slot.replaceChildren(yes, ' ', no);
        },
      }, label));
      form.addEventListener('input', reset);
      reset();
      form.appendChild(slot);
    };
    ask(issueForm, 'issue-token', 'Issue token', (d) => ['Confirm issue of a token for agent ', agentName(d.agent)], (d) => done(async () => {
      const issued = await change('POST', 'tokens', { agent: d.agent, label: d.label });
      issueForm.reset();
      const secret = el('pre', { class: 'text secret', id: 'issued-token' });
      secret.textContent = issued.token;
      return el('div', { class: 'issued', id: 'issued' },
        el('p', {}, 'Token ', el('span', { class: 'mono' }, issued.id), ' for agent ', agentName(issued.agent), ' (seq ' + issued.seq + '):'),
        secret,
        el('p', { class: 'warn', id: 'issued-note' }, 'Copy it now: it is not shown again. The store keeps only its hash; if it is lost, revoke it and issue another.'));
    }));

    const accessSelect = el('select', { name: 'access' }, el('option', { value: 'read' }, 'read'), el('option', { value: 'read-write' }, 'read-write'));
    const grantForm = el('form', { class: 'filters', id: 'grant-form', onsubmit: (e) => e.preventDefault() },
      field('agent', 'agent', { placeholder: 'planner, or *' }), field('prefix', 'prefix', { placeholder: '/memories/plans' }), el('label', {}, 'access', accessSelect));
    ask(grantForm, 'grant', 'Grant', (d) => ['Confirm grant of ', d.access, ' on ', text(d.prefix), ' to agent ', agentName(d.agent)],
      (d) => done(async () => {
        const answer = await change('POST', 'acl', { action: 'grant', agent: d.agent, prefix: d.prefix, access: d.access });
        grantForm.reset();
        return said(answer);
      }));

    await refresh();
    show(el('h1', {}, 'Access'),
      el('p', { class: 'note' }, 'Who may reach what: the grants and the agent tokens. Every change here is an admin event in the log, recorded under the operator.'),
      status,
      el('h2', {}, 'Tokens'), tokensBox, issueForm,
      el('h2', {}, 'Grants'), grantsBox, grantForm);
  }

  // The command of a redaction's admin event, as /v1/log names it.
  const REDACT = 'redact';

  // The redaction events of the log, oldest first: a scan of /v1/log in pages, asking the server
  // to keep only redactions (a server that cannot filter ignores it; so this filters too).
  async function redactions() {
    const found = [];
    let from = 1;
    for (;;) {
      const page = await lines('log', { from, limit: 1000, command: REDACT });
      found.push(...page.filter((e) => e.command === REDACT));
      if (page.length < 1000) return found;
      from = page[page.length - 1].seq + 1;
    }
  }

  // One list of the form's: `split` cuts it (lines, or commas and blanks too).
  function listOf(value, split) {
    return String(value || '').split(split).map((s) => s.trim()).filter((s) => s !== '');
  }

  async function redact() {
    if (me.principal !== 'operator') { operatorOnly('Redactions'); return; }
    const pastBox = el('div', { id: 'redactions-box' });
    async function refresh() {
      const events = await redactions();
      const rows = [];
      for (const e of events.slice(-50).reverse()) {
        const shown = await json('show', { seq: e.seq });
        // The admin command as `show` gives it: {"Redact": {"reason", "seqs"}}.
        const input = (shown.input && shown.input.Redact) || {};
        rows.push(el('tr', {},
          el('td', {}, link('event', { seq: e.seq }, String(e.seq))),
          el('td', { class: 'mono' }, e.time),
          el('td', {}, agentName(e.agent)),
          el('td', {}, text(input.reason === undefined ? '' : input.reason)),
          el('td', { class: 'erased' }, (input.seqs || []).map((s, i) => [i ? ', ' : '', link('event', { seq: s }, String(s))]))));
      }
      pastBox.replaceChildren(rows.length
        ? table('redactions', ['seq', 'time', 'by', 'reason', 'erased'], rows)
        : el('p', { class: 'note' }, 'No redactions in this log.'));
      if (events.length > 50) pastBox.appendChild(el('p', { class: 'note' }, 'The newest 50 of ' + events.length + '.'));
    }

    const plan = el('div', { id: 'redact-plan' });
    const area = (name, label, hint) => el('label', {}, label, el('textarea', { name, rows: 3, placeholder: hint }));
    const form = el('form', {
      class: 'redact-form', id: 'redact-form',
      onsubmit: async (e) => {
        e.preventDefault();
        const data = Object.fromEntries(new FormData(form));
        const seqs = listOf(data.seqs, /[\s,]+/);
        const bad = seqs.find((s) => !/^[0-9]+$/.test(s));
        if (bad !== undefined) {
          plan.replaceChildren(el('p', { class: 'error' }, 'not a seq: ', text(bad)));
          return;
        }
        const selection = {
          reason: data.reason,
          seqs: seqs.map(Number),
          paths: listOf(data.paths, /\r?\n/),
          texts: listOf(data.texts, /\r?\n/),
        };
        plan.replaceChildren(el('p', { class: 'note' }, 'Dry run…'));
        try {
          const would = await change('POST', 'redact', Object.assign({ dry_run: true }, selection));
          plan.replaceChildren(planOf(would, selection));
        } catch (err) {
          plan.replaceChildren(el('p', { class: 'error', id: 'redact-error' }, err.message));
        }
      },
    },
    el('label', {}, 'reason', el('input', { name: 'reason', required: true, autocomplete: 'off', placeholder: 'asked to be forgotten' })),
    area('seqs', 'seqs (commas, blanks or lines)', '12, 13'),
    area('paths', 'paths (one a line)', '/memories/people/ann.md'),
    area('texts', 'texts (one a line)', 'hunter2'),
    el('button', { type: 'submit', id: 'redact-dry-run' }, 'Dry run'));
    // A dry run speaks for the form as it was: any change takes its offer away.
    form.addEventListener('input', () => {
      if (plan.querySelector('#plan-seqs')) plan.replaceChildren(el('p', { class: 'note', id: 'redact-stale' }, 'The form changed: run the dry run again.'));
    });

    function planOf(would, selection) {
      const nodes = [el('h2', {}, 'The dry run')];
      nodes.push(el('p', {}, 'Would erase ', el('strong', { id: 'plan-count' }, String(would.seqs.length)), ' events: ',
        el('span', { id: 'plan-seqs' }, would.seqs.map((s, i) => [i ? ', ' : '', link('event', { seq: s }, String(s))]))));
      if (would.paths.length) nodes.push(el('p', {}, 'Paths:'), el('ul', { id: 'plan-paths' }, would.paths.map((p) => el('li', {}, text(p)))));
      if (would.unsearched && would.unsearched.length) {
        nodes.push(el('p', { class: 'warn', id: 'plan-unsearched' }, 'Not searched past their first bytes (only a digest of the input was kept): ',
          would.unsearched.map((s, i) => [i ? ', ' : '', link('event', { seq: s }, String(s))]), '. If the text may be there, add them by seq.'));
      }
      nodes.push(text(would.result, 'pre'));
      if (!would.seqs.length) return el('div', {}, nodes);
      const result = el('div', { id: 'redact-done' });
      const real = el('button', {
        type: 'button', id: 'redact-real', class: 'danger',
        onclick: async () => {
          real.disabled = true;
          try {
            const answer = await change('POST', 'redact', Object.assign({ dry_run: false }, selection));
            form.reset();
            const out = text(answer.result, 'pre');
            out.id = 'redact-result';
            plan.replaceChildren(el('h2', {}, 'Redacted'), out);
            await refresh();
          } catch (err) {
            result.replaceChildren(el('p', { class: 'error' }, err.message));
          }
        },
      }, 'Redact for real: erase ' + would.seqs.length + ' events');
      nodes.push(el('p', {}, real), result);
      return el('div', {}, nodes);
    }

    await refresh();
    show(el('h1', {}, 'Redactions'),
      el('p', { class: 'note' }, 'A redaction erases events\' content for good and records who did it and why; the chain still verifies. It always runs dry first.'),
      el('h2', {}, 'Redact'), form, plan,
      el('h2', {}, 'Past redactions'), pastBox);
  }

  // Where replication stands, or that there is none.
  async function replicationState(box) {
    let state;
    try {
      state = await optional('replication');
    } catch (e) {
      box.replaceChildren(el('p', { class: 'error' }, e.message));
      return;
    }
    if (!state) {
      box.replaceChildren(el('p', { class: 'note', id: 'replication-none' }, 'Not replicated: this server ships its log to no replica.'));
      return;
    }
    const facts = [];
    const fact = (label, value, id) => facts.push(el('dt', {}, label), el('dd', { id }, value));
    const ms = (v) => (v === null || v === undefined ? 'up to date' : (v / 1000).toFixed(1) + ' s behind');
    if (state.following !== undefined) {
      fact('follows', text(state.following), 'replication-url');
      fact('head here', el('span', { class: 'mono' }, state.head.seq + ':' + state.head.hash));
      fact('replica\'s checkpoint', state.replica_head === null ? 'not read yet' : 'seq ' + state.replica_head);
      fact('lag', state.lag_events === null ? '—' : state.lag_events + ' events', 'replication-lag');
      fact('updates taken', String(state.updates));
    } else {
      fact('replica', text(state.url), 'replication-url');
      fact('replica\'s checkpoint', el('span', { class: 'mono', id: 'replication-checkpoint' }, state.replicated.seq + ':' + state.replicated.hash));
      fact('head here', 'seq ' + state.head);
      fact('lag', state.lag_events + ' events, ' + ms(state.behind_ms), 'replication-lag');
      fact('shipments', String(state.shipments));
      fact('checkpoint signed', state.signed === null || state.signed === undefined ? '— (nothing shipped yet)'
        : state.signed ? 'yes, by the store\'s key' : 'no: the store has no signing key (mnemo replicate --keygen)', 'replication-signed');
    }
    fact('last error', state.error ? el('span', { class: 'error' }, text(state.error)) : 'none', 'replication-error');
    box.replaceChildren(el('dl', { id: 'replication' }, facts));
  }

  async function stores(params) {
    const query = new URLSearchParams({ limit: String(PAGE), details: 'true' });
    if (params.after) query.set('after', params.after);
    const listing = JSON.parse(await request('/v1/stores?' + query.toString()));
    // A store made through the memory-stores API has a name and a description of its own (its
    // label) beside the name of its directory, which its routes use.
    const named = (s) => {
      const label = s.label || {};
      const titled = label.name && label.name !== s.name;
      return el('td', { class: 'store-name' },
        el('a', { href: '#/timeline?store=' + encodeURIComponent(s.name) }, text(titled ? label.name : s.name)),
        titled ? el('span', { class: 'note mono' }, ' ', text(s.name)) : '',
        label.description ? el('div', { class: 'note store-description' }, text(label.description)) : '');
    };
    const rows = listing.stores.map((s) => el('tr', {},
      named(s),
      el('td', {}, s.open ? 'open' : 'closed'),
      el('td', { class: 'mono' }, s.head ? String(s.head.seq) : '—'),
      el('td', { class: 'mono' }, s.last_write || '—'),
      el('td', {}, bytesShown(s.bytes)),
      el('td', {}, verifiedShown(s.verified))));
    const pager = el('div', { class: 'pager' });
    if (params.after) pager.appendChild(el('a', { href: '#/stores' }, 'first page'));
    if (listing.next) pager.appendChild(el('a', { href: '#/stores?after=' + encodeURIComponent(listing.next) }, 'more →'));
    show(el('h1', {}, 'Stores'),
      el('p', { class: 'note' }, listing.open + ' of at most ' + listing.max_open + ' open'),
      el('table', { id: 'stores' },
        el('thead', {}, el('tr', {}, ['store', 'state', 'head seq', 'last event', 'size', 'last verify'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows)),
      pager);
  }

  // The files the session may read, now: an agent's through its grants (`/v1/records`, which
  // logs nothing), the operator's all.
  async function files() {
    const listing = await json('records', { tag: 'memorytool' });
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

  window.addEventListener('hashchange', () => { if (!location.hash.startsWith('#login=')) render(); else start(); });
  document.addEventListener('DOMContentLoaded', () => { start().catch(fail); });
}());
