// Why a task group could not be placed, read from an evaluation's
// FailedTGAllocs (Nomad's AllocMetric): which nodes were looked at, which
// constraint or class filtered how many, which resource ran out where.

import { h } from '../dom.js';
import { count } from '../format.js';

const plural = (n, word) => `${count(n)} ${word}${n === 1 ? '' : 's'}`;

/** The reasons in one group's metric, as sentences. */
export function reasons(m) {
  const out = [];
  if (!m.NodesEvaluated) out.push('No nodes were eligible for evaluation.');
  for (const [dc, n] of Object.entries(m.NodesAvailable || {})) {
    if (n === 0) out.push(`No nodes are available in datacenter "${dc}".`);
  }
  for (const [cls, n] of Object.entries(m.ClassFiltered || {})) out.push(`Class "${cls}" filtered ${plural(n, 'node')}.`);
  for (const [c, n] of Object.entries(m.ConstraintFiltered || {})) out.push(`Constraint "${c}" filtered ${plural(n, 'node')}.`);
  if (m.NodesExhausted) out.push(`Resources exhausted on ${plural(m.NodesExhausted, 'node')}.`);
  for (const [cls, n] of Object.entries(m.ClassExhausted || {})) out.push(`Class "${cls}" exhausted on ${plural(n, 'node')}.`);
  for (const [dim, n] of Object.entries(m.DimensionExhausted || {})) out.push(`Dimension "${dim}" exhausted on ${plural(n, 'node')}.`);
  for (const q of m.QuotaExhausted || []) out.push(`Quota limit hit "${q}".`);
  for (const [task, r] of Object.entries(m.ResourcesExhausted || {})) {
    const parts = [];
    if (r?.CPU) parts.push(`${r.CPU} MHz CPU`);
    if (r?.MemoryMB) parts.push(`${r.MemoryMB} MB memory`);
    if (r?.DiskMB) parts.push(`${r.DiskMB} MB disk`);
    if (parts.length) out.push(`Task "${task}" needed ${parts.join(', ')} more than was free.`);
  }
  return out;
}

/**
 * One box per group that failed to place: how many allocations, the nodes
 * evaluated and filtered, and the reasons. `queued` (group → count, from
 * the job summary) gives the number still waiting when known; `evalId` (in
 * `namespace`) links the evaluation they come from.
 */
export function placementFailures(failed, { queued = {}, evalId, namespace } = {}) {
  const groups = Object.entries(failed || {});
  if (!groups.length) return null;
  return h('div', { class: 'placement-failures' }, groups.map(([group, m]) => {
    const waiting = queued[group] || 1 + (m.CoalescedFailures || 0);
    return h('div', { class: 'notice warn placement-failure', dataset: { group } },
      h('strong', {}, `Task group "${group}" could not place ${plural(waiting, 'allocation')}. `),
      h('span', {}, `${plural(m.NodesEvaluated || 0, 'node')} evaluated, ${count(m.NodesFiltered || 0)} filtered, ${count(m.NodesExhausted || 0)} exhausted.`),
      h('ul', {}, reasons(m).map((r) => h('li', {}, r))),
      evalId ? h('small', {}, 'From evaluation ', h('a', { href: `/ui/evaluations/${encodeURIComponent(evalId)}${namespace && namespace !== 'default' ? `?namespace=${encodeURIComponent(namespace)}` : ''}` }, evalId.slice(0, 8)), '.') : null);
  }));
}
