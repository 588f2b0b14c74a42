// How failures and confirmations look: a refused call says what it needs
// (a 403 names the missing capability), and an action asks before it acts.

import { h } from '../dom.js';
import { describeNeed } from '../acl.js';
import { token } from '../api.js';
import { confirmAction } from './dialog.js';

/** A notice explaining `err` (an ApiError or any Error). */
export function errorBox(err, what) {
  if (err?.status === 403) {
    const who = token.secret ? 'The token this browser signed in with' : 'Without a token (anonymous), this browser';
    return h('div', { class: 'notice error', role: 'alert', dataset: { status: '403' } },
      h('strong', {}, 'Not authorized. '),
      `${who} may not ${what || 'see this'}: it needs ${describeNeed(err.need)}. `,
      h('a', { href: '/ui/settings/tokens' }, token.secret ? 'Use another token' : 'Sign in with a token'),
      '.');
  }
  if (err?.status === 404) {
    return h('div', { class: 'notice warn', role: 'alert', dataset: { status: '404' } }, h('strong', {}, 'Not found. '), err.message);
  }
  const status = err?.status ? `HTTP ${err.status}: ` : '';
  return h('div', { class: 'notice error', role: 'alert', dataset: { status: String(err?.status || '') } },
    h('strong', {}, what ? `Could not ${what}. ` : 'Failed. '), status, err?.message || String(err));
}

/** A short-lived message at the top of the page. */
export function flash(text, tone = 'good') {
  const el = h('div', { class: ['flash', tone], role: 'status' }, text);
  document.body.appendChild(el);
  setTimeout(() => el.remove(), 4000);
}

/**
 * Runs `action`, after asking `question` when one is given, and shows what
 * failed if it does. Answers what `action` returned, or undefined when
 * cancelled or failed.
 */
export async function act(question, what, action) {
  if (question && !(await confirmAction(`${what[0].toUpperCase()}${what.slice(1)}?`, question, 'Yes'))) return undefined;
  try {
    const out = await action();
    flash(`Done: ${what}.`);
    return out;
  } catch (err) {
    const box = errorBox(err, what);
    box.classList.add('flash');
    document.body.appendChild(box);
    setTimeout(() => box.remove(), 8000);
    return undefined;
  }
}
