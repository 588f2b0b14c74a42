// A client node's page: status, eligibility and drain with their actions,
// allocated against available resources, its allocations, its drivers and
// their health, its attributes and meta, and its recent events.

import { h, mount } from '../dom.js';
import { ago, when, clock, mhz, mib, duration } from '../format.js';
import { watch } from '../live.js';
import { badge, facts, meter } from '../parts/status.js';
import { errorBox } from '../parts/errors.js';
import { allocTable } from '../parts/allocs.js';
import { capacity, allocated, nodeActions } from '../parts/nodes.js';

function drainText(node) {
  const s = node.DrainStrategy;
  if (!s) return null;
  const spec = s.DrainSpec || s;
  const deadline = spec.Deadline === -1 ? 'forced (no deadline)' : spec.Deadline > 0 ? `deadline ${duration(spec.Deadline)}` : 'no deadline';
  const force = spec.Deadline > 0 && s.ForceDeadline ? `, stops what is left ${ago(s.ForceDeadline)}` : '';
  return `${deadline}${spec.IgnoreSystemJobs ? ', system jobs stay' : ''}${force}`;
}

function keyValues(title, obj, cls) {
  const entries = Object.entries(obj || {}).sort(([a], [b]) => a.localeCompare(b));
  return h('section', { class: ['card', cls] }, h('h2', {}, title),
    entries.length
      ? h('table', { class: 'list kv' }, h('tbody', {}, entries.map(([k, v]) => h('tr', {}, h('td', { class: 'mono' }, k), h('td', { class: 'mono' }, String(v))))))
      : h('p', { class: 'muted' }, 'None.'));
}

export default function render(root, { params, scope }) {
  const id = params.node;
  const path = `/v1/node/${encodeURIComponent(id)}`;
  const head = h('div');
  const resources = h('div');
  const problem = h('div');
  const details = h('div');
  const allocs = allocTable({ node: false, job: true });
  let node = null;
  let nodeAllocs = null;

  const showResources = () => {
    if (!node || !nodeAllocs) return;
    const cap = capacity(node);
    const used = allocated(nodeAllocs);
    mount(resources, h('div', { class: 'meters' },
      h('div', {}, h('span', {}, 'CPU allocated'), meter(used.cpu, cap.cpu, mhz)),
      h('div', {}, h('span', {}, 'Memory allocated'), meter(used.mem, cap.mem, mib))));
  };

  mount(root, h('section', { class: 'page client-page', dataset: { node: id } },
    head, problem,
    h('section', { class: 'card' }, h('h2', {}, 'Resources'), resources),
    h('section', { class: 'card' }, h('h2', {}, 'Allocations'), allocs.el),
    details));

  watch(scope, path, {
    onData: (n) => {
      node = n;
      mount(problem);
      mount(head,
        h('div', { class: 'page-head' }, h('h1', {}, n.Name), badge(n.Status), badge(n.SchedulingEligibility),
          n.Drain ? badge('draining') : null, nodeActions(n)),
        facts([
          ['ID', h('span', { class: 'mono' }, n.ID)],
          ['Address', n.HTTPAddr || n.Address],
          ['Datacenter', n.Datacenter],
          ['Node pool', n.NodePool],
          ['Class', n.NodeClass || '—'],
          ['Status', n.StatusDescription || n.Status],
          ['Status updated', h('span', { title: when(n.StatusUpdatedAt) }, ago(n.StatusUpdatedAt))],
          n.Drain ? ['Drain', drainText(n)] : null,
          n.LastDrain ? ['Last drain', `${n.LastDrain.Status || ''} ${ago(n.LastDrain.UpdatedAt)}`] : null,
        ]));
      const drivers = Object.entries(n.Drivers || {}).sort(([a], [b]) => a.localeCompare(b));
      mount(details,
        h('section', { class: 'card' }, h('h2', {}, 'Drivers'),
          h('table', { class: 'list' },
            h('thead', {}, h('tr', {}, ['Driver', 'Detected', 'Health', 'Description', 'Updated'].map((c) => h('th', {}, c)))),
            h('tbody', {}, drivers.map(([name, d]) => h('tr', { dataset: { driver: name } },
              h('td', {}, name),
              h('td', {}, d.Detected ? 'yes' : 'no'),
              h('td', {}, badge(d.Healthy ? 'healthy' : 'unhealthy')),
              h('td', {}, d.HealthDescription || ''),
              h('td', { title: when(d.UpdateTime) }, ago(d.UpdateTime))))))),
        (n.Events || []).length ? h('section', { class: 'card' }, h('h2', {}, 'Events'),
          h('ol', { class: 'timeline' }, [...n.Events].reverse().map((e) => h('li', {},
            h('time', { title: when(e.Timestamp) }, clock(e.Timestamp)), ' ', h('b', {}, e.Subsystem || ''), ' ', e.Message || '')))) : null,
        keyValues('Attributes', n.Attributes, 'attributes'),
        keyValues('Meta', n.Meta, 'meta'));
      showResources();
    },
    onError: (err) => mount(problem, errorBox(err, 'read the node')),
  });
  watch(scope, `${path}/allocations`, {
    onData: (list) => {
      nodeAllocs = list;
      allocs.setRows(list);
      showResources();
    },
    onError: (err) => mount(problem, errorBox(err, 'list the node\'s allocations')),
  });
}
