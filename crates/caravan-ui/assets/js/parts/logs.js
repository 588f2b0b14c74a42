// A task's log, stdout or stderr, read from /v1/client/fs/logs: the last
// part of the file, then (when following) every new byte as the task writes
// it, streamed over one long response.

import { h, mount } from '../dom.js';
import { send } from '../api.js';
import { sleep } from '../live.js';
import { errorBox } from './errors.js';

/** How much of the end of a log to show first. */
const TAIL_BYTES = 50000;
/** How much text the view keeps; older text is dropped. */
const KEEP_CHARS = 1000000;

/** The log view of one allocation's tasks, with task, stream and follow controls. */
export class LogView {
  constructor(alloc, scope, { task, type = 'stdout' } = {}) {
    this.alloc = alloc;
    this.scope = scope;
    this.tasks = Object.keys(alloc.TaskStates || {}).sort();
    if (!this.tasks.length) this.tasks = (alloc.Job?.TaskGroups || []).find((g) => g.Name === alloc.TaskGroup)?.Tasks?.map((t) => t.Name) || [];
    this.task = task && this.tasks.includes(task) ? task : this.tasks[0];
    this.type = type;
    this.follow = true;
    this.controller = null;
    this.pre = h('pre', { class: 'logs', tabindex: '0', dataset: { stream: type } });
    this.status = h('span', { class: 'muted log-status' });
    this.problem = h('div');
    this.el = h('section', { class: 'log-view' }, this.controls(), this.problem, this.pre);
    scope.onClose(() => this.controller?.abort());
  }

  controls() {
    const taskSelect = h('select', { 'aria-label': 'Task', onchange: (e) => { this.task = e.target.value; this.restart(); } },
      this.tasks.map((t) => h('option', { value: t, selected: t === this.task }, t)));
    const typeButtons = ['stdout', 'stderr'].map((t) => h('button', {
      class: ['small', 'toggle', t === this.type && 'on'], dataset: { type: t },
      onclick: (e) => {
        this.type = t;
        for (const b of e.target.parentElement.querySelectorAll('button.toggle')) b.classList.toggle('on', b.dataset.type === t);
        this.restart();
      },
    }, t));
    const follow = h('label', { class: 'check' }, h('input', {
      type: 'checkbox', checked: this.follow, onchange: (e) => { this.follow = e.target.checked; this.restart(); },
    }), ' Follow');
    const clear = h('button', { class: 'small', onclick: () => { this.pre.textContent = ''; } }, 'Clear');
    return h('div', { class: 'toolbar' }, this.tasks.length > 1 ? taskSelect : h('span', { class: 'mono' }, this.task || ''), typeButtons, follow, clear, this.status);
  }

  restart() {
    this.controller?.abort();
    this.pre.textContent = '';
    this.pre.dataset.stream = this.type;
    this.start();
  }

  append(text) {
    if (!text) return;
    const pinned = this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - 24;
    this.pre.appendChild(document.createTextNode(text));
    if (this.pre.textContent.length > KEEP_CHARS) {
      this.pre.textContent = this.pre.textContent.slice(-KEEP_CHARS / 2);
    }
    if (pinned) this.pre.scrollTop = this.pre.scrollHeight;
  }

  /**
   * Reads the end of the log and, while following, what comes after; a
   * stream that fails is opened again (the view starts over from the end
   * of the log, so nothing shows twice) until the view is closed.
   */
  async start() {
    if (!this.task) {
      this.status.textContent = 'no tasks';
      return;
    }
    const controller = new AbortController();
    this.controller = controller;
    while (!controller.signal.aborted && this.scope.alive) {
      try {
        this.status.textContent = this.follow ? 'following…' : 'loading…';
        const res = await send('GET', `/v1/client/fs/logs/${encodeURIComponent(this.alloc.ID)}`, {
          query: {
            task: this.task,
            type: this.type,
            plain: 'true',
            follow: this.follow ? 'true' : undefined,
            origin: 'end',
            offset: TAIL_BYTES,
            namespace: this.alloc.Namespace,
          },
          signal: controller.signal,
        });
        mount(this.problem);
        this.pre.textContent = '';
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          this.append(decoder.decode(value, { stream: true }));
          this.status.textContent = this.follow ? 'following (live)' : '';
        }
        this.append(decoder.decode());
        this.status.textContent = this.follow ? 'the log ended' : 'end of log';
        return;
      } catch (err) {
        if (controller.signal.aborted || err.name === 'AbortError') return;
        mount(this.problem, errorBox(err, `read the ${this.type} of task "${this.task}"`));
        this.status.textContent = '';
        if (!this.follow || err.status === 403) return;
        // A task that has not started yet has no log: try again shortly.
        await sleep(2000, controller.signal);
      }
    }
  }
}
