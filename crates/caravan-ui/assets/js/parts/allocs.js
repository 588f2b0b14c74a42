// The allocation table shared by the job, node and evaluation pages.

import { h } from '../dom.js';
import { ago, when, shortId } from '../format.js';
import { badge } from './status.js';
import { PagedTable } from './table.js';

/**
 * The link to an allocation's page. The namespace rides along so the page's
 * calls name it: a token limited to one namespace is checked there.
 */
export function allocHref(id, { tab, namespace } = {}) {
  const ns = namespace && namespace !== 'default' ? `?namespace=${encodeURIComponent(namespace)}` : '';
  return `/ui/allocations/${encodeURIComponent(id)}${tab ? `/${tab}` : ''}${ns}`;
}

/** The link to an evaluation's page; the namespace rides along as for allocations. */
export function evalHref(id, namespace) {
  const ns = namespace && namespace !== 'default' ? `?namespace=${encodeURIComponent(namespace)}` : '';
  return `/ui/evaluations/${encodeURIComponent(id)}${ns}`;
}

/** The link to a job's page from an allocation or evaluation. */
export function jobLink(id, namespace) {
  return h('a', { href: `/ui/jobs/${encodeURIComponent(`${id}@${namespace || 'default'}`)}` }, id);
}

/** The job version an allocation runs: stubs carry JobVersion, full allocations their Job. */
function version(a) {
  return a.JobVersion ?? a.Job?.Version ?? '';
}

function health(a) {
  const ds = a.DeploymentStatus;
  if (!ds || ds.Healthy === null || ds.Healthy === undefined) return '';
  return ds.Healthy ? 'healthy' : 'unhealthy';
}

/**
 * A paged allocation table. `show` picks the optional columns: job, node,
 * group, version, deployment health.
 */
export function allocTable({ job = false, node = true, pageSize = 25, key = '', empty = 'No allocations.' } = {}) {
  const columns = [
    { label: 'ID', sort: (a) => a.ID, cell: (a) => h('a', { href: allocHref(a.ID, { namespace: a.Namespace }), class: 'mono alloc-link', dataset: { alloc: a.ID } }, shortId(a.ID)) },
    job ? { label: 'Job', sort: (a) => a.JobID, cell: (a) => jobLink(a.JobID, a.Namespace) } : null,
    { label: 'Group', sort: (a) => a.TaskGroup, cell: (a) => a.TaskGroup },
    { label: 'Name', sort: (a) => a.Name, cell: (a) => a.Name },
    {
      label: 'Status',
      sort: (a) => a.ClientStatus,
      cell: (a) => [badge(a.ClientStatus), a.DesiredStatus !== 'run' ? h('span', { class: 'muted' }, ` (${a.DesiredStatus})`) : null,
        a.DeploymentStatus?.Canary ? h('span', { class: 'badge muted' }, 'canary') : null],
    },
    node ? { label: 'Client', sort: (a) => a.NodeName, cell: (a) => h('a', { href: `/ui/clients/${encodeURIComponent(a.NodeID)}` }, a.NodeName || shortId(a.NodeID)) } : null,
    { label: 'Version', sort: version, cell: (a) => String(version(a)), class: 'num' },
    { label: 'Health', sort: health, cell: (a) => (health(a) ? badge(health(a)) : '—') },
    { label: 'Created', sort: (a) => a.CreateTime, cell: (a) => h('span', { title: when(a.CreateTime) }, ago(a.CreateTime)) },
    { label: 'Modified', sort: (a) => a.ModifyTime, cell: (a) => h('span', { title: when(a.ModifyTime) }, ago(a.ModifyTime)) },
  ].filter(Boolean);
  const table = new PagedTable(columns, { pageSize, key, empty });
  // Newest first unless the reader sorts otherwise.
  const setRows = table.setRows.bind(table);
  table.setRows = (rows) => setRows(table.sortBy ? rows : [...rows].sort((x, y) => (y.CreateIndex || 0) - (x.CreateIndex || 0)));
  return table;
}
