// What node pages share: a node's capacity (what it offers less what it
// reserves), what its live allocations take, and its drain and eligibility
// actions.

import { h } from '../dom.js';
import { post } from '../api.js';
import { parseDuration } from '../format.js';
import { act, flash } from './errors.js';
import { openForm } from './dialog.js';

const TERMINAL = new Set(['complete', 'failed', 'lost']);

/** Whether an allocation still holds its resources on its node. */
export function holdsResources(a) {
  return a.DesiredStatus === 'run' && !TERMINAL.has(a.ClientStatus);
}

/** What a node offers for scheduling: {cpu: MHz, mem: MB}. */
export function capacity(node) {
  const r = node.NodeResources || {};
  const reserved = node.ReservedResources || {};
  return {
    cpu: (r.Cpu?.CpuShares || 0) - (reserved.Cpu?.CpuShares || 0),
    mem: (r.Memory?.MemoryMB || 0) - (reserved.Memory?.MemoryMB || 0),
  };
}

/** What the live allocations of a node take: {cpu: MHz, mem: MB, running}. */
export function allocated(allocs) {
  let cpu = 0;
  let mem = 0;
  let running = 0;
  for (const a of allocs) {
    if (!holdsResources(a)) continue;
    if (a.ClientStatus === 'running') running += 1;
    for (const t of Object.values(a.AllocatedResources?.Tasks || {})) {
      cpu += t.Cpu?.CpuShares || 0;
      mem += t.Memory?.MemoryMB || 0;
    }
  }
  return { cpu, mem, running };
}

/** The drain, stop-drain and eligibility buttons of a node. */
export function nodeActions(node) {
  const path = `/v1/node/${encodeURIComponent(node.ID)}`;
  const out = [];
  if (!node.Drain) {
    out.push(h('button', {
      class: 'danger', dataset: { action: 'drain' },
      onclick: async () => {
        const form = await openForm(`Drain ${node.Name}`, [
          { name: 'deadline', label: 'Deadline', value: '1h', help: 'How long allocations may take to migrate before they are stopped: 30m, 1h, 2h30m.' },
          { name: 'force', label: 'Force: stop every allocation now (no deadline)', type: 'checkbox' },
          { name: 'ignoreSystem', label: 'Leave system jobs running', type: 'checkbox' },
        ], { submit: 'Drain', danger: true, text: 'The node is marked ineligible and its allocations migrate to other nodes.' });
        if (!form) return;
        const deadline = form.force ? -1 : parseDuration(form.deadline);
        if (deadline === null) {
          flash(`"${form.deadline}" is not a duration (e.g. 30m, 1h).`, 'bad');
          return;
        }
        await act(null, `drain ${node.Name}`, () => post(`${path}/drain`, {
          DrainSpec: { Deadline: deadline, IgnoreSystemJobs: form.ignoreSystem }, Meta: { message: 'drained from the UI' },
        }));
      },
    }, 'Drain'));
  } else {
    out.push(h('button', {
      dataset: { action: 'stop-drain' },
      onclick: () => act(`Stop draining ${node.Name}? It stays ineligible until marked eligible.`, `stop draining ${node.Name}`,
        () => post(`${path}/drain`, { DrainSpec: null, MarkEligible: false })),
    }, 'Stop drain'));
  }
  const eligible = node.SchedulingEligibility === 'eligible';
  out.push(h('button', {
    dataset: { action: eligible ? 'ineligible' : 'eligible' },
    onclick: () => act(null, `mark ${node.Name} ${eligible ? 'ineligible' : 'eligible'}`,
      () => post(`${path}/eligibility`, { Eligibility: eligible ? 'ineligible' : 'eligible' })),
  }, eligible ? 'Mark ineligible' : 'Mark eligible'));
  return h('div', { class: 'actions' }, out);
}
