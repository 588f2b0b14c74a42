// An allocation's page: its status, placement and actions (restart, stop,
// signal); the overview with CPU and memory over the last minutes (from the
// stats endpoint) and each task's state and event timeline; its tasks' logs,
// followed live; its files; and a terminal running a command in a task.

import { h, mount } from '../dom.js';
import { get, post, ApiError } from '../api.js';
import { ago, when, clock, shortId, mhz, bytes, count } from '../format.js';
import { watch, every } from '../live.js';
import { query } from '../router.js';
import { badge, facts, meter } from '../parts/status.js';
import { errorBox, act } from '../parts/errors.js';
import { openForm } from '../parts/dialog.js';
import { tabs } from '../parts/tabs.js';
import { lineChart } from '../parts/chart.js';
import { LogView } from '../parts/logs.js';
import { FileBrowser } from '../parts/files.js';
import { ExecView } from '../parts/exec.js';
import { allocHref, evalHref, jobLink } from '../parts/allocs.js';

const SIGNALS = ['SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGTERM', 'SIGKILL'];
/** How often resource usage is sampled, and how long it is kept. */
const STATS_EVERY_MS = 1000;
const STATS_WINDOW_MS = 5 * 60 * 1000;

function actions(alloc, q) {
  const id = encodeURIComponent(alloc.ID);
  const tasks = Object.keys(alloc.TaskStates || {}).sort();
  const live = alloc.DesiredStatus === 'run' && !['complete', 'failed', 'lost'].includes(alloc.ClientStatus);
  if (!live) return null;
  return h('div', { class: 'actions' },
    h('button', {
      dataset: { action: 'restart' },
      onclick: () => act(`Restart every task of ${alloc.Name}?`, 'restart the allocation', () => post(`/v1/client/allocation/${id}/restart`, {}, q)),
    }, 'Restart'),
    h('button', {
      dataset: { action: 'signal' },
      onclick: async () => {
        const form = await openForm('Send a signal', [
          { name: 'signal', label: 'Signal', type: 'select', options: SIGNALS, value: 'SIGHUP' },
          { name: 'task', label: 'Task', type: 'select', options: ['(every task)', ...tasks], value: '(every task)' },
        ], { submit: 'Send' });
        if (!form) return;
        const task = form.task === '(every task)' ? undefined : form.task;
        await act(null, `send ${form.signal}`, () => post(`/v1/client/allocation/${id}/signal`, { Signal: form.signal, Task: task }, q));
      },
    }, 'Signal'),
    h('button', {
      class: 'danger', dataset: { action: 'stop' },
      onclick: () => act(`Stop ${alloc.Name}? The scheduler places a replacement if the job still wants one.`, 'stop the allocation',
        () => post(`/v1/allocation/${id}/stop`, {}, q)),
    }, 'Stop'));
}

function taskTable(alloc) {
  const states = Object.entries(alloc.TaskStates || {}).sort(([a], [b]) => a.localeCompare(b));
  if (!states.length) return h('p', { class: 'muted' }, 'No task has reported yet.');
  return [
    h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['Task', 'State', 'Restarts', 'Started', 'Finished', 'Last event'].map((c) => h('th', {}, c)))),
      h('tbody', {}, states.map(([name, s]) => {
        const last = (s.Events || [])[s.Events.length - 1];
        return h('tr', { dataset: { task: name } },
          h('td', {}, name),
          h('td', {}, badge(s.State), s.Failed ? badge('failed') : null),
          h('td', { class: 'num' }, count(s.Restarts)),
          h('td', { title: when(s.StartedAt) }, ago(s.StartedAt)),
          h('td', { title: when(s.FinishedAt) }, ago(s.FinishedAt)),
          h('td', {}, last ? `${last.Type}: ${last.DisplayMessage || last.Message || ''}` : '—'));
      }))),
    states.map(([name, s]) => h('details', { class: 'timeline', open: states.length === 1 },
      h('summary', {}, `Events of ${name}`),
      h('ol', {}, [...(s.Events || [])].reverse().map((e) => h('li', { class: e.FailsTask ? 'bad' : '' },
        h('time', { title: when(e.Time) }, clock(e.Time)), ' ',
        h('b', {}, e.Type), ' ',
        e.DisplayMessage || e.Message || '',
        e.DriverError ? h('span', { class: 'error-text' }, ` ${e.DriverError}`) : null,
        e.ExitCode ? h('span', { class: 'muted' }, ` (exit ${e.ExitCode})`) : null))))),
  ];
}

function allocated(alloc) {
  let cpu = 0;
  let mem = 0;
  for (const t of Object.values(alloc.AllocatedResources?.Tasks || {})) {
    cpu += t.Cpu?.CpuShares || 0;
    mem += t.Memory?.MemoryMB || 0;
  }
  return { cpu, mem };
}

