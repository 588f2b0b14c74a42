// A job's overview tab: why groups could not be placed, the latest
// deployment with its progress per group and the promote, pause and fail
// actions, the task groups with their summaries and scaling, and the most
// recent allocations.

import { h, mount } from '../dom.js';
import { post, jobPath } from '../api.js';
import { ago, count, when, duration } from '../format.js';
import { badge, summaryBar, SUMMARY_KEYS } from '../parts/status.js';
import { act } from '../parts/errors.js';
import { openForm } from '../parts/dialog.js';
import { placementFailures } from '../parts/placement.js';
import { allocTable } from '../parts/allocs.js';

const ACTIVE = new Set(['running', 'paused', 'pending', 'blocked', 'initializing', 'pending promotion']);

/** The evaluation whose placement failures still hold: the newest blocked one, else the newest with failures while allocations queue. */
export function failingEval(evals, summary) {
  if (!evals?.length) return null;
  const newest = [...evals].sort((a, b) => b.CreateIndex - a.CreateIndex);
  const withFailures = (e) => e.FailedTGAllocs && Object.keys(e.FailedTGAllocs).length;
  const blocked = newest.find((e) => e.Status === 'blocked' && withFailures(e));
  if (blocked) return blocked;
  const queued = Object.values(summary?.Summary || {}).some((g) => g.Queued > 0);
  return queued ? newest.find(withFailures) || null : null;
}

function deploymentBox(d, ctx) {
  const active = ACTIVE.has(d.Status);
  const groups = Object.entries(d.TaskGroups || {});
  const needsPromotion = groups.some(([, g]) => g.DesiredCanaries > 0 && !g.Promoted);
  // The deployment-watcher refuses a promotion until every canary is healthy.
  const canariesHealthy = groups.every(([, g]) => !g.DesiredCanaries || g.Promoted || g.HealthyAllocs >= g.DesiredCanaries);
  const q = ctx.q;
  const buttons = active ? [
    needsPromotion && d.Status === 'running' ? h('button', {
      class: 'primary', dataset: { action: 'promote' }, disabled: !canariesHealthy,
      title: canariesHealthy ? 'Promote the canaries and roll out the rest' : 'Waiting for the canaries to be healthy',
      onclick: () => act(null, 'promote the deployment', () => post(`/v1/deployment/promote/${d.ID}`, { DeploymentID: d.ID, All: true }, q)),
    }, 'Promote canaries') : null,
    h('button', {
      dataset: { action: d.Status === 'paused' ? 'resume' : 'pause' },
      onclick: () => act(null, `${d.Status === 'paused' ? 'resume' : 'pause'} the deployment`,
        () => post(`/v1/deployment/pause/${d.ID}`, { DeploymentID: d.ID, Pause: d.Status !== 'paused' }, q)),
    }, d.Status === 'paused' ? 'Resume' : 'Pause'),
    h('button', {
      class: 'danger', dataset: { action: 'fail' },
      onclick: () => act('Mark this deployment failed? With auto_revert the job goes back to its last stable version.',
        'fail the deployment', () => post(`/v1/deployment/fail/${d.ID}`, { DeploymentID: d.ID }, q)),
    }, 'Fail'),
  ] : [];
  return h('section', { class: ['card', 'deployment', active && 'active'], dataset: { deployment: d.ID, status: d.Status } },
    h('div', { class: 'card-head' },
      h('h2', {}, active ? 'Active deployment' : 'Latest deployment'),
      badge(d.Status),
      h('span', { class: 'muted mono' }, d.ID.slice(0, 8)),
      h('span', { class: 'muted' }, ` version ${d.JobVersion}`),
      h('div', { class: 'actions' }, buttons)),
    d.StatusDescription ? h('p', { class: 'muted' }, d.StatusDescription) : null,
    h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['Group', 'Progress', 'Desired', 'Placed', 'Healthy', 'Unhealthy', 'Canaries', 'Promoted', 'Progress by'].map((c) => h('th', {}, c)))),
      h('tbody', {}, groups.map(([name, g]) => {
        const pct = g.DesiredTotal ? Math.min(100, (100 * g.HealthyAllocs) / g.DesiredTotal) : 0;
        return h('tr', { dataset: { group: name } },
          h('td', {}, name),
          h('td', {}, h('div', { class: 'progress', title: `${g.HealthyAllocs} of ${g.DesiredTotal} healthy` },
            h('span', { style: { width: `${pct}%` } }))),
          h('td', { class: 'num' }, count(g.DesiredTotal)),
          h('td', { class: 'num' }, count(g.PlacedAllocs)),
          h('td', { class: 'num' }, count(g.HealthyAllocs)),
          h('td', { class: 'num' }, count(g.UnhealthyAllocs)),
          h('td', { class: 'num' }, g.DesiredCanaries ? `${(g.PlacedCanaries || []).length} / ${g.DesiredCanaries}` : '—'),
          h('td', {}, g.DesiredCanaries ? (g.Promoted ? 'yes' : 'no') : '—'),
          h('td', { title: when(g.RequireProgressBy) }, g.RequireProgressBy ? ago(g.RequireProgressBy) : duration(g.ProgressDeadline)));
      }))));
}

