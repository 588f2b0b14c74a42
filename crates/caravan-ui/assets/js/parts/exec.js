// A command run in one of an allocation's tasks, over the gateway's exec
// WebSocket (`/v1/client/allocation/<id>/exec`): the token goes in the
// first frame (a browser cannot set headers on a WebSocket), then stdin
// and terminal sizes go out and stdout, stderr and the exit code come back,
// each frame JSON with the bytes in base64.

import { h, mount } from '../dom.js';
import { send, token, withQuery, ApiError } from '../api.js';
import { debounce } from '../live.js';
import { errorBox } from './errors.js';
import { Screen } from './screen.js';

const DEFAULT_COMMAND = '/bin/sh';
/** WebSocket close codes the gateway uses: a refusal, a failure of the server. */
const CLOSE_POLICY = 1008;
/** The reasons a refusal of the token gives. */
const DENIED = ['Permission denied', 'ACL token not found'];

/** Keys that send more than the character they type, as a VT100 sends them. */
const KEYS = {
  Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b', Delete: '\x1b[3~',
  ArrowUp: '\x1b[A', ArrowDown: '\x1b[B', ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D',
  Home: '\x1b[H', End: '\x1b[F', PageUp: '\x1b[5~', PageDown: '\x1b[6~',
};

/** Splits a command line into words: spaces separate, quotes group, a backslash escapes. */
export function words(line) {
  const out = [];
  let word = null;
  let quote = null;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      word = word ?? '';
    } else if (c === '\\' && i + 1 < line.length) {
      word = (word ?? '') + line[++i];
    } else if (/\s/.test(c)) {
      if (word !== null) out.push(word);
      word = null;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (quote) throw new Error(`the command has an unclosed ${quote}`);
  if (word !== null) out.push(word);
  return out;
}

function base64(text) {
  let bin = '';
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin);
}

function unbase64(data) {
  return Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
}

/** What a key press sends to a terminal, or null for a key that sends nothing. */
function keyBytes(e) {
  if (e.metaKey) return null;
  if (e.ctrlKey && !e.altKey && e.key.length === 1) {
    const code = e.key.toUpperCase().charCodeAt(0);
    if (code >= 64 && code <= 95) return String.fromCharCode(code - 64);
    if (e.key === ' ') return '\x00';
    return null;
  }
  if (KEYS[e.key]) return (e.altKey ? '\x1b' : '') + KEYS[e.key];
  if (e.key.length === 1 && !e.ctrlKey) return (e.altKey ? '\x1b' : '') + e.key;
  return null;
}

/** The Exec tab of an allocation: pick a task and a command, then a terminal. */
export class ExecView {
  constructor(alloc, scope, { task } = {}) {
    this.alloc = alloc;
    this.scope = scope;
    const states = alloc.TaskStates || {};
    this.tasks = Object.keys(states).sort();
    if (!this.tasks.length) this.tasks = (alloc.Job?.TaskGroups || []).find((g) => g.Name === alloc.TaskGroup)?.Tasks?.map((t) => t.Name) || [];
    const running = this.tasks.find((t) => states[t]?.State === 'running');
    this.task = task && this.tasks.includes(task) ? task : running || this.tasks[0];
    this.socket = null;
    this.screen = new Screen({ dataset: { state: 'idle' }, 'aria-label': 'Terminal' });
    this.screen.el.addEventListener('keydown', (e) => this.onKey(e));
    this.screen.el.addEventListener('paste', (e) => this.onPaste(e));
    this.status = h('span', { class: 'muted exec-status' });
    this.problem = h('div');
    this.command = h('input', {
      type: 'text', class: 'mono exec-command', value: DEFAULT_COMMAND, 'aria-label': 'Command', spellcheck: 'false',
      onkeydown: (e) => { if (e.key === 'Enter') this.open(); },
    });
    this.tty = h('input', { type: 'checkbox', checked: true });
    this.openButton = h('button', { class: 'primary', dataset: { action: 'exec-open' }, onclick: () => this.open() }, 'Open');
    this.closeButton = h('button', { dataset: { action: 'exec-close' }, disabled: true, onclick: () => this.close() }, 'Close');
    // Without a terminal nothing echoes what is typed: it is edited here and sent a line at a time.
    this.lineInput = h('input', {
      type: 'text', class: 'mono exec-line', 'aria-label': 'Standard input', placeholder: 'a line of standard input; Enter sends it',
      onkeydown: (e) => this.onLine(e),
    });
    this.eofButton = h('button', { class: 'small', dataset: { action: 'exec-eof' }, onclick: () => this.sendFrame({ stdin: { close: true } }) }, 'Send EOF');
    this.lineBar = h('div', { class: 'toolbar exec-stdin', hidden: true }, this.lineInput, this.eofButton);
    this.el = h('section', { class: 'exec-view' }, this.controls(), this.problem, this.screen.el, this.lineBar);
    const resized = debounce(100, () => this.sendSize());
    this.resizes = new ResizeObserver(resized);
    this.resizes.observe(this.screen.el);
    scope.onClose(() => {
      this.resizes.disconnect();
      this.socket?.close(1000);
    });
    if (alloc.ClientStatus !== 'running') this.status.textContent = `the allocation is ${alloc.ClientStatus}: its tasks may not be running`;
  }

  controls() {
    const taskSelect = h('select', { 'aria-label': 'Task', class: 'exec-task', onchange: (e) => { this.task = e.target.value; } },
      this.tasks.map((t) => h('option', { value: t, selected: t === this.task }, t)));
    return h('div', { class: 'toolbar' },
      h('span', { class: 'muted' }, 'Task'),
      this.tasks.length > 1 ? taskSelect : h('span', { class: 'mono exec-task' }, this.task || 'none'),
      h('span', { class: 'muted' }, 'Command'),
      this.command,
      h('label', { class: 'check', title: 'Run the command in a terminal (a tty): a shell then prompts and echoes' }, this.tty, ' Terminal'),
      this.openButton, this.closeButton, this.status);
  }