export default function render(root, { params, scope }) {
  const namespace = query().get('namespace') || undefined;
  const q = { namespace };
  const id = params.alloc;
  const tab = params.tab || '';
  const head = h('div');
  const problem = h('div');
  const body = h('div', { class: 'tab-body' });
  const base = allocHref(id, { namespace }).replace(/\?.*$/, '');
  const suffix = namespace ? `?namespace=${encodeURIComponent(namespace)}` : '';
  mount(root, h('section', { class: 'page alloc-page', dataset: { alloc: id } },
    head,
    tabs([[`${base}${suffix}`, 'Overview'], [`${base}/logs${suffix}`, 'Logs'], [`${base}/files${suffix}`, 'Files'], [`${base}/exec${suffix}`, 'Exec']],
      `${base}${tab ? `/${tab}` : ''}${suffix}`),
    problem,
    body));

  let alloc = null;
  let started = false;
  const cpu = [];
  const mem = [];
  const usage = h('div', { class: 'usage' });
  const tasks = h('div');

  const showUsage = () => {
    const { cpu: cpuMax, mem: memMax } = allocated(alloc);
    const lastCpu = cpu[cpu.length - 1]?.v || 0;
    const lastMem = mem[mem.length - 1]?.v || 0;
    mount(usage,
      h('div', { class: 'meters' },
        h('div', {}, h('span', {}, 'CPU'), meter(lastCpu, cpuMax, mhz)),
        h('div', {}, h('span', {}, 'Memory'), meter(lastMem, memMax * 1024 * 1024, bytes))),
      h('div', { class: 'charts' },
        lineChart(cpu, { windowMs: STATS_WINDOW_MS, max: cpuMax, format: mhz, title: 'CPU' }),
        lineChart(mem, { windowMs: STATS_WINDOW_MS, max: memMax * 1024 * 1024, format: bytes, title: 'Memory' })));
  };

  const startTab = () => {
    if (tab === 'logs') {
      const view = new LogView(alloc, scope, { task: query().get('task') || undefined });
      mount(body, view.el);
      view.start();
    } else if (tab === 'exec') {
      mount(body, new ExecView(alloc, scope, { task: query().get('task') || undefined }).el);
    } else if (tab === 'files') {
      mount(body, new FileBrowser(alloc, scope, query().get('path') || '/').el);
    } else {
      mount(body, h('section', { class: 'card' }, h('h2', {}, 'Resource usage'), usage),
        h('section', { class: 'card' }, h('h2', {}, 'Tasks'), tasks));
      every(scope, STATS_EVERY_MS, async () => {
        if (!alloc || alloc.ClientStatus !== 'running') return;
        try {
          const stats = await get(`/v1/client/allocation/${encodeURIComponent(id)}/stats`, q, scope.signal);
          const now = Date.now();
          const r = stats.ResourceUsage || {};
          cpu.push({ t: now, v: r.CpuStats?.TotalTicks || 0 });
          mem.push({ t: now, v: r.MemoryStats?.RSS || r.MemoryStats?.Usage || 0 });
          while (cpu.length && cpu[0].t < now - STATS_WINDOW_MS) cpu.shift();
          while (mem.length && mem[0].t < now - STATS_WINDOW_MS) mem.shift();
          showUsage();
        } catch (err) {
          if (err instanceof ApiError) mount(usage, errorBox(err, 'read resource usage'));
          else throw err;
        }
      });
    }
  };

  watch(scope, `/v1/allocation/${encodeURIComponent(id)}`, {
    query: q,
    onData: (a) => {
      alloc = a;
      mount(problem);
      mount(head,
        h('div', { class: 'page-head' },
          h('h1', {}, a.Name), badge(a.ClientStatus),
          a.DesiredStatus !== 'run' ? h('span', { class: 'muted' }, `desired: ${a.DesiredStatus}`) : null,
          actions(a, q)),
        facts([
          ['ID', h('span', { class: 'mono' }, a.ID)],
          ['Job', jobLink(a.JobID, a.Namespace)],
          ['Group', a.TaskGroup],
          ['Client', h('a', { href: `/ui/clients/${encodeURIComponent(a.NodeID)}` }, a.NodeName || shortId(a.NodeID))],
          ['Job version', String(a.Job?.Version ?? a.JobVersion ?? '—')],
          ['Evaluation', h('a', { href: evalHref(a.EvalID, a.Namespace), class: 'mono' }, shortId(a.EvalID))],
          ['Created', h('span', { title: when(a.CreateTime) }, ago(a.CreateTime))],
          ['Modified', h('span', { title: when(a.ModifyTime) }, ago(a.ModifyTime))],
          a.ClientDescription ? ['Client says', a.ClientDescription] : null,
          a.DesiredDescription ? ['Scheduler says', a.DesiredDescription] : null,
          a.DeploymentStatus ? ['Deployment health', a.DeploymentStatus.Healthy === null || a.DeploymentStatus.Healthy === undefined ? 'pending' : a.DeploymentStatus.Healthy ? 'healthy' : 'unhealthy'] : null,
          a.PreviousAllocation ? ['Replaces', h('a', { href: allocHref(a.PreviousAllocation, { namespace: a.Namespace }), class: 'mono' }, shortId(a.PreviousAllocation))] : null,
          a.NextAllocation ? ['Replaced by', h('a', { href: allocHref(a.NextAllocation, { namespace: a.Namespace }), class: 'mono' }, shortId(a.NextAllocation))] : null,
        ]));
      if (!started) {
        started = true;
        startTab();
      }
      if (!tab) {
        mount(tasks, taskTable(a));
        showUsage();
      }
    },
    onError: (err) => mount(problem, errorBox(err, 'read the allocation')),
  });
}
