// Starts the app: the navigation bar, the signed-in token's name, and the router.

import { h, mount } from './dom.js';
import { get, token } from './api.js';
import { start } from './router.js';

const NAV = [
  ['/ui/jobs', 'Jobs'],
  ['/ui/clients', 'Clients'],
  ['/ui/servers', 'Servers'],
  ['/ui/evaluations', 'Evaluations'],
  ['/ui/variables', 'Variables'],
];

async function showWhoAmI() {
  const el = document.getElementById('whoami');
  if (!token.secret) {
    el.textContent = 'Sign in';
    el.classList.remove('signed-in');
    return;
  }
  try {
    const self = await get('/v1/acl/token/self');
    el.textContent = self.Name || `Token ${self.AccessorID.slice(0, 8)}`;
    el.classList.add('signed-in');
  } catch {
    el.textContent = 'Token (unverified)';
  }
}

mount(document.getElementById('nav'), NAV.map(([href, label]) => h('a', { href }, label)));
window.addEventListener('caravan:token', showWhoAmI);
showWhoAmI();
start(document.getElementById('page'));
