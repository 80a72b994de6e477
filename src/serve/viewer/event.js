// @ts-check
// One event whole: what was sent, the answer (re-derived and checked), what it changed, and its
// neighbours in the log and in its file's history.
import { json, lines } from './api.js';
import { agentName, el, flagged, reason, show, text } from './dom.js';
import { changeOf, changedPath, filePaths, kindOf, pathsShown } from './log.js';
import { incident } from './incident.js';
import { link } from './router.js';
import { signedIn } from './state.js';

/** @import { Shown, Version } from './api.js' */

/** @param {Record<string, string>} params */
export async function event(params) {
  const seq = Number(params.seq);
  const shown = /** @type {Shown} */ (await json('show', { seq }));
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
  /** @type {HTMLElement[]} */
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
  const path = changedPath(shown.change) || filePaths(shown.command, shown.paths)[0];
  if (path && shown.change) {
    const same = el('div', { class: 'pager', id: 'same-file' }, 'Same file: ');
    nodes.push(same);
    try {
      const versions = /** @type {Version[]} */ (await lines('history', { path }));
      const seqs = versions.map((v) => v.seq);
      const at = seqs.indexOf(seq);
      if (at > 0) same.appendChild(link('event', { seq: seqs[at - 1] }, '← previous (' + seqs[at - 1] + ')'));
      if (at >= 0 && at < seqs.length - 1) same.appendChild(link('event', { seq: seqs[at + 1] }, 'next (' + seqs[at + 1] + ') →'));
      same.appendChild(link('file', { path }, 'its history'));
    } catch (e) {
      same.appendChild(el('span', { class: 'note' }, reason(e)));
    }
  }
  // The operator's: who was shown what a write wrote, and putting its file back as before it.
  if (path && shown.change && !shown.is_error && kindOf(shown.command) === 'tool' && signedIn().principal === 'operator') {
    nodes.push(...incident(seq, path));
  }
  show(...nodes);
}
