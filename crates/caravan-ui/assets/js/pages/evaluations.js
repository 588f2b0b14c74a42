// Every evaluation the token may read, newest first, filtered by status and
// job, with each one's placement failures in a line.

import { h, mount } from '../dom.js';
import { count } from '../format.js';
import { watch, debounce } from '../live.js';
import { query, setQuery } from '../router.js';
import { errorBox } from '../parts/errors.js';
import { evalTable } from './job-tabs.js';

export default function render(root, { scope }) {
  const q = query();
  const filter = { status: q.get('status') || '', search: q.get('search') || '' };
  const table = evalTable({ job: true });
  const problem = h('div');
  const total = h('span', { class: 'muted' });
  let evals = null;

  const apply = () => {
    if (!evals) return;
    const needle = filter.search.toLowerCase();
    const rows = evals.filter((e) => (!filter.status || e.Status === filter.status)
      && (!needle || e.JobID.toLowerCase().includes(needle) || e.ID.startsWith(needle)));
    table.setRows(rows);
    total.textContent = `${count(rows.length)} of ${count(evals.length)} evaluations`;
  };
  const change = (name, value) => {
    filter[name] = value;
    setQuery({ [name]: value });
    table.reset();
    apply();
  };

  mount(root, h('section', { class: 'page evaluations-page' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Evaluations'), total),
    h('div', { class: 'filters' },
      h('input', { type: 'search', placeholder: 'Filter by job or ID', value: filter.search, oninput: debounce(150, (e) => change('search', e.target.value)) }),
      h('select', { 'aria-label': 'Status', onchange: (e) => change('status', e.target.value) },
        h('option', { value: '' }, 'Any status'),
        ['pending', 'blocked', 'complete', 'failed', 'canceled'].map((s) => h('option', { value: s, selected: s === filter.status }, s)))),
    problem,
    table.el));

  watch(scope, '/v1/evaluations', {
    query: { namespace: '*' },
    onData: (list) => {
      mount(problem);
      evals = [...list].sort((a, b) => b.CreateIndex - a.CreateIndex);
      apply();
    },
    onError: (err) => mount(problem, errorBox(err, 'list evaluations')),
  });
}
