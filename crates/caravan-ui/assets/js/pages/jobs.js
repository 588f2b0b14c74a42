// The job list: every job the token may list, in every namespace, with its
// type, status and allocation summary; filtered by namespace, status, type
// and name; one page of rows at a time; kept current by a blocking query.

import { h, mount } from '../dom.js';
import { count, ago, when } from '../format.js';
import { watch, debounce } from '../live.js';
import { query, setQuery } from '../router.js';
import { PagedTable } from '../parts/table.js';
import { badge, summaryBar, totalSummary } from '../parts/status.js';
import { errorBox } from '../parts/errors.js';

/** A job's page: its id and namespace in one path segment, as Nomad's UI spells it. */
export function jobHref(id, namespace = 'default') {
  return `/ui/jobs/${encodeURIComponent(`${id}@${namespace}`)}`;
}

function childrenText(c) {
  if (!c) return '';
  return `${count(c.Pending)} pending, ${count(c.Running)} running, ${count(c.Dead)} dead`;
}

export default function render(root, { scope }) {
  const q = query();
  const filter = {
    namespace: q.get('namespace') || '',
    status: q.get('status') || '',
    type: q.get('type') || '',
    search: q.get('search') || '',
  };
  let jobs = null;
  let firstRender = true;

  const table = new PagedTable([
    { label: 'Name', sort: (j) => j.Name, cell: (j) => h('a', { href: jobHref(j.ID, j.Namespace), class: 'job-link' }, j.Name || j.ID) },
    { label: 'Namespace', sort: (j) => j.Namespace, cell: (j) => j.Namespace },
    { label: 'Type', sort: (j) => j.Type, cell: (j) => [j.Type, j.Periodic ? ' · periodic' : '', j.ParameterizedJob ? ' · parameterized' : ''] },
    { label: 'Priority', sort: (j) => j.Priority, cell: (j) => String(j.Priority), class: 'num' },
    { label: 'Status', sort: (j) => j.Status, cell: (j) => [badge(j.Status), j.Stop ? h('span', { class: 'muted' }, ' stopped') : null] },
    {
      label: 'Allocations',
      cell: (j) => (j.Periodic || j.ParameterizedJob
        ? h('span', { class: 'muted' }, childrenText(j.JobSummary?.Children))
        : summaryBar(totalSummary(j.JobSummary?.Summary))),
    },
    { label: 'Submitted', sort: (j) => j.SubmitTime, cell: (j) => h('span', { title: when(j.SubmitTime) }, ago(j.SubmitTime)) },
  ], { empty: 'No jobs match these filters.' });

  const problem = h('div');
  const total = h('span', { class: 'muted' });
  const nsSelect = h('select', { 'aria-label': 'Namespace', onchange: (e) => change('namespace', e.target.value) });
  const select = (name, label, values) => h('select', { 'aria-label': label, onchange: (e) => change(name, e.target.value) },
    h('option', { value: '' }, `Any ${label.toLowerCase()}`),
    values.map((v) => h('option', { value: v, selected: filter[name] === v }, v)));
  const search = h('input', {
    type: 'search', placeholder: 'Filter by name', value: filter.search, 'aria-label': 'Filter by name',
    oninput: debounce(150, (e) => change('search', e.target.value)),
  });

  function change(name, value) {
    filter[name] = value;
    setQuery({ [name]: value });
    table.reset();
    apply();
  }

  function apply() {
    if (!jobs) return;
    const needle = filter.search.toLowerCase();
    const rows = jobs.filter((j) => (!filter.namespace || j.Namespace === filter.namespace)
      && (!filter.status || j.Status === filter.status)
      && (!filter.type || j.Type === filter.type)
      && (!needle || (j.Name || j.ID).toLowerCase().includes(needle) || j.ID.toLowerCase().includes(needle)));
    table.setRows(rows);
    total.textContent = rows.length === jobs.length ? `${count(jobs.length)} jobs` : `${count(rows.length)} of ${count(jobs.length)} jobs`;
    if (firstRender) {
      firstRender = false;
      performance.mark('caravan:jobs-rendered');
      document.body.dataset.jobsRendered = String(Math.round(performance.now()));
    }
  }

  function showNamespaces() {
    const names = [...new Set(jobs.map((j) => j.Namespace))].sort();
    if (filter.namespace && !names.includes(filter.namespace)) names.push(filter.namespace);
    mount(nsSelect, h('option', { value: '' }, 'All namespaces'), names.map((n) => h('option', { value: n, selected: n === filter.namespace }, n)));
  }

  mount(root, h('section', { class: 'page jobs-page' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Jobs'), total, h('a', { class: 'button primary', href: '/ui/jobs/run' }, 'Run job')),
    h('div', { class: 'filters' }, search, nsSelect,
      select('status', 'Status', ['pending', 'running', 'dead']),
      select('type', 'Type', ['service', 'batch', 'system', 'sysbatch'])),
    problem,
    table.el));
  mount(nsSelect, h('option', { value: '' }, 'All namespaces'));

  watch(scope, '/v1/jobs', {
    query: { namespace: '*' },
    onData: (list) => {
      mount(problem);
      jobs = list;
      showNamespaces();
      apply();
    },
    onError: (err) => mount(problem, errorBox(err, 'list jobs')),
  });
}