  /** The exec endpoint's URL for the chosen task and command. */
  url(argv, tty) {
    const path = `/v1/client/allocation/${encodeURIComponent(this.alloc.ID)}/exec`;
    return withQuery(path, {
      task: this.task,
      command: JSON.stringify(argv),
      tty: String(tty),
      ws_handshake: 'true',
      namespace: this.alloc.Namespace,
    });
  }

  setState(state, text) {
    this.screen.el.dataset.state = state;
    this.status.textContent = text;
    const live = state === 'connecting' || state === 'open';
    this.openButton.disabled = live;
    this.closeButton.disabled = !live;
    this.command.disabled = live;
    this.tty.disabled = live;
  }

  /** Starts a session: the command of the command field in the chosen task. */
  open() {
    if (this.socket) return;
    mount(this.problem);
    let argv;
    try {
      argv = words(this.command.value);
    } catch (err) {
      mount(this.problem, errorBox(err, 'read the command'));
      return;
    }
    if (!this.task) {
      mount(this.problem, errorBox(new Error('this allocation has no tasks'), 'start a command'));
      return;
    }
    if (!argv.length) {
      mount(this.problem, errorBox(new Error('name a command to run, such as /bin/sh'), 'start a command'));
      return;
    }
    const tty = this.tty.checked;
    this.ttyOn = tty;
    this.exited = null;
    this.closedByUs = false;
    this.opened = false;
    this.decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    this.screen.reset();
    this.lineBar.hidden = tty;
    const path = this.url(argv, tty);
    const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
    const socket = new WebSocket(`${scheme}//${window.location.host}${path}`);
    this.socket = socket;
    this.path = path;
    this.setState('connecting', `starting ${argv.join(' ')} in ${this.task}…`);
    socket.onopen = () => {
      this.opened = true;
      socket.send(JSON.stringify({ version: 1, auth_token: token.secret }));
      this.setState('open', `${argv.join(' ')} in ${this.task}`);
      if (tty) this.sendSize();
      (tty ? this.screen.el : this.lineInput).focus();
    };
    socket.onmessage = (event) => this.onFrame(event.data);
    socket.onclose = (event) => this.onClose(socket, event);
  }

  onFrame(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    for (const stream of ['stdout', 'stderr']) {
      const part = frame[stream];
      if (part?.data) this.screen.write(this.decoders[stream].decode(unbase64(part.data), { stream: true }), stream);
    }
    if (frame.exited) {
      const code = frame.result?.exit_code ?? 0;
      this.exited = code;
      this.screen.el.dataset.exitCode = String(code);
    }
  }

  async onClose(socket, event) {
    if (this.socket !== socket) return;
    this.socket = null;
    if (this.exited !== null) {
      this.setState('exited', `exited with code ${this.exited}`);
      return;
    }
    // Closed from this side (Close, or the page left): the gateway may
    // drop the connection without answering the close frame (1006).
    if (!this.scope.alive || this.closedByUs) {
      this.closedByUs = false;
      this.setState('closed', 'closed before the command exited');
      return;
    }
    if (event.code === CLOSE_POLICY && DENIED.includes(event.reason)) {
      this.setState('failed', 'refused');
      mount(this.problem, errorBox(new ApiError(403, event.reason, 'GET', this.path), 'exec into this allocation'));
      return;
    }
    this.setState('failed', 'the session ended without an exit code');
    if (event.reason) {
      mount(this.problem, errorBox(new Error(event.reason), 'run the command'));
    } else if (this.opened) {
      mount(this.problem, errorBox(new Error(`the connection to the gateway was lost (close code ${event.code})`), 'run the command'));
    } else {
      mount(this.problem, errorBox(await this.diagnose(), 'start the command'));
    }
  }

  /**
   * Why a connection closed before saying so (the browser tells a page
   * nothing of a refused upgrade): the same request as a plain GET, which
   * the gateway answers with its error.
   */
  async diagnose() {
    try {
      await send('GET', this.path.replace('ws_handshake=true', 'ws_handshake=false'), { signal: this.scope.signal });
    } catch (err) {
      if (err instanceof ApiError && !/WebSocket/.test(err.message)) return err;
    }
    return new Error('the connection to the gateway closed before the command started');
  }

  /** Ends the session from this side. */
  close() {
    if (!this.socket) return;
    this.closedByUs = true;
    this.socket.close(1000);
  }

  sendFrame(frame) {
    if (this.socket?.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  sendInput(text) {
    return this.sendFrame({ stdin: { data: base64(text) } });
  }

  sendSize() {
    if (!this.ttyOn) return;
    this.sendFrame({ tty_size: this.screen.size() });
  }

  onKey(e) {
    if (!this.ttyOn || this.screen.el.dataset.state !== 'open') return;
    // Copying a selection stays the browser's.
    if (e.ctrlKey && e.shiftKey) return;
    const bytes = keyBytes(e);
    if (bytes === null) return;
    e.preventDefault();
    this.sendInput(bytes);
  }

  onPaste(e) {
    if (!this.ttyOn || this.screen.el.dataset.state !== 'open') return;
    e.preventDefault();
    this.sendInput(e.clipboardData.getData('text').replace(/\r?\n/g, '\r'));
  }

  onLine(e) {
    if (e.key !== 'Enter') return;
    e.preventDefault();
    const line = this.lineInput.value;
    if (this.sendInput(`${line}\n`)) {
      this.screen.write(`${line}\n`, 'stdin');
      this.lineInput.value = '';
    }
  }
}
