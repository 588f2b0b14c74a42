// A row of links to the tabs of a page; each tab is its own URL.

import { h } from '../dom.js';

/** Tabs as links: [[href, label], ...]; `active` is the href shown. */
export function tabs(items, active) {
  return h('nav', { class: 'tabs' }, items.map(([href, label]) => h('a', { href, class: href === active ? 'active' : '' }, label)));
}
