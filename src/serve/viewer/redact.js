// @ts-check
// Redactions (the operator's): past redactions, and a new one, which always runs dry first.
import { change, json, lines } from './api.js';
import { agentName, el, formValues, operatorOnly, reason, show, table, text } from './dom.js';
import { link } from './router.js';
import { signedIn } from './state.js';

/** @import { LogEvent, RedactPlan, Shown } from './api.js' */

// The command of a redaction's admin event, as /v1/log names it.
const REDACT = 'redact';

/**
 * The admin command of a redaction's event, as `show` gives its input.
 * @typedef {{ Redact?: { reason?: string, seqs?: number[] } }} RedactInput
 */

/**
 * The redaction events of the log, oldest first: a scan of /v1/log in pages, asking the server to
 * keep only redactions (a server that cannot filter ignores it; so this filters too).
 */
async function redactions() {
  /** @type {LogEvent[]} */
  const found = [];
  let from = 1;
  for (;;) {
    const page = /** @type {LogEvent[]} */ (await lines('log', { from, limit: 1000, command: REDACT }));
    found.push(...page.filter((e) => e.command === REDACT));
    if (page.length < 1000) return found;
    from = page[page.length - 1].seq + 1;
  }
}

/**
 * One list of the form's: `split` cuts it (lines, or commas and blanks too).
 * @param {string | undefined} value
 * @param {RegExp} split
 */
function listOf(value, split) {
  return String(value || '').split(split).map((s) => s.trim()).filter((s) => s !== '');
}

export async function redact() {
  if (signedIn().principal !== 'operator') { operatorOnly('Redactions'); return; }
  const pastBox = el('div', { id: 'redactions-box' });
  async function refresh() {
    const events = await redactions();
    const rows = [];
    for (const e of events.slice(-50).reverse()) {
      const shown = /** @type {Shown} */ (await json('show', { seq: e.seq }));
      // The admin command as `show` gives it: {"Redact": {"reason", "seqs"}}.
      /** @type {NonNullable<RedactInput['Redact']>} */
      const input = (shown.input && /** @type {RedactInput} */ (shown.input).Redact) || {};
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
  /**
   * @param {string} name
   * @param {string} label
   * @param {string} hint
   */
  const area = (name, label, hint) => el('label', {}, label, el('textarea', { name, rows: 3, placeholder: hint }));
  const form = el('form', {
    class: 'redact-form', id: 'redact-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const data = formValues(form);
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
        const would = /** @type {RedactPlan} */ (await change('POST', 'redact', Object.assign({ dry_run: true }, selection)));
        plan.replaceChildren(planOf(would, selection));
      } catch (err) {
        plan.replaceChildren(el('p', { class: 'error', id: 'redact-error' }, reason(err)));
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

  /**
   * What the dry run would erase, and the button that does it for real.
   * @param {RedactPlan} would
   * @param {object} selection
   */
  function planOf(would, selection) {
    /** @type {HTMLElement[]} */
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
          const answer = /** @type {RedactPlan} */ (await change('POST', 'redact', Object.assign({ dry_run: false }, selection)));
          form.reset();
          const out = text(answer.result, 'pre');
          out.id = 'redact-result';
          plan.replaceChildren(el('h2', {}, 'Redacted'), out);
          await refresh();
        } catch (err) {
          result.replaceChildren(el('p', { class: 'error' }, reason(err)));
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
