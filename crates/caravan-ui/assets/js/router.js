// Client-side routing with the History API: every page of the app has a
// real URL under /ui/ (the gateway answers each with index.html), and links
// inside the app change pages without reloading.

import { Scope } from './live.js';
import { h, mount } from './dom.js';

// [pattern, page module, parameter names]. Pages load on first visit.
const ROUTES = [
  [/^\/ui\/?$/, null],
  [/^\/ui\/jobs\/?$/, './pages/jobs.js'],
  [/^\/ui\/jobs\/run\/?$/, './pages/run.js'],
  [/^\/ui\/jobs\/([^/]+)(?:\/(allocations|evaluations|versions|deployments|definition))?\/?$/, './pages/job.js', ['job', 'tab']],
  [/^\/ui\/allocations\/([^/]+)(?:\/(logs|files|exec))?\/?$/, './pages/alloc.js', ['alloc', 'tab']],
  [/^\/ui\/clients\/?$/, './pages/clients.js'],
  [/^\/ui\/clients\/([^/]+)\/?$/, './pages/client.js', ['node']],
  [/^\/ui\/servers\/?$/, './pages/servers.js'],
  [/^\/ui\/evaluations\/?$/, './pages/evaluations.js'],
  [/^\/ui\/evaluations\/([^/]+)\/?$/, './pages/evaluation.js', ['eval']],
  [/^\/ui\/variables\/?$/, './pages/variables.js'],
  [/^\/ui\/variables\/new\/?$/, './pages/variable.js', []],
  [/^\/ui\/variables\/var\/(.+)$/, './pages/variable.js', ['path']],
  [/^\/ui\/settings\/tokens\/?$/, './pages/token.js'],
];

let current = null;
let root = null;

/** Goes to `url` (a path under /ui/), adding a history entry unless `replace`. */
export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render();
}

/** Rewrites the current URL's query (filters, page numbers) without re-rendering. */
export function setQuery(values) {
  const url = new URL(window.location.href);
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined || v === null || v === '' || v === false) url.searchParams.delete(k);
    else url.searchParams.set(k, String(v));
  }
  history.replaceState(null, '', url.pathname + url.search);
}

/** The current URL's query parameters. */
export function query() {
  return new URLSearchParams(window.location.search);
}

function match(pathname) {
  for (const [pattern, module, names = []] of ROUTES) {
    const m = pattern.exec(pathname);
    if (!m) continue;
    const params = {};
    names.forEach((name, i) => {
      params[name] = m[i + 1] === undefined ? undefined : decodeURIComponent(m[i + 1]);
    });
    return { module, params };
  }
  return null;
}

async function render() {
  current?.close();
  const scope = new Scope();
  current = scope;
  const { pathname } = window.location;
  markNav(pathname);
  const found = match(pathname);
  if (found && found.module === null) {
    navigate('/ui/jobs', { replace: true });
    return;
  }
  if (!found) {
    mount(root, h('section', { class: 'page' }, h('h1', {}, 'Not found'),
      h('p', {}, `Nothing lives at ${pathname}. `, h('a', { href: '/ui/jobs' }, 'Go to the jobs.'))));
    return;
  }
  mount(root, h('p', { class: 'loading' }, 'Loading…'));
  try {
    const page = await import(found.module);
    if (!scope.alive) return;
    await page.default(root, { params: found.params, scope });
  } catch (err) {
    if (!scope.alive) return;
    console.error(err);
    mount(root, h('section', { class: 'page' }, h('p', { class: 'notice error' }, `This page failed: ${err.message}`)));
  }
}

function markNav(pathname) {
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', pathname.startsWith(a.getAttribute('href')));
  }
}

/** Starts routing into `el`. */
export function start(el) {
  root = el;
  document.addEventListener('click', (event) => {
    const a = event.target.closest('a');
    if (!a || event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey || a.target) return;
    const href = a.getAttribute('href');
    if (!href || !href.startsWith('/ui/') || a.hasAttribute('download')) return;
    event.preventDefault();
    navigate(href);
  });
  window.addEventListener('popstate', render);
  render();
}
