// Nomad Variables the token may list, in every namespace: path, namespace,
// last change. Reading one needs `read` on its path (the variable's page
// says so when the token lacks it).

import { h, mount } from '../dom.js';
import { ago, when, count } from '../format.js';
import { watch, debounce } from '../live.js';
import { PagedTable } from '../parts/table.js';
import { errorBox } from '../parts/errors.js';

/** The page of a variable. */
export function varHref(path, namespace) {
  return `/ui/variables/var/${path.split('/').map(encodeURIComponent).join('/')}@${encodeURIComponent(namespace || 'default')}`;
}

export default function render(root, { scope }) {
  let vars = null;
  let needle = '';
  const total = h('span', { class: 'muted' });
  const problem = h('div');
  const table = new PagedTable([
    { label: 'Path', sort: (v) => v.Path, cell: (v) => h('a', { href: varHref(v.Path, v.Namespace), class: 'mono' }, v.Path) },
    { label: 'Namespace', sort: (v) => v.Namespace, cell: (v) => v.Namespace },
    { label: 'Modified', sort: (v) => v.ModifyTime, cell: (v) => h('span', { title: when(v.ModifyTime) }, ago(v.ModifyTime)) },
  ], { empty: 'No variables this token may list.' });
  const apply = () => {
    if (!vars) return;
    const rows = vars.filter((v) => !needle || v.Path.toLowerCase().includes(needle));
    table.setRows(rows);
    total.textContent = `${count(rows.length)} variables`;
  };
  mount(root, h('section', { class: 'page variables-page' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Variables'), total, h('a', { class: 'button primary', href: '/ui/variables/new' }, 'New variable')),
    h('div', { class: 'filters' }, h('input', {
      type: 'search', placeholder: 'Filter by path', 'aria-label': 'Filter by path',
      oninput: debounce(150, (e) => { needle = e.target.value.toLowerCase(); table.reset(); apply(); }),
    })),
    problem,
    table.el));
  watch(scope, '/v1/vars', {
    query: { namespace: '*' },
    onData: (list) => {
      mount(problem);
      vars = list;
      apply();
    },
    onError: (err) => mount(problem, errorBox(err, 'list variables')),
  });
}
