// A job's other tabs: all its allocations, its evaluations (with why a
// group could not be placed), its versions and the diff between any two
// (with revert), its deployments, and its definition.

import { h, mount } from '../dom.js';
import { post, jobPath } from '../api.js';
import { ago, when, shortId, count } from '../format.js';
import { badge } from '../parts/status.js';
import { act } from '../parts/errors.js';
import { allocTable, evalHref } from '../parts/allocs.js';
import { reasons } from '../parts/placement.js';
import { jobDiff, diffTable } from '../parts/diff.js';
import { PagedTable } from '../parts/table.js';

/** Every allocation of the job, with a status filter. */
export function allocationsTab(state, ctx) {
  const table = allocTable();
  let status = '';
  const apply = () => state.allocs && table.setRows(state.allocs.filter((a) => !status || a.ClientStatus === status));
  const filter = h('select', { 'aria-label': 'Status', onchange: (e) => { status = e.target.value; table.reset(); apply(); } },
    h('option', { value: '' }, 'Any status'),
    ['pending', 'running', 'complete', 'failed', 'lost', 'unknown'].map((s) => h('option', { value: s }, s)));
  return {
    el: h('section', { class: 'card' }, h('div', { class: 'filters' }, filter), table.el),
    watches: [['allocs', `${jobPath(ctx.id)}/allocations`, 'list the job\'s allocations']],
    update: apply,
  };
}

/** The evaluation table of a job or the cluster. */
export function evalTable(options = {}) {
  return new PagedTable([
    { label: 'ID', sort: (e) => e.ID, cell: (e) => h('a', { href: evalHref(e.ID, e.Namespace), class: 'mono eval-link', dataset: { eval: e.ID } }, shortId(e.ID)) },
    options.job ? { label: 'Job', sort: (e) => e.JobID, cell: (e) => h('a', { href: `/ui/jobs/${encodeURIComponent(`${e.JobID}@${e.Namespace}`)}` }, e.JobID) } : null,
    { label: 'Status', sort: (e) => e.Status, cell: (e) => badge(e.Status) },
    { label: 'Triggered by', sort: (e) => e.TriggeredBy, cell: (e) => e.TriggeredBy },
    { label: 'Type', sort: (e) => e.Type, cell: (e) => e.Type },
    { label: 'Priority', sort: (e) => e.Priority, cell: (e) => String(e.Priority), class: 'num' },
    {
      label: 'Placement failures',
      cell: (e) => {
        const failed = Object.entries(e.FailedTGAllocs || {});
        if (!failed.length) return '—';
        return h('ul', { class: 'compact' }, failed.map(([g, m]) => h('li', {}, h('b', {}, `${g}: `), reasons(m).join(' '))));
      },
    },
    { label: 'Created', sort: (e) => e.CreateTime, cell: (e) => h('span', { title: when(e.CreateTime) }, ago(e.CreateTime)) },
  ].filter(Boolean), { empty: 'No evaluations.', ...options });
}

/** The job's evaluations. */
export function evaluationsTab(state, ctx) {
  const table = evalTable();
  return {
    el: h('section', { class: 'card' }, table.el),
    watches: [['evals', `${jobPath(ctx.id)}/evaluations`, 'list the job\'s evaluations']],
    update() {
      if (state.evals) table.setRows([...state.evals].sort((a, b) => b.CreateIndex - a.CreateIndex));
    },
  };
}

