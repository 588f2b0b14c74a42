// Signing in: the ACL token's secret is checked against /v1/acl/token/self
// and kept in this browser (localStorage); every API call then sends it as
// X-Nomad-Token. Signing out forgets it.

import { h, mount } from '../dom.js';
import { get, token } from '../api.js';
import { when } from '../format.js';
import { navigate } from '../router.js';
import { facts } from '../parts/status.js';
import { errorBox } from '../parts/errors.js';

export default async function render(root, { scope }) {
  const status = h('div');
  const secret = h('input', { type: 'password', name: 'secret', class: 'mono', placeholder: 'Secret ID', autocomplete: 'off', 'aria-label': 'Secret ID' });

  const show = async () => {
    if (!token.secret) {
      mount(status, h('p', { class: 'muted' }, 'Not signed in: calls are made as the anonymous token.'));
      return;
    }
    try {
      const self = await get('/v1/acl/token/self', undefined, scope.signal);
      mount(status, h('div', { class: 'notice good', dataset: { signedIn: self.AccessorID } },
        h('strong', {}, `Signed in as ${self.Name || 'an unnamed token'}.`),
        facts([
          ['Accessor ID', h('span', { class: 'mono' }, self.AccessorID)],
          ['Type', self.Type],
          ['Policies', (self.Policies || []).join(', ') || (self.Type === 'management' ? 'all (management)' : 'none')],
          ['Expires', self.ExpirationTime ? when(self.ExpirationTime) : 'never'],
        ]),
        h('button', { onclick: () => { token.clear(); show(); } }, 'Sign out')));
    } catch (err) {
      if (err.name === 'AbortError') return;
      mount(status, errorBox(err, 'check the token'));
    }
  };

  const signIn = async (e) => {
    e.preventDefault();
    const value = secret.value.trim();
    if (!value) return;
    const previous = token.secret;
    token.set(value);
    try {
      await get('/v1/acl/token/self');
      secret.value = '';
      navigate('/ui/jobs');
    } catch (err) {
      if (previous) token.set(previous);
      else token.clear();
      mount(status, err.status === 403 || err.status === 404
        ? h('div', { class: 'notice error', role: 'alert' }, h('strong', {}, 'That token was not accepted. '), err.message)
        : errorBox(err, 'check the token'));
    }
  };

  mount(root, h('section', { class: 'page token-page' },
    h('div', { class: 'page-head' }, h('h1', {}, 'ACL token')),
    h('p', {}, 'With ACLs enabled, sign in with a token\'s secret ID. It is kept in this browser only and sent with every request.'),
    h('form', { class: 'sign-in', onsubmit: signIn }, secret, h('button', { type: 'submit', class: 'primary', dataset: { action: 'sign-in' } }, 'Sign in')),
    status));
  show();
}
