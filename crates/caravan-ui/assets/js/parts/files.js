// An allocation's files, through /v1/client/fs/ls and readat: directories
// as tables, files as text (the first megabyte).

import { h, mount } from '../dom.js';
import { get, send } from '../api.js';
import { bytes, ago, when } from '../format.js';
import { setQuery } from '../router.js';
import { errorBox } from './errors.js';

const SHOW_BYTES = 1024 * 1024;

/** A file browser rooted at the allocation directory; `path` opens there. */
export class FileBrowser {
  constructor(alloc, scope, path = '/') {
    this.alloc = alloc;
    this.scope = scope;
    this.el = h('section', { class: 'files' });
    this.open(path || '/');
  }

  crumbs(path) {
    const parts = path.split('/').filter(Boolean);
    const out = [h('a', { href: '#', onclick: (e) => { e.preventDefault(); this.open('/'); } }, 'alloc dir')];
    parts.forEach((p, i) => {
      const to = `/${parts.slice(0, i + 1).join('/')}`;
      out.push(' / ', i === parts.length - 1 ? h('b', {}, p) : h('a', { href: '#', onclick: (e) => { e.preventDefault(); this.open(to); } }, p));
    });
    return h('div', { class: 'crumbs mono' }, out);
  }

  async open(path, isFile = false) {
    setQuery({ path: path === '/' ? null : path });
    const ns = this.alloc.Namespace;
    const id = encodeURIComponent(this.alloc.ID);
    mount(this.el, this.crumbs(path), h('p', { class: 'loading' }, 'Loading…'));
    try {
      if (!isFile) {
        const list = await get(`/v1/client/fs/ls/${id}`, { path, namespace: ns }, this.scope.signal);
        list.sort((a, b) => (a.IsDir === b.IsDir ? a.Name.localeCompare(b.Name) : a.IsDir ? -1 : 1));
        const join = (name) => `${path.replace(/\/$/, '')}/${name}`;
        mount(this.el, this.crumbs(path), h('table', { class: 'list' },
          h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Size'), h('th', {}, 'Mode'), h('th', {}, 'Modified'))),
          h('tbody', {}, list.length ? list.map((f) => h('tr', {},
            h('td', {}, h('a', { href: '#', class: f.IsDir ? 'dir' : 'file', onclick: (e) => { e.preventDefault(); this.open(join(f.Name), !f.IsDir); } }, f.IsDir ? `${f.Name}/` : f.Name)),
            h('td', {}, f.IsDir ? '—' : bytes(f.Size)),
            h('td', { class: 'mono' }, f.FileMode),
            h('td', { title: when(f.ModTime) }, ago(f.ModTime)))) : h('tr', {}, h('td', { colspan: 4, class: 'empty' }, 'Empty directory.')))));
        return;
      }
      const res = await send('GET', `/v1/client/fs/readat/${id}`, { query: { path, offset: 0, limit: SHOW_BYTES, namespace: ns }, signal: this.scope.signal });
      const text = await res.text();
      mount(this.el, this.crumbs(path),
        text.length >= SHOW_BYTES ? h('p', { class: 'muted' }, 'Showing the first megabyte.') : null,
        h('pre', { class: 'file-view' }, text));
    } catch (err) {
      if (err.name === 'AbortError') return;
      mount(this.el, this.crumbs(path), errorBox(err, `read ${path}`));
    }
  }
}
