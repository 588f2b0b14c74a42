// The client node list: status, eligibility, drain, pool, datacenter, and
// allocated against available CPU and memory. The node list (stubs, without
// resources) comes from one blocking query; what a node offers and what its
// allocations take are read for the rows on screen only, so 5,000 nodes
// cost one list and one page of reads.

import { h, mount } from '../dom.js';
import { get } from '../api.js';
import { count, shortId, mhz, mib } from '../format.js';
import { watch, debounce } from '../live.js';
import { query, setQuery } from '../router.js';
import { PagedTable } from '../parts/table.js';
import { badge, meter } from '../parts/status.js';
import { errorBox } from '../parts/errors.js';
import { capacity, allocated } from '../parts/nodes.js';

/** How long a node's allocation totals are reused before they are read again. */
const USAGE_TTL_MS = 10000;
/** Node allocation reads in flight at once, leaving the browser's other connections free. */
const PARALLEL_READS = 4;

export default function render(root, { scope }) {
  const q = query();
  const filter = { search: q.get('search') || '', status: q.get('status') || '', eligibility: q.get('eligibility') || '', pool: q.get('pool') || '', dc: q.get('dc') || '' };
  const usage = new Map();
  let nodes = null;
  let shown = [];

  const usageCell = (n, pick) => {
    const u = usage.get(n.ID);
    if (!u) return h('span', { class: 'muted' }, '…');
    return pick === 'cpu' ? meter(u.cpu, u.cap.cpu, mhz) : meter(u.mem, u.cap.mem, mib);
  };
  const table = new PagedTable([
    { label: 'Name', sort: (n) => n.Name, cell: (n) => h('a', { href: `/ui/clients/${encodeURIComponent(n.ID)}`, class: 'node-link' }, n.Name) },
    { label: 'ID', sort: (n) => n.ID, cell: (n) => h('span', { class: 'mono' }, shortId(n.ID)) },
    { label: 'Status', sort: (n) => n.Status, cell: (n) => badge(n.Status) },
    { label: 'Eligibility', sort: (n) => n.SchedulingEligibility, cell: (n) => badge(n.SchedulingEligibility) },
    { label: 'Drain', sort: (n) => n.Drain, cell: (n) => (n.Drain ? badge('draining') : '—') },
    { label: 'Pool', sort: (n) => n.NodePool, cell: (n) => n.NodePool },
    { label: 'Datacenter', sort: (n) => n.Datacenter, cell: (n) => n.Datacenter },
    { label: 'Class', sort: (n) => n.NodeClass, cell: (n) => n.NodeClass || '—' },
    { label: 'Address', sort: (n) => n.Address, cell: (n) => n.Address },
    { label: 'Running', cell: (n) => (usage.has(n.ID) ? count(usage.get(n.ID).running) : '…'), class: 'num' },
    { label: 'CPU', cell: (n) => usageCell(n, 'cpu') },
    { label: 'Memory', cell: (n) => usageCell(n, 'mem') },
  ], { empty: 'No client nodes match.', onPage: (rows) => { shown = rows; loadUsage(); } });

  const loadUsage = debounce(50, async () => {
    const now = Date.now();
    const todo = shown.filter((n) => !usage.has(n.ID) || now - usage.get(n.ID).at > USAGE_TTL_MS);
    let changed = false;
    const worker = async () => {
      while (todo.length && scope.alive) {
        const n = todo.shift();
        const path = `/v1/node/${encodeURIComponent(n.ID)}`;
        try {
          // What a node offers changes only with the node: read it again
          // when its ModifyIndex moves.
          let cap = usage.get(n.ID)?.cap;
          if (!cap || usage.get(n.ID).index !== n.ModifyIndex) cap = capacity(await get(path, undefined, scope.signal));
          const allocs = await get(`${path}/allocations`, undefined, scope.signal);
          usage.set(n.ID, { ...allocated(allocs), cap, index: n.ModifyIndex, at: Date.now() });
          changed = true;
        } catch (err) {
          if (err.name === 'AbortError') return;
          usage.set(n.ID, { cpu: 0, mem: 0, running: 0, cap: { cpu: 0, mem: 0 }, at: Date.now() });
        }
      }
    };
    await Promise.all(Array.from({ length: PARALLEL_READS }, worker));
    if (changed && scope.alive) table.render();
  });

  const problem = h('div');
  const total = h('span', { class: 'muted' });
  const selects = {};
  const select = (name, label) => {
    selects[name] = h('select', { 'aria-label': label, onchange: (e) => change(name, e.target.value) });
    return selects[name];
  };
  const fill = (name, label, values) => mount(selects[name], h('option', { value: '' }, `Any ${label}`),
    values.map((v) => h('option', { value: v, selected: filter[name] === v }, v)));
  const search = h('input', {
    type: 'search', placeholder: 'Filter by name or ID', value: filter.search, 'aria-label': 'Filter by name or ID',
    oninput: debounce(150, (e) => change('search', e.target.value)),
  });

  function change(name, value) {
    filter[name] = value;
    setQuery({ [name]: value });
    table.reset();
    apply();
  }

  function apply() {
    if (!nodes) return;
    const needle = filter.search.toLowerCase();
    const rows = nodes.filter((n) => (!filter.status || n.Status === filter.status)
      && (!filter.eligibility || n.SchedulingEligibility === filter.eligibility)
      && (!filter.pool || n.NodePool === filter.pool)
      && (!filter.dc || n.Datacenter === filter.dc)
      && (!needle || n.Name.toLowerCase().includes(needle) || n.ID.startsWith(needle)));
    table.setRows(rows);
    total.textContent = rows.length === nodes.length ? `${count(nodes.length)} nodes` : `${count(rows.length)} of ${count(nodes.length)} nodes`;
  }

  mount(root, h('section', { class: 'page clients-page' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Clients'), total),
    h('div', { class: 'filters' }, search, select('status', 'status'), select('eligibility', 'eligibility'), select('pool', 'pool'), select('dc', 'datacenter')),
    problem,
    table.el));
  fill('status', 'status', ['initializing', 'ready', 'down', 'disconnected']);
  fill('eligibility', 'eligibility', ['eligible', 'ineligible']);
  fill('pool', 'pool', []);
  fill('dc', 'datacenter', []);

  watch(scope, '/v1/nodes', {
    onData: (list) => {
      mount(problem);
      nodes = list;
      fill('pool', 'pool', [...new Set(list.map((n) => n.NodePool))].sort());
      fill('dc', 'datacenter', [...new Set(list.map((n) => n.Datacenter))].sort());
      apply();
    },
    onError: (err) => mount(problem, errorBox(err, 'list client nodes')),
  });
}
