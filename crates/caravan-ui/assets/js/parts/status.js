// Small visual pieces: status badges, the allocation summary bar, and
// used-of-total meters.

import { h } from '../dom.js';
import { count } from '../format.js';

const TONES = {
  running: 'good', ready: 'good', successful: 'good', complete: 'done', eligible: 'good', healthy: 'good', alive: 'good',
  pending: 'warn', starting: 'warn', queued: 'warn', blocked: 'warn', paused: 'warn', draining: 'warn', initializing: 'warn', 'pending promotion': 'warn', ineligible: 'warn',
  failed: 'bad', lost: 'bad', down: 'bad', dead: 'muted', unhealthy: 'bad', cancelled: 'muted', canceled: 'muted', disconnected: 'bad', unknown: 'muted', stop: 'muted', evict: 'muted',
};

/** A colored badge for a status word. */
export function badge(status, title) {
  const word = String(status || 'unknown');
  return h('span', { class: ['badge', TONES[word.toLowerCase()] || 'muted'], title }, word);
}

/** The order and colors of an allocation summary, as Nomad's UI draws it. */
export const SUMMARY_KEYS = ['Queued', 'Starting', 'Running', 'Complete', 'Failed', 'Lost', 'Unknown'];

/** Adds up the per-group summaries of a job summary. */
export function totalSummary(summary) {
  const total = Object.fromEntries(SUMMARY_KEYS.map((k) => [k, 0]));
  for (const group of Object.values(summary || {})) {
    for (const k of SUMMARY_KEYS) total[k] += group[k] || 0;
  }
  return total;
}

/** A small stacked bar of allocation states, with the counts in its title and legend. */
export function summaryBar(counts, { legend = false } = {}) {
  const total = SUMMARY_KEYS.reduce((s, k) => s + (counts[k] || 0), 0);
  const title = SUMMARY_KEYS.filter((k) => counts[k]).map((k) => `${k} ${count(counts[k])}`).join(', ') || 'no allocations';
  const bar = h('div', { class: 'summary-bar', title, role: 'img', 'aria-label': title },
    total === 0
      ? h('span', { class: 'seg empty', style: { width: '100%' } })
      : SUMMARY_KEYS.filter((k) => counts[k]).map((k) => h('span', {
        class: ['seg', k.toLowerCase()],
        style: { width: `${(100 * counts[k]) / total}%` },
      })));
  if (!legend) return bar;
  return h('div', { class: 'summary' }, bar, h('ul', { class: 'legend' },
    SUMMARY_KEYS.map((k) => h('li', { class: counts[k] ? '' : 'zero' }, h('span', { class: ['dot', k.toLowerCase()] }), `${k} `, h('b', {}, count(counts[k]))))));
}

/** A used-of-total meter: "1.2 GHz / 4 GHz". */
export function meter(used, total, fmt) {
  const pct = total > 0 ? Math.min(100, (100 * used) / total) : 0;
  const tone = pct > 90 ? 'bad' : pct > 70 ? 'warn' : 'good';
  return h('div', { class: 'meter', title: `${pct.toFixed(1)}%` },
    h('div', { class: 'meter-bar' }, h('span', { class: tone, style: { width: `${pct}%` } })),
    h('span', { class: 'meter-text' }, `${fmt(used)} / ${fmt(total)}`));
}

/** A definition list of label/value pairs. */
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v ?? '—'))));
}
