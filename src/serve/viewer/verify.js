// @ts-check
// Verify: a replay of the whole log with its progress, and where replication stands.
import { optional, streamLines } from './api.js';
import { el, reason, show, text } from './dom.js';

/** @import { Following, Shipping, VerifyLine, VerifyReport } from './api.js' */

export async function verify() {
  const out = el('div', { id: 'verify-report' });
  const bar = el('progress', { id: 'verify-progress', max: 1, value: 0 });
  const count = el('span', { id: 'verify-count', class: 'note' });
  const progress = el('p', { class: 'progress' }, bar, ' ', count);
  /**
   * @param {number} done
   * @param {number} of
   */
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
        /** @type {VerifyReport | { error: string } | null} */
        let last = null;
        await streamLines('verify', { progress: '1' }, (each) => {
          const line = /** @type {VerifyLine} */ (each);
          if ('progress' in line) shown(line.progress.done, line.progress.of);
          else last = line;
        });
        // Set by the callback above, which the type checker does not follow.
        const report = /** @type {VerifyReport | { error: string } | null} */ (last);
        if (!report) throw new Error('the server ended the answer before its report');
        if ('error' in report) throw new Error(report.error);
        shown(report.events, report.events);
        out.replaceChildren(verifyReport(report));
      } catch (e) {
        out.replaceChildren(el('p', { class: 'error' }, reason(e)));
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

/** @param {VerifyReport} r */
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

/**
 * Where replication stands, or that there is none.
 * @param {HTMLElement} box
 */
async function replicationState(box) {
  let state;
  try {
    state = /** @type {Shipping | Following | null} */ (await optional('replication'));
  } catch (e) {
    box.replaceChildren(el('p', { class: 'error' }, reason(e)));
    return;
  }
  if (!state) {
    box.replaceChildren(el('p', { class: 'note', id: 'replication-none' }, 'Not replicated: this server ships its log to no replica.'));
    return;
  }
  /** @type {HTMLElement[]} */
  const facts = [];
  /**
   * @param {string} label
   * @param {string | Node} value
   * @param {string} [id]
   */
  const fact = (label, value, id) => facts.push(el('dt', {}, label), el('dd', { id }, value));
  /** @param {number | null | undefined} v */
  const ms = (v) => (v === null || v === undefined ? 'up to date' : (v / 1000).toFixed(1) + ' s behind');
  if ('following' in state) {
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
