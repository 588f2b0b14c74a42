// Runs a job from the browser: paste or edit a job file (HCL, or Nomad's
// JSON), plan it (what would be placed, updated or stopped, why a group
// could not be placed, what changed), then run it.

import { h, mount } from '../dom.js';
import { get, post, jobPath } from '../api.js';
import { navigate, query } from '../router.js';
import { errorBox } from '../parts/errors.js';
import { placementFailures } from '../parts/placement.js';
import { jobHref } from './jobs.js';
import { splitJob } from './job.js';

const SAMPLE = `job "example" {
  group "web" {
    count = 1

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do date; sleep 5; done"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`;

/** The job a text holds: JSON as it is, HCL through /v1/jobs/parse. */
async function parse(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    const value = JSON.parse(trimmed);
    return value.Job || value;
  }
  return post('/v1/jobs/parse', { JobHCL: text, Canonicalize: true });
}

function fieldLines(fields, depth) {
  return (fields || []).filter((f) => f.Type !== 'None').map((f) => h('div', { class: ['diff-line', f.Type.toLowerCase()], style: { paddingLeft: `${depth}em` } },
    f.Type === 'Added' ? '+ ' : f.Type === 'Deleted' ? '− ' : '± ',
    h('span', { class: 'mono' }, f.Name), ': ',
    f.Type === 'Edited' ? [h('del', {}, f.Old), ' → ', h('ins', {}, f.New)] : (f.Type === 'Added' ? f.New : f.Old)));
}

function objectLines(objects, depth) {
  return (objects || []).filter((o) => o.Type !== 'None').map((o) => [
    h('div', { class: ['diff-line', o.Type.toLowerCase()], style: { paddingLeft: `${depth}em` } }, `${o.Type === 'Added' ? '+' : o.Type === 'Deleted' ? '−' : '±'} ${o.Name} {`),
    fieldLines(o.Fields, depth + 1),
    objectLines(o.Objects, depth + 1),
    h('div', { class: 'diff-line', style: { paddingLeft: `${depth}em` } }, '}'),
  ]);
}

/** Nomad's plan diff (job → groups → tasks) as indented lines. */
function planDiff(diff) {
  if (!diff) return null;
  const groups = (diff.TaskGroups || []).filter((g) => g.Type !== 'None');
  return h('div', { class: 'plan-diff mono' },
    h('div', { class: ['diff-line', diff.Type.toLowerCase()] }, `${diff.Type} job "${diff.ID}"`),
    fieldLines(diff.Fields, 1),
    objectLines(diff.Objects, 1),
    groups.map((g) => [
      h('div', { class: ['diff-line', g.Type.toLowerCase()], style: { paddingLeft: '1em' } }, `${g.Type} group "${g.Name}"`),
      fieldLines(g.Fields, 2),
      objectLines(g.Objects, 2),
      (g.Tasks || []).filter((t) => t.Type !== 'None').map((t) => [
        h('div', { class: ['diff-line', t.Type.toLowerCase()], style: { paddingLeft: '2em' } }, `${t.Type} task "${t.Name}"`),
        fieldLines(t.Fields, 3),
        objectLines(t.Objects, 3),
      ]),
    ]));
}

function planView(plan) {
  const updates = Object.entries(plan.Annotations?.DesiredTGUpdates || {});
  const kinds = ['Place', 'Stop', 'InPlaceUpdate', 'DestructiveUpdate', 'Canary', 'Migrate', 'Ignore', 'Preemptions'];
  return h('div', { class: 'plan' },
    plan.Warnings ? h('div', { class: 'notice warn' }, plan.Warnings) : null,
    h('h2', {}, 'Plan'),
    h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Group'), kinds.map((k) => h('th', {}, k)))),
      h('tbody', {}, updates.map(([g, u]) => h('tr', {}, h('td', {}, g), kinds.map((k) => h('td', { class: 'num' }, String(u[k] || 0))))))),
    plan.FailedTGAllocs && Object.keys(plan.FailedTGAllocs).length
      ? [h('h2', {}, 'Placement failures'), placementFailures(plan.FailedTGAllocs)]
      : h('p', { class: 'muted' }, 'Every allocation of this plan can be placed.'),
    h('details', { class: 'changes', open: plan.Diff?.Type !== 'Added' },
      h('summary', {}, plan.Diff?.Type === 'Added' ? 'Changes (a new job: every field)' : 'Changes'),
      planDiff(plan.Diff)));
}

export default async function render(root, { scope }) {
  const editing = query().get('job');
  const editor = h('textarea', { class: 'editor', spellcheck: 'false', 'aria-label': 'Job file', rows: 24 });
  const out = h('div');
  let planned = null;
  const runButton = h('button', { class: 'primary', disabled: true, dataset: { action: 'run' }, onclick: () => run() }, 'Run');
  editor.addEventListener('input', () => {
    planned = null;
    runButton.disabled = true;
  });

  async function plan() {
    mount(out, h('p', { class: 'loading' }, 'Planning…'));
    try {
      const job = await parse(editor.value);
      const ns = job.Namespace || 'default';
      const result = await post(`${jobPath(job.ID)}/plan`, { Job: job, Diff: true }, { namespace: ns });
      planned = job;
      runButton.disabled = false;
      mount(out, planView(result));
    } catch (err) {
      mount(out, err instanceof SyntaxError ? h('div', { class: 'notice error' }, `The JSON does not parse: ${err.message}`) : errorBox(err, 'plan the job'));
    }
  }

  async function run() {
    if (!planned) return;
    runButton.disabled = true;
    const ns = planned.Namespace || 'default';
    try {
      await post('/v1/jobs', { Job: planned }, { namespace: ns });
      navigate(jobHref(planned.ID, ns));
    } catch (err) {
      runButton.disabled = false;
      mount(out, errorBox(err, 'run the job'));
    }
  }

  mount(root, h('section', { class: 'page run-page' },
    h('div', { class: 'page-head' }, h('h1', {}, editing ? `Edit ${splitJob(editing)[0]}` : 'Run a job')),
    h('p', { class: 'muted' }, 'A job file in HCL, or a job in Nomad\'s JSON. Plan it to see what would change, then run it.'),
    editor,
    h('div', { class: 'buttons' }, h('button', { dataset: { action: 'plan' }, onclick: plan }, 'Plan'), runButton),
    out));

  if (editing) {
    const [id, ns] = splitJob(editing);
    try {
      const job = await get(jobPath(id), { namespace: ns }, scope.signal);
      editor.value = JSON.stringify(job, null, 2);
    } catch (err) {
      if (err.name !== 'AbortError') mount(out, errorBox(err, 'read the job'));
    }
  } else {
    editor.value = SAMPLE;
  }
}
