// @ts-check
// Access (the operator's): the grants and the agent tokens, each change behind a confirming
// second button.
import { change, lines } from './api.js';
import { agentName, confirming, el, formValues, operatorOnly, reason, show, table, text } from './dom.js';
import { link } from './router.js';
import { signedIn } from './state.js';

/** @import { Changed, Grant, Issued, TokenRow } from './api.js' */
/** @import { Children } from './dom.js' */

export async function access() {
  if (signedIn().principal !== 'operator') { operatorOnly('Access'); return; }
  const status = el('div', { id: 'access-status' });
  const grantsBox = el('div', { id: 'grants-box' });
  const tokensBox = el('div', { id: 'tokens-box' });

  /**
   * A change's outcome in the status area, then the lists as they are now.
   * @param {() => Promise<Node | null | undefined>} act
   */
  async function done(act) {
    try {
      const answer = await act();
      if (answer) status.replaceChildren(answer);
    } catch (e) {
      status.replaceChildren(el('p', { class: 'error', id: 'access-error' }, reason(e)));
    }
    try {
      await refresh();
    } catch (e) {
      status.appendChild(el('p', { class: 'error' }, reason(e)));
    }
  }
  /** @param {unknown} answer */
  const said = (answer) => el('p', { id: 'access-result' }, text(/** @type {Changed} */ (answer).result));

  async function refresh() {
    const [grants, tokens] = /** @type {[Grant[], TokenRow[]]} */ (await Promise.all([lines('acl'), lines('tokens')]));
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

  /**
   * @param {string} name
   * @param {string} label
   * @param {Record<string, unknown>} [attrs]
   */
  const field = (name, label, attrs) => el('label', {}, label, el('input', Object.assign({ name, required: true, autocomplete: 'off' }, attrs || {})));
  const issueForm = el('form', { class: 'filters', id: 'issue-form', onsubmit: (e) => e.preventDefault() },
    field('agent', 'agent'), field('label', 'label', { required: false, placeholder: 'what it is for' }));
  // The form's button asks first: it becomes "Confirm ..." (saying what, from the form) and
  // Cancel; editing the form takes the question back.
  /**
   * @param {HTMLFormElement} form
   * @param {string} id
   * @param {string} label
   * @param {(data: Record<string, string>) => Children} question
   * @param {(data: Record<string, string>) => Promise<void>} act
   */
  const ask = (form, id, label, question, act) => {
    const slot = el('span', {});
    const reset = () => slot.replaceChildren(el('button', {
      type: 'button', id,
      onclick: () => {
        if (!form.reportValidity()) return;
        const data = formValues(form);
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
    const issued = /** @type {Issued} */ (await change('POST', 'tokens', { agent: d.agent, label: d.label }));
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
