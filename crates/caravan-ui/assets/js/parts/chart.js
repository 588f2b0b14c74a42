// A line chart of recent samples (CPU, memory) over a fixed window of time,
// drawn as SVG.

import { svg, h } from '../dom.js';

/**
 * points: [{t: ms, v}], drawn over at most the last `windowMs`; `max` the top of the
 * scale (0: the largest sample); `format` labels values.
 */
export function lineChart(points, { windowMs = 5 * 60 * 1000, max = 0, format = String, title = '' } = {}) {
  const W = 600;
  const H = 120;
  const now = Date.now();
  const shown = points.filter((p) => p.t >= now - windowMs);
  // The time axis spans what has been sampled (at most the window), so a
  // page opened a moment ago still draws a line across; the caption says how long.
  const span = Math.min(windowMs, Math.max(2000, now - (shown[0]?.t ?? now)));
  const top = Math.max(max || 0, ...shown.map((p) => p.v), 1e-9);
  const x = (t) => ((t - (now - span)) / span) * W;
  const y = (v) => H - (v / top) * (H - 10);
  const line = shown.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
  const last = shown[shown.length - 1];
  return h('figure', { class: 'chart' },
    h('figcaption', {}, title, ' ', h('b', {}, last ? format(last.v) : '—'),
      h('span', { class: 'muted' }, ` (scale ${format(top)}, the last ${Math.round(span / 1000)}s)`)),
    svg('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': title },
      svg('line', { x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5, class: 'axis' }),
      shown.length > 1 ? svg('polyline', { points: `${x(shown[0].t).toFixed(1)},${H} ${line} ${x(last.t).toFixed(1)},${H}`, class: 'area' }) : null,
      shown.length > 1 ? svg('polyline', { points: line, class: 'line' }) : null));
}
