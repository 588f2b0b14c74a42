// Keeping a page current without reloads: blocking queries (`?index=`), the
// way Nomad's clients watch a resource, and plain polling for the few
// endpoints that are not blocking (stats). Everything a page starts is tied
// to its scope and stops when the page is left.

import { call } from './api.js';

/** The lifetime of one page: aborted when the router leaves it. */
export class Scope {
  constructor() {
    this.controller = new AbortController();
    this.cleanups = [];
  }

  get signal() {
    return this.controller.signal;
  }

  get alive() {
    return !this.controller.signal.aborted;
  }

  /** Runs `fn` when the page is left. */
  onClose(fn) {
    this.cleanups.push(fn);
  }

  close() {
    this.controller.abort();
    for (const fn of this.cleanups.splice(0)) {
      try {
        fn();
      } catch (err) {
        console.error(err);
      }
    }
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}

/**
 * Watches `path` with blocking queries: `onData(data, index)` with each new
 * answer, `onError(err)` when a call fails (retried with backoff). Successive
 * reads start at least `minGapMs` apart, and four times as far apart as the
 * first (unblocked) read took, so a busy cluster does not make the page
 * re-render more than once a second, nor a large list keep the browser and
 * the gateway busy.
 */
export function watch(scope, path, { query = {}, onData, onError, wait = '60s', minGapMs = 1000 }) {
  let index = 0;
  let failures = 0;
  let cost = null;
  const loop = async () => {
    while (scope.alive) {
      const started = Date.now();
      try {
        const q = { ...query };
        if (index > 0) Object.assign(q, { index, wait });
        const res = await call('GET', path, { query: q, signal: scope.signal });
        failures = 0;
        const fresh = index === 0 || res.index !== index;
        // An index that goes back (a new store, a restore) starts over.
        index = res.index > 0 ? res.index : 0;
        if (fresh && scope.alive) onData(res.data, res.index);
      } catch (err) {
        if (!scope.alive || err.name === 'AbortError') return;
        failures += 1;
        onError?.(err);
        await sleep(Math.min(30000, 1000 * 2 ** Math.min(failures, 5)), scope.signal);
        continue;
      }
      // A list that takes long to read and draw waits longer before the
      // next read: the first read does not block, so its time is what one
      // read of the whole costs, and at most a quarter of the time goes to
      // keeping it fresh.
      if (cost === null) cost = Date.now() - started;
      const gap = Math.max(minGapMs, 4 * cost) - (Date.now() - started);
      if (gap > 0) await sleep(gap, scope.signal);
    }
  };
  loop();
}

/** Calls `fn` now and every `ms` while the scope lives (one call at a time). */
export function every(scope, ms, fn) {
  const loop = async () => {
    while (scope.alive) {
      try {
        await fn();
      } catch (err) {
        if (err.name === 'AbortError') return;
        console.warn(err);
      }
      await sleep(ms, scope.signal);
    }
  };
  loop();
}

/** Coalesces calls of `fn` made within `ms` into one (trailing). */
export function debounce(ms, fn) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