function groupsTable(state, ctx) {
  const groups = state.job.TaskGroups || [];
  const summary = state.summary?.Summary || {};
  return h('section', { class: 'card' }, h('h2', {}, 'Task groups'),
    h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Group'), h('th', {}, 'Count'), h('th', {}, 'Allocations'), h('th', {}, ''))),
      h('tbody', {}, groups.map((g) => h('tr', { dataset: { group: g.Name } },
        h('td', {}, g.Name),
        h('td', { class: 'num' }, count(g.Count)),
        h('td', {}, summaryBar(Object.fromEntries(SUMMARY_KEYS.map((k) => [k, summary[g.Name]?.[k] || 0])), { legend: true })),
        h('td', {}, state.job.Type === 'system' || state.job.Type === 'sysbatch' ? null : h('button', {
          class: 'small', dataset: { action: 'scale' },
          onclick: async () => {
            const form = await openForm(`Scale ${g.Name}`, [{ name: 'count', label: 'Count', type: 'number', value: g.Count, min: 0 }], { submit: 'Scale' });
            if (!form) return;
            const n = Number(form.count);
            await act(null, `scale ${g.Name} to ${n}`, () => post(`${jobPath(ctx.id)}/scale`,
              { Count: n, Target: { Group: g.Name }, Message: 'scaled from the UI' }, ctx.q));
          },
        }, 'Scale')))))));
}

/** The overview tab. */
export function overview(state, ctx) {
  const failures = h('div');
  const deployment = h('div');
  const groups = h('div');
  const allocs = allocTable({ pageSize: 10 });
  const el = h('div', {}, failures, deployment, groups, h('section', { class: 'card' }, h('h2', {}, 'Recent allocations'), allocs.el));
  return {
    el,
    watches: [['summary', `${jobPath(ctx.id)}/summary`, 'read the job summary'], ['allocs', `${jobPath(ctx.id)}/allocations`, 'list the job\'s allocations']],
    related: [['deployment', `${jobPath(ctx.id)}/deployment`, 'read the deployment'], ['evals', `${jobPath(ctx.id)}/evaluations`, 'list the job\'s evaluations']],
    update() {
      const failing = state.job.Stop ? null : failingEval(state.evals, state.summary);
      const queued = Object.fromEntries(Object.entries(state.summary?.Summary || {}).map(([g, s]) => [g, s.Queued]));
      mount(failures, failing ? [h('h2', { class: 'section-title' }, 'Placement failures'), placementFailures(failing.FailedTGAllocs, { queued, evalId: failing.ID, namespace: failing.Namespace })] : null);
      const d = state.deployment;
      mount(deployment, d && d.ID && state.job.Type === 'service' ? deploymentBox(d, ctx) : null);
      mount(groups, groupsTable(state, ctx));
      if (state.allocs) allocs.setRows(state.allocs);
    },
  };
}
