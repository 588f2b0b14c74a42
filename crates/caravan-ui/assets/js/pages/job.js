// A job's page: its header and actions (stop, start, purge, edit, dispatch,
// force a periodic launch), and the tabs: overview (placement failures, the
// current deployment, task groups, recent allocations), allocations,
// evaluations, versions with their diff, deployments, definition. Kept
// current by blocking queries on the job, its summary and its allocations;
// the rest is re-read when those change.

import { h, mount } from '../dom.js';
import { get, post, del, jobPath } from '../api.js';
import { ago, when } from '../format.js';
import { watch, debounce } from '../live.js';
import { navigate } from '../router.js';
import { badge, facts } from '../parts/status.js';
import { errorBox, act } from '../parts/errors.js';
import { openForm } from '../parts/dialog.js';
import { tabs } from '../parts/tabs.js';
import { jobHref } from './jobs.js';
import { overview } from './job-overview.js';
import { allocationsTab, evaluationsTab, versionsTab, deploymentsTab, definitionTab } from './job-tabs.js';

/** Splits "id@namespace" (the namespace defaults to "default"). */
export function splitJob(segment) {
  const at = segment.lastIndexOf('@');
  return at > 0 ? [segment.slice(0, at), segment.slice(at + 1)] : [segment, 'default'];
}

function actions(state, ctx) {
  const { job } = state;
  const { id, ns } = ctx;
  const q = { namespace: ns };
  const out = [];
  if (!job.Stop) {
    out.push(h('button', {
      class: 'danger', dataset: { action: 'stop' },
      onclick: () => act(`Stop job "${id}"? Its allocations will be stopped.`, `stop job ${id}`, () => del(jobPath(id), q)),
    }, 'Stop'));
  } else {
    out.push(h('button', {
      class: 'primary', dataset: { action: 'start' },
      onclick: () => act(null, `start job ${id}`, async () => {
        const current = await get(jobPath(id), q);
        return post(jobPath(id), { Job: { ...current, Stop: false } }, q);
      }),
    }, 'Start'));
    out.push(h('button', {
      class: 'danger', dataset: { action: 'purge' },
      onclick: async () => {
        const done = await act(`Purge job "${id}"? It and its history are removed for good.`, `purge job ${id}`,
          () => del(jobPath(id), { ...q, purge: 'true' }));
        if (done) navigate('/ui/jobs');
      },
    }, 'Purge'));
  }
  if (job.ParameterizedJob && !job.Dispatched) {
    out.push(h('button', {
      dataset: { action: 'dispatch' },
      onclick: async () => {
        const form = await openForm(`Dispatch ${id}`, [
          { name: 'payload', label: 'Payload', type: 'textarea', placeholder: 'optional' },
          { name: 'meta', label: 'Meta (KEY=value, one a line)', type: 'textarea' },
        ], { submit: 'Dispatch' });
        if (!form) return;
        const meta = {};
        for (const line of form.meta.split('\n').map((l) => l.trim()).filter(Boolean)) {
          const eq = line.indexOf('=');
          if (eq > 0) meta[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
        }
        const bytes = new TextEncoder().encode(form.payload);
        const payload = form.payload ? btoa(String.fromCharCode(...bytes)) : undefined;
        const out2 = await act(null, `dispatch ${id}`, () => post(`${jobPath(id)}/dispatch`, { Payload: payload, Meta: meta }, q));
        if (out2?.DispatchedJobID) navigate(jobHref(out2.DispatchedJobID, ns));
      },
    }, 'Dispatch'));
  }
  if (job.Periodic) {
    out.push(h('button', {
      dataset: { action: 'force' },
      onclick: () => act(null, `launch ${id} now`, () => post(`${jobPath(id)}/periodic/force`, {}, q)),
    }, 'Force launch'));
  }
  out.push(h('a', { class: 'button', href: `/ui/jobs/run?job=${encodeURIComponent(`${id}@${ns}`)}`, dataset: { action: 'edit' } }, 'Edit'));
  return h('div', { class: 'actions' }, out);
}

function header(state, ctx) {
  const { job } = state;
  return [
    h('div', { class: 'page-head' },
      h('h1', {}, job.Name || job.ID),
      badge(job.Status),
      job.Stop ? badge('stopped') : null,
      actions(state, ctx)),
    facts([
      ['Type', job.Type],
      ['Namespace', job.Namespace],
      ['Priority', String(job.Priority)],
      ['Version', String(job.Version)],
      ['Datacenters', (job.Datacenters || []).join(', ')],
      ['Node pool', job.NodePool],
      ['Submitted', h('span', { title: when(job.SubmitTime) }, ago(job.SubmitTime))],
      job.ParentID ? ['Parent', h('a', { href: jobHref(job.ParentID, job.Namespace) }, job.ParentID)] : null,
      job.Periodic ? ['Periodic', `${job.Periodic.Spec || ''} (${job.Periodic.TimeZone || 'UTC'})`] : null,
      job.ParameterizedJob ? ['Parameterized', `payload ${job.ParameterizedJob.Payload || 'optional'}; meta ${(job.ParameterizedJob.MetaRequired || []).join(', ') || 'none'} required`] : null,
      job.StatusDescription ? ['Status', job.StatusDescription] : null,
    ]),
  ];
}

export default function render(root, { params, scope }) {
  const [id, ns] = splitJob(params.job);
  const tab = params.tab || '';
  const base = jobHref(id, ns);
  const ctx = { id, ns, scope, base, q: { namespace: ns } };
  const state = { job: null, summary: null, allocs: null, evals: null, deployment: null, versions: null, deployments: null, problems: {} };
  const head = h('div');
  const problem = h('div');
  const body = h('div', { class: 'tab-body' });
  const bodyView = {
    '': overview, allocations: allocationsTab, evaluations: evaluationsTab,
    versions: versionsTab, deployments: deploymentsTab, definition: definitionTab,
  }[tab];
  const view = bodyView(state, ctx);

  mount(root, h('section', { class: 'page job-page', dataset: { job: id } },
    head,
    tabs([[base, 'Overview'], [`${base}/allocations`, 'Allocations'], [`${base}/evaluations`, 'Evaluations'],
      [`${base}/versions`, 'Versions'], [`${base}/deployments`, 'Deployments'], [`${base}/definition`, 'Definition']],
    tab ? `${base}/${tab}` : base),
    problem,
    body));
  mount(body, view.el);

  const show = () => {
    const errs = Object.entries(state.problems).filter(([, e]) => e);
    mount(problem, errs.map(([what, e]) => errorBox(e, what)));
    if (!state.job) return;
    mount(head, header(state, ctx));
    view.update();
  };
  const note = (what) => (err) => {
    state.problems[what] = err;
    show();
  };
  const fetchRelated = debounce(250, async () => {
    for (const [key, path, what] of view.related || []) {
      try {
        state[key] = await get(path, ctx.q, scope.signal);
        state.problems[what] = null;
      } catch (err) {
        if (err.name === 'AbortError') return;
        if (key === 'deployment' && err.status === 404) state[key] = null;
        else state.problems[what] = err;
      }
    }
    if (scope.alive) show();
  });

  watch(scope, jobPath(id), {
    query: ctx.q,
    onData: (job) => {
      state.job = job;
      state.problems['read the job'] = null;
      show();
      fetchRelated();
    },
    onError: note('read the job'),
  });
  for (const [key, path, what] of view.watches || []) {
    watch(scope, path, {
      query: ctx.q,
      onData: (data) => {
        state[key] = data;
        state.problems[what] = null;
        show();
        fetchRelated();
      },
      onError: note(what),
    });
  }
}
