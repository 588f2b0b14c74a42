// How values read on screen: ids, times, durations, sizes, counts.

/** The first eight characters of an id, as Nomad's UI and CLI show them. */
export function shortId(id) {
  return (id || '').slice(0, 8);
}

/** A number with thousands separators. */
export function count(n) {
  return Number(n || 0).toLocaleString('en-US');
}

/**
 * Milliseconds since the epoch from what Nomad's JSON holds: RFC 3339 text,
 * or integers of nanoseconds (most times), milliseconds or seconds (a
 * node's StatusUpdatedAt), told apart by their size.
 */
export function millis(t) {
  if (t === null || t === undefined || t === '' || t === 0) return null;
  if (typeof t === 'number') {
    if (t > 1e15) return t / 1e6;
    return t > 1e11 ? t : t * 1000;
  }
  const ms = Date.parse(t);
  return Number.isNaN(ms) || ms <= 0 ? null : ms;
}

/** "3m ago", "in 10s", or "—". */
export function ago(t) {
  const ms = millis(t);
  if (ms === null) return '—';
  const diff = Date.now() - ms;
  const s = Math.round(Math.abs(diff) / 1000);
  let text;
  if (s < 60) text = `${s}s`;
  else if (s < 3600) text = `${Math.floor(s / 60)}m`;
  else if (s < 86400) text = `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  else text = `${Math.floor(s / 86400)}d`;
  return diff >= 0 ? `${text} ago` : `in ${text}`;
}

/** A full local date and time, for titles. */
export function when(t) {
  const ms = millis(t);
  return ms === null ? '' : new Date(ms).toLocaleString();
}

/** A clock time (HH:MM:SS) for event timelines. */
export function clock(t) {
  const ms = millis(t);
  return ms === null ? '—' : new Date(ms).toLocaleTimeString();
}

/** A duration in nanoseconds as "1h2m3s". */
export function duration(ns) {
  let s = Math.round(Number(ns || 0) / 1e9);
  if (s === 0) return '0s';
  const parts = [];
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]]) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  return parts.join('');
}

/** Parses "90s", "15m", "1h30m", "2d" into nanoseconds; null when unreadable. */
export function parseDuration(text) {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
  const trimmed = String(text || '').trim();
  if (!/^(\d+(?:\.\d+)?(ms|s|m|h|d))+$/.test(trimmed)) return null;
  const unit = { ms: 1e6, s: 1e9, m: 60e9, h: 3600e9, d: 86400e9 };
  let total = 0;
  for (const [, n, u] of trimmed.matchAll(re)) total += Number(n) * unit[u];
  return Math.round(total);
}

/** Bytes as "12.3 MiB". */
export function bytes(n) {
  let v = Number(n || 0);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/** Megabytes as "512 MiB" or "2.0 GiB". */
export function mib(n) {
  return bytes(Number(n || 0) * 1024 * 1024);
}

/** CPU in MHz as "500 MHz" or "2.5 GHz". */
export function mhz(n) {
  const v = Number(n || 0);
  return v >= 1000 ? `${(v / 1000).toFixed(1)} GHz` : `${Math.round(v)} MHz`;
}

/** A percentage with one decimal. */
export function percent(part, whole) {
  if (!whole) return '0%';
  return `${((100 * part) / whole).toFixed(1)}%`;
}
