// The cluster's servers: the api-gateways (Nomad's members), the leader of
// each leader-elected service, and the store's members.

import { h, mount } from '../dom.js';
import { get } from '../api.js';
import { every } from '../live.js';
import { badge } from '../parts/status.js';
import { errorBox } from '../parts/errors.js';

const REFRESH_MS = 10000;

export default function render(root, { scope }) {
  const members = h('div');
  const leaders = h('div');
  const raft = h('div');
  mount(root, h('section', { class: 'page servers-page' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Servers')),
    h('section', { class: 'card' }, h('h2', {}, 'API gateways'), members),
    h('section', { class: 'card' }, h('h2', {}, 'Leaders'), leaders),
    h('section', { class: 'card' }, h('h2', {}, 'Store'), raft)));

  const load = async (el, path, what, view) => {
    try {
      mount(el, view(await get(path, undefined, scope.signal)));
    } catch (err) {
      if (err.name !== 'AbortError') mount(el, errorBox(err, what));
    }
  };
  every(scope, REFRESH_MS, async () => {
    const leader = await get('/v1/status/leader', undefined, scope.signal).catch(() => '');
    await load(members, '/v1/agent/members', 'list the servers', (m) => h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['Name', 'Address', 'Status', 'Datacenter', 'Region', 'Version', ''].map((c) => h('th', {}, c)))),
      h('tbody', {}, (m.Members || []).map((s) => h('tr', {},
        h('td', {}, s.Name), h('td', { class: 'mono' }, `${s.Addr}:${s.Port}`), h('td', {}, badge(s.Status)),
        h('td', {}, s.Tags?.dc || ''), h('td', {}, s.Tags?.region || ''), h('td', {}, s.Tags?.build || ''),
        h('td', {}, `${s.Addr}:${s.Port}` === leader ? badge('leader') : ''))))));
    await load(leaders, '/v1/agent/self', 'read the agent', (self) => {
      const l = self.stats?.caravan?.leaders || {};
      return h('table', { class: 'list' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Service'), h('th', {}, 'Leader'))),
        h('tbody', {}, Object.entries(l).sort().map(([svc, addr]) => h('tr', {}, h('td', {}, svc), h('td', { class: 'mono' }, addr || h('span', { class: 'badge bad' }, 'none'))))));
    });
    await load(raft, '/v1/operator/raft/configuration', 'read the store\'s members', (c) => h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['ID', 'Node', 'Address', 'Leader', 'Voter'].map((x) => h('th', {}, x)))),
      h('tbody', {}, (c.Servers || []).map((s) => h('tr', {},
        h('td', { class: 'mono' }, s.ID), h('td', {}, s.Node), h('td', { class: 'mono' }, s.Address || '—'),
        h('td', {}, s.Leader ? 'yes' : ''), h('td', {}, s.Voter ? 'yes' : ''))))));
  });
}
