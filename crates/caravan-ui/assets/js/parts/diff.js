// The difference between two versions of a job, field by field. Lists of
// named things (task groups, tasks, services) are matched by name, so a
// change inside a task reads as that task's change, not a shifted list.

import { h } from '../dom.js';

// Fields that change with every submission, not with what the job says.
const NOISE = new Set(['Version', 'ModifyIndex', 'JobModifyIndex', 'CreateIndex', 'SubmitTime', 'Stable', 'Status', 'StatusDescription', 'VersionTag']);

function flatten(value, path, out) {
  if (Array.isArray(value)) {
    const named = value.length > 0 && value.every((v) => v && typeof v === 'object' && typeof v.Name === 'string');
    if (value.length === 0) out.set(path, '[]');
    value.forEach((v, i) => flatten(v, named ? `${path}[${v.Name}]` : `${path}[${i}]`, out));
  } else if (value && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 0) out.set(path, '{}');
    for (const k of keys) {
      if (path === '' && NOISE.has(k)) continue;
      flatten(value[k], path ? `${path}.${k}` : k, out);
    }
  } else {
    out.set(path, value === null ? 'null' : String(value));
  }
  return out;
}

/** The changed fields from `a` to `b`: [{path, type: 'added'|'removed'|'edited', old, new}]. */
export function jobDiff(a, b) {
  const left = flatten(a, '', new Map());
  const right = flatten(b, '', new Map());
  const rows = [];
  for (const [path, old] of left) {
    if (!right.has(path)) rows.push({ path, type: 'removed', old, new: '' });
    else if (right.get(path) !== old) rows.push({ path, type: 'edited', old, new: right.get(path) });
  }
  for (const [path, value] of right) {
    if (!left.has(path)) rows.push({ path, type: 'added', old: '', new: value });
  }
  return rows.sort((x, y) => (x.path < y.path ? -1 : 1));
}

/** The diff as a table. */
export function diffTable(rows) {
  if (!rows.length) return h('p', { class: 'muted' }, 'The two versions define the same job.');
  return h('table', { class: 'list diff' },
    h('thead', {}, h('tr', {}, h('th', {}, ''), h('th', {}, 'Field'), h('th', {}, 'Old'), h('th', {}, 'New'))),
    h('tbody', {}, rows.map((r) => h('tr', { class: r.type },
      h('td', { class: 'sign' }, r.type === 'added' ? '+' : r.type === 'removed' ? '−' : '±'),
      h('td', { class: 'mono' }, r.path),
      h('td', { class: 'mono old' }, r.old),
      h('td', { class: 'mono new' }, r.new)))));
}