/** The job's versions: pick two to see what changed; revert to an older one. */
export function versionsTab(state, ctx) {
  const list = h('div');
  const diff = h('div');
  let left = null;
  let right = null;
  let seenVersion = null;
  const view = {
    el: h('div', {}, h('section', { class: 'card' }, h('h2', {}, 'Versions'), list), h('section', { class: 'card' }, h('h2', {}, 'Changes'), diff)),
    related: [['versions', `${jobPath(ctx.id)}/versions`, 'list the job\'s versions']],
    update() {
      const versions = state.versions?.Versions;
      if (!versions) return;
      const byVersion = [...versions].sort((a, b) => b.Version - a.Version);
      if (seenVersion !== byVersion[0].Version) {
        seenVersion = byVersion[0].Version;
        right = byVersion[0].Version;
        left = byVersion[1]?.Version ?? byVersion[0].Version;
      }
      const radio = (side, v) => h('input', {
        type: 'radio', name: `diff-${side}`, checked: (side === 'a' ? left : right) === v, 'aria-label': `compare ${side === 'a' ? 'from' : 'to'} version ${v}`,
        onchange: () => {
          if (side === 'a') left = v;
          else right = v;
          view.update();
        },
      });
      mount(list, h('table', { class: 'list versions' },
        h('thead', {}, h('tr', {}, ['From', 'To', 'Version', 'Stable', 'Submitted', ''].map((c) => h('th', {}, c)))),
        h('tbody', {}, byVersion.map((v) => h('tr', { dataset: { version: v.Version } },
          h('td', {}, radio('a', v.Version)),
          h('td', {}, radio('b', v.Version)),
          h('td', { class: 'num' }, String(v.Version)),
          h('td', {}, v.Stable ? badge('stable') : '—'),
          h('td', { title: when(v.SubmitTime) }, ago(v.SubmitTime)),
          h('td', {}, v.Version === byVersion[0].Version ? h('span', { class: 'muted' }, 'current') : h('button', {
            class: 'small', dataset: { action: 'revert' },
            onclick: () => act(`Revert ${ctx.id} to version ${v.Version}? This submits that version again as a new one.`,
              `revert to version ${v.Version}`, () => post(`${jobPath(ctx.id)}/revert`, { JobID: ctx.id, JobVersion: v.Version }, ctx.q)),
          }, 'Revert')))))));
      const a = versions.find((v) => v.Version === left);
      const b = versions.find((v) => v.Version === right);
      mount(diff, a && b ? [h('p', { class: 'muted' }, `From version ${left} to version ${right}:`), diffTable(jobDiff(a, b))] : null);
    },
  };
  return view;
}

/** The job's deployments. */
export function deploymentsTab(state, ctx) {
  const table = new PagedTable([
    { label: 'ID', cell: (d) => h('span', { class: 'mono' }, shortId(d.ID)) },
    { label: 'Version', sort: (d) => d.JobVersion, cell: (d) => String(d.JobVersion), class: 'num' },
    { label: 'Status', sort: (d) => d.Status, cell: (d) => badge(d.Status) },
    { label: 'Description', cell: (d) => d.StatusDescription },
    {
      label: 'Groups',
      cell: (d) => Object.entries(d.TaskGroups || {}).map(([g, s]) => h('div', {}, `${g}: ${count(s.HealthyAllocs)} / ${count(s.DesiredTotal)} healthy`,
        s.DesiredCanaries ? `, ${(s.PlacedCanaries || []).length} / ${s.DesiredCanaries} canaries${s.Promoted ? ' (promoted)' : ''}` : '')),
    },
    { label: 'Modified', sort: (d) => d.ModifyTime, cell: (d) => h('span', { title: when(d.ModifyTime) }, ago(d.ModifyTime)) },
  ], { empty: 'No deployments.' });
  return {
    el: h('section', { class: 'card' }, table.el),
    related: [['deployments', `${jobPath(ctx.id)}/deployments`, 'list the job\'s deployments']],
    update() {
      if (state.deployments) table.setRows([...state.deployments].sort((a, b) => b.CreateIndex - a.CreateIndex));
    },
  };
}

/** The job as stored, in Nomad's JSON. */
export function definitionTab(state, ctx) {
  const pre = h('pre', { class: 'definition' });
  return {
    el: h('section', { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', {}, 'Definition'),
        h('a', { class: 'button', href: `/ui/jobs/run?job=${encodeURIComponent(`${ctx.id}@${ctx.ns}`)}` }, 'Edit and plan')),
      pre),
    update() {
      pre.textContent = JSON.stringify(state.job, null, 2);
    },
  };
}
