// @ts-check
// What came of one write (the operator's): who was shown what it wrote and where it went
// (`/v1/trace`), and the file put back as it was before it (`/v1/revert`, always dry first,
// then for real only behind a confirming second button).
import { change, json } from './api.js';
import { agentName, confirming, el, reason, table, text } from './dom.js';
import { link } from './router.js';

/**
 * One event of a trace: the logged event, and what it did with the traced bytes.
 * @typedef {{ seq: number, time: string, agent: string, command: string, shown: boolean, carried: boolean, removed: boolean, files: string[] }} Traced
 */

/**
 * `GET /v1/trace`'s answer.
 * @typedef {{ seq: number, bytes: number, file: string, through: number, events: Traced[], live: { path: string, bytes: number }[], exact: boolean, notes: string[] }} Trace
 */

/**
 * `POST /v1/revert`'s answer.
 * @typedef {{ to: number, scope: string, undone: number[], calls: { root: string, input: { command?: string } }[], conflicts: string[], record?: number | null, result?: string }} Reverted
 */

/**
 * `n` and the noun, plural unless one.
 * @param {number} n
 * @param {string} noun
 */
function count(n, noun) {
  return n + ' ' + noun + (n === 1 ? '' : 's');
}

/**
 * @param {number[]} seqs
 */
function seqLinks(seqs) {
  return seqs.map((s, i) => [i ? ', ' : '', link('event', { seq: s }, String(s))]);
}

/**
 * Who was shown the bytes and what carried them on, and where they are now.
 * @param {Trace} trace
 */
function traceOf(trace) {
  /** @type {HTMLElement[]} */
  const nodes = [el('p', {}, 'The ' + trace.bytes + ' bytes event ' + trace.seq + ' wrote in ', text(trace.file), ', followed through event ' + trace.through + ':')];
  if (trace.events.length) {
    const did = (/** @type {Traced} */ e) => [e.shown && 'shown', e.carried && 'carried', e.removed && 'removed'].filter(Boolean).join(', ');
    nodes.push(table('trace-events', ['seq', 'agent', 'command', 'what it did', 'files'], trace.events.map((e) => el('tr', {},
      el('td', {}, link('event', { seq: e.seq }, String(e.seq))),
      el('td', {}, agentName(e.agent)),
      el('td', {}, e.command),
      el('td', {}, did(e)),
      el('td', {}, text(e.files.join(', ')))))));
  } else {
    nodes.push(el('p', { class: 'note', id: 'trace-none' }, 'No later event was shown these bytes or carried them on.'));
  }
  const live = el('p', { id: 'trace-live' }, trace.live.length ? 'Now in: ' : 'No file holds these bytes now.');
  trace.live.forEach((f, i) => live.append(i ? ', ' : '', text(f.path), ' (' + f.bytes + ' bytes)'));
  nodes.push(live);
  nodes.push(el('p', { class: trace.exact ? 'note' : 'warn', id: 'trace-exact' }, trace.exact
    ? 'Exact: re-derived by replaying the log, every answer answered again.'
    : 'A lower bound: part of the way cannot be re-derived (see the notes).'));
  if (trace.notes.length) nodes.push(el('ul', { class: 'note' }, trace.notes.map((n) => el('li', {}, text(n)))));
  return el('div', {}, nodes);
}

/**
 * What a dry run of the revert would do, and the confirming button that does it.
 * @param {Reverted} would
 * @param {{ to: number, path: string }} asked
 * @param {HTMLElement} box
 */
function planOf(would, asked, box) {
  /** @type {HTMLElement[]} */
  const nodes = [];
  if (!would.calls.length) {
    nodes.push(el('p', { class: 'note', id: 'revert-nothing' }, 'Nothing to put back: ', text(asked.path), ' is as it was after event ' + asked.to + '.'));
    return el('div', {}, nodes);
  }
  nodes.push(el('p', {}, 'Would undo ' + (would.undone.length === 1 ? 'event ' : 'events '), el('span', { id: 'revert-undone' }, seqLinks(would.undone)), ' by ' + count(would.calls.length, 'call') + ':'),
    el('ul', { id: 'revert-calls' }, would.calls.map((c) => el('li', { class: 'mono' }, text(JSON.stringify(c.input))))));
  if (would.conflicts.length) {
    nodes.push(el('p', { class: 'warn' }, 'Other writes it would throw away:'),
      el('ul', { id: 'revert-conflicts' }, would.conflicts.map((c) => el('li', {}, text(c)))));
  }
  const done = el('div', { id: 'revert-done' });
  const question = 'Append ' + count(would.calls.length, 'call') + ' putting ' + asked.path + ' back as after event ' + asked.to
    + (would.conflicts.length ? ', throwing away the writes listed' : '');
  nodes.push(el('p', {}, confirming('revert-real', 'Revert for real', question, async () => {
    try {
      const answer = /** @type {Reverted} */ (await change('POST', 'revert',
        { to: asked.to, path: asked.path, dry_run: false, force: would.conflicts.length > 0 }));
      const out = text(answer.result || '', 'pre');
      out.id = 'revert-result';
      box.replaceChildren(el('h3', {}, 'Reverted'), out,
        answer.record ? el('p', {}, 'Its record: ', link('event', { seq: answer.record }, 'event ' + answer.record)) : '');
    } catch (e) {
      done.replaceChildren(el('p', { class: 'error' }, reason(e)));
    }
  })), done);
  return el('div', {}, nodes);
}

/**
 * The section of the event page of `seq`, a write that changed `path`: who saw it, and the file
 * put back as it was before it.
 * @param {number} seq
 * @param {string} path
 */
export function incident(seq, path) {
  const traced = el('div', { id: 'trace-box' });
  const who = el('button', {
    type: 'button', id: 'trace-run',
    onclick: async () => {
      traced.replaceChildren(el('p', { class: 'note' }, 'Tracing…'));
      try {
        traced.replaceChildren(traceOf(/** @type {Trace} */ (await json('trace', { seq }))));
      } catch (e) {
        traced.replaceChildren(el('p', { class: 'error', id: 'trace-error' }, reason(e)));
      }
    },
  }, 'Who saw this');
  /** @type {HTMLElement[]} */
  const nodes = [el('h2', {}, 'What came of it'), el('p', {}, who), traced];
  if (seq > 1) {
    const asked = { to: seq - 1, path };
    const planned = el('div', { id: 'revert-box' });
    const dry = el('button', {
      type: 'button', id: 'revert-dry-run',
      onclick: async () => {
        planned.replaceChildren(el('p', { class: 'note' }, 'Dry run…'));
        try {
          const would = /** @type {Reverted} */ (await change('POST', 'revert', { to: asked.to, path, dry_run: true }));
          planned.replaceChildren(planOf(would, asked, planned));
        } catch (e) {
          planned.replaceChildren(el('p', { class: 'error', id: 'revert-error' }, reason(e)));
        }
      },
    }, 'Revert ' + path + ' to before this (dry run)');
    nodes.push(el('p', {}, dry), planned);
  }
  return nodes;
}
