// One evaluation: what triggered it, what it decided, why a group could not
// be placed (FailedTGAllocs explained), the evaluations it links to, and the
// allocations it placed.

import { h, mount } from '../dom.js';
import { ago, when, shortId } from '../format.js';
import { watch } from '../live.js';
import { query } from '../router.js';
import { badge, facts } from '../parts/status.js';
import { errorBox } from '../parts/errors.js';
import { placementFailures } from '../parts/placement.js';
import { allocTable, evalHref, jobLink } from '../parts/allocs.js';

const evalLink = (id, ns) => (id ? h('a', { href: evalHref(id, ns), class: 'mono' }, shortId(id)) : null);

export default function render(root, { params, scope }) {
  const id = params.eval;
  const q = { namespace: query().get('namespace') || undefined };
  const head = h('div');
  const problem = h('div');
  const failures = h('div');
  const allocs = allocTable({ job: false });
  mount(root, h('section', { class: 'page evaluation-page', dataset: { eval: id } }, head, problem, failures,
    h('section', { class: 'card' }, h('h2', {}, 'Allocations placed'), allocs.el)));

  watch(scope, `/v1/evaluation/${encodeURIComponent(id)}`, {
    query: q,
    onData: (e) => {
      mount(problem);
      mount(head,
        h('div', { class: 'page-head' }, h('h1', {}, `Evaluation ${shortId(e.ID)}`), badge(e.Status)),
        facts([
          ['ID', h('span', { class: 'mono' }, e.ID)],
          ['Job', jobLink(e.JobID, e.Namespace)],
          ['Namespace', e.Namespace],
          ['Type', e.Type],
          ['Priority', String(e.Priority)],
          ['Triggered by', e.TriggeredBy],
          e.NodeID ? ['Node', h('a', { href: `/ui/clients/${e.NodeID}` }, shortId(e.NodeID))] : null,
          e.DeploymentID ? ['Deployment', h('span', { class: 'mono' }, shortId(e.DeploymentID))] : null,
          e.StatusDescription ? ['Status', e.StatusDescription] : null,
          ['Created', h('span', { title: when(e.CreateTime) }, ago(e.CreateTime))],
          ['Modified', h('span', { title: when(e.ModifyTime) }, ago(e.ModifyTime))],
          e.PreviousEval ? ['Previous', evalLink(e.PreviousEval, e.Namespace)] : null,
          e.NextEval ? ['Next', evalLink(e.NextEval, e.Namespace)] : null,
          e.BlockedEval ? ['Blocked evaluation', evalLink(e.BlockedEval, e.Namespace)] : null,
          Object.keys(e.QueuedAllocations || {}).length ? ['Queued', Object.entries(e.QueuedAllocations).map(([g, n]) => `${g}: ${n}`).join(', ')] : null,
        ]));
      const queued = e.QueuedAllocations || {};
      mount(failures, e.FailedTGAllocs && Object.keys(e.FailedTGAllocs).length
        ? [h('h2', { class: 'section-title' }, 'Placement failures'), placementFailures(e.FailedTGAllocs, { queued })]
        : null);
    },
    onError: (err) => mount(problem, errorBox(err, 'read the evaluation')),
  });
  watch(scope, `/v1/evaluation/${encodeURIComponent(id)}/allocations`, {
    query: q,
    onData: (list) => allocs.setRows(list),
    onError: (err) => mount(problem, errorBox(err, 'list the evaluation\'s allocations')),
  });
}
