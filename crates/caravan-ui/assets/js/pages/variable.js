// One variable: its items (values hidden until shown), edited as key/value
// rows and saved with check-and-set so a concurrent change is not lost; or a
// new variable.

import { h, mount } from '../dom.js';
import { get, put, del } from '../api.js';
import { ago, when } from '../format.js';
import { navigate } from '../router.js';
import { facts } from '../parts/status.js';
import { errorBox, act, flash } from '../parts/errors.js';
import { varHref } from './variables.js';

function splitVar(segment) {
  const at = segment.lastIndexOf('@');
  return at > 0 ? [segment.slice(0, at), segment.slice(at + 1)] : [segment, 'default'];
}

function itemRow(key = '', value = '') {
  const row = h('div', { class: 'kv-row' },
    h('input', { class: 'key mono', placeholder: 'key', value: key, 'aria-label': 'key' }),
    h('input', { class: 'value mono', type: 'password', placeholder: 'value', value, 'aria-label': 'value', autocomplete: 'off' }),
    h('button', { type: 'button', class: 'small', onclick: (e) => { const v = e.target.parentElement.querySelector('.value'); v.type = v.type === 'password' ? 'text' : 'password'; } }, 'Show'),
    h('button', { type: 'button', class: 'small', onclick: () => row.remove() }, 'Remove'));
  return row;
}

export default async function render(root, { params, scope }) {
  const creating = params.path === undefined;
  const [path, ns] = creating ? ['', 'default'] : splitVar(params.path);
  const problem = h('div');
  const rows = h('div', { class: 'kv-rows' });
  const pathInput = h('input', { class: 'mono', value: path, placeholder: 'nomad/jobs/example', disabled: !creating, 'aria-label': 'Path' });
  const nsInput = h('input', { value: ns, disabled: !creating, 'aria-label': 'Namespace' });
  const meta = h('div');
  let current = null;

  const items = () => {
    const out = {};
    for (const row of rows.querySelectorAll('.kv-row')) {
      const k = row.querySelector('.key').value.trim();
      if (k) out[k] = row.querySelector('.value').value;
    }
    return out;
  };
  const save = async () => {
    const p = pathInput.value.trim().replace(/^\/+|\/+$/g, '');
    const n = nsInput.value.trim() || 'default';
    if (!p) {
      flash('A variable needs a path.', 'bad');
      return;
    }
    const q = { namespace: n, cas: current ? current.ModifyIndex : 0 };
    const done = await act(null, `save ${p}`, () => put(`/v1/var/${p.split('/').map(encodeURIComponent).join('/')}`, { Namespace: n, Path: p, Items: items() }, q));
    if (done) navigate(varHref(p, n), { replace: true });
  };
  const remove = async () => {
    const done = await act(`Delete the variable ${path}?`, `delete ${path}`,
      () => del(`/v1/var/${path.split('/').map(encodeURIComponent).join('/')}`, { namespace: ns, cas: current?.ModifyIndex }));
    if (done !== undefined) navigate('/ui/variables');
  };

  mount(root, h('section', { class: 'page variable-page' },
    h('div', { class: 'page-head' }, h('h1', {}, creating ? 'New variable' : path)),
    problem,
    h('section', { class: 'card' },
      h('label', {}, h('span', {}, 'Path'), pathInput),
      h('label', {}, h('span', {}, 'Namespace'), nsInput),
      meta,
      h('h2', {}, 'Items'),
      rows,
      h('div', { class: 'buttons' },
        h('button', { type: 'button', onclick: () => rows.appendChild(itemRow()) }, 'Add item'),
        h('button', { type: 'button', class: 'primary', dataset: { action: 'save' }, onclick: save }, 'Save'),
        creating ? null : h('button', { type: 'button', class: 'danger', dataset: { action: 'delete' }, onclick: remove }, 'Delete')))));

  if (creating) {
    rows.appendChild(itemRow());
    return;
  }
  try {
    current = await get(`/v1/var/${path.split('/').map(encodeURIComponent).join('/')}`, { namespace: ns }, scope.signal);
    mount(meta, facts([
      ['Created', h('span', { title: when(current.CreateTime) }, ago(current.CreateTime))],
      ['Modified', h('span', { title: when(current.ModifyTime) }, ago(current.ModifyTime))],
      ['Modify index', String(current.ModifyIndex)],
    ]));
    for (const [k, v] of Object.entries(current.Items || {})) rows.appendChild(itemRow(k, v));
  } catch (err) {
    if (err.name !== 'AbortError') mount(problem, errorBox(err, `read the variable ${path}`));
  }
}
