// A small terminal screen in a <pre>: what a command writes, with the
// control codes a shell and its line discipline use handled (newline,
// carriage return, backspace, tab, erase in line, cursor left and right,
// clear screen) and every other escape sequence (colours, titles, modes)
// dropped. Lines that have scrolled past are kept as text; only the line
// under the cursor is redrawn.

import { h } from '../dom.js';

/** How many finished lines the screen keeps; older ones are dropped. */
const KEEP_LINES = 5000;
const TAB = 8;
/** A control character, or a byte of one of the escape sequences below. */
const SPECIAL = /[\x00-\x1f\x7f]/g;

export class Screen {
  constructor(props = {}) {
    this.history = h('span', { class: 'history' });
    this.before = document.createTextNode('');
    this.under = h('span', { class: 'cursor' }, ' ');
    this.after = document.createTextNode('');
    this.el = h('pre', { class: 'terminal', tabindex: '0', ...props }, this.history, this.before, this.under, this.after);
    this.reset();
  }

  /** Empties the screen. */
  reset() {
    this.history.replaceChildren();
    this.lines = 0;
    this.line = '';
    this.col = 0;
    this.stream = 'stdout';
    // Parser state, kept between writes: a sequence may span two frames.
    this.state = 'text';
    this.params = '';
    this.draw();
  }

  /** Everything the screen shows, as text. */
  get text() {
    return this.history.textContent + this.line;
  }

  /** Writes `text` as stream `stream` sent it ('stdout', 'stderr' or the 'stdin' echoed here; each shown apart). */
  write(text, stream = 'stdout') {
    const pinned = this.el.scrollTop + this.el.clientHeight >= this.el.scrollHeight - 24;
    this.stream = stream;
    let i = 0;
    while (i < text.length) {
      if (this.state === 'text') {
        SPECIAL.lastIndex = i;
        const m = SPECIAL.exec(text);
        const end = m ? m.index : text.length;
        if (end > i) this.put(text.slice(i, end));
        if (!m) break;
        this.control(text[end]);
        i = end + 1;
      } else {
        this.escape(text[i]);
        i += 1;
      }
    }
    this.draw();
    if (pinned) this.el.scrollTop = this.el.scrollHeight;
  }

  /** Text at the cursor, overwriting what was there. */
  put(run) {
    const line = this.line.length < this.col ? this.line.padEnd(this.col) : this.line;
    this.line = line.slice(0, this.col) + run + line.slice(this.col + run.length);
    this.col += run.length;
  }

  control(c) {
    switch (c) {
      case '\n':
        this.commit();
        break;
      case '\r':
        this.col = 0;
        break;
      case '\b':
        this.col = Math.max(0, this.col - 1);
        break;
      case '\t':
        this.put(' '.repeat(TAB - (this.col % TAB)));
        break;
      case '\x1b':
        this.state = 'esc';
        break;
      default:
        // The bell and the rest of the C0 codes show nothing.
        break;
    }
  }

  escape(c) {
    switch (this.state) {
      case 'esc':
        if (c === '[') {
          this.state = 'csi';
          this.params = '';
        } else if (c === ']') {
          this.state = 'osc';
        } else if (c === '(' || c === ')') {
          this.state = 'charset';
        } else {
          this.state = 'text';
        }
        break;
      case 'charset':
        this.state = 'text';
        break;
      case 'osc':
        // An operating system command (a window title) ends with BEL or ESC \.
        if (c === '\x07') this.state = 'text';
        else if (c === '\x1b') this.state = 'osc-esc';
        break;
      case 'osc-esc':
        this.state = 'text';
        break;
      case 'csi':
        if (c >= '@' && c <= '~') {
          this.state = 'text';
          this.csi(c, this.params);
        } else {
          this.params += c;
        }
        break;
      default:
        this.state = 'text';
    }
  }

  /** A control sequence `ESC [ params final`. */
  csi(final, params) {
    if (params.startsWith('?')) return;
    const n = Number(params.split(';')[0]) || 0;
    switch (final) {
      case 'K':
        if (n === 0) this.line = this.line.slice(0, this.col);
        else if (n === 1) this.line = ' '.repeat(this.col) + this.line.slice(this.col);
        else this.line = '';
        break;
      case 'C':
        this.col += Math.max(1, n);
        break;
      case 'D':
        this.col = Math.max(0, this.col - Math.max(1, n));
        break;
      case 'G':
        this.col = Math.max(0, n - 1);
        break;
      case 'H':
        // Only one line is addressable: home is its start.
        this.col = 0;
        break;
      case 'J':
        if (n >= 2) {
          this.history.replaceChildren();
          this.lines = 0;
          this.line = '';
          this.col = 0;
        } else if (n === 0) {
          this.line = this.line.slice(0, this.col);
        }
        break;
      default:
        // Colours (m), modes and the rest are dropped.
        break;
    }
  }

  /** Ends the cursor's line: it joins the lines kept as text. */
  commit() {
    const last = this.history.lastElementChild;
    const text = `${this.line}\n`;
    if (last && last.dataset.stream === this.stream) last.appendChild(document.createTextNode(text));
    else this.history.appendChild(h('span', { class: this.stream, dataset: { stream: this.stream } }, text));
    this.line = '';
    this.col = 0;
    this.lines += 1;
    if (this.lines > KEEP_LINES) this.trim();
  }

  /** Drops the oldest half of the kept lines. */
  trim() {
    const text = this.history.textContent;
    let cut = 0;
    for (let dropped = 0; dropped < KEEP_LINES / 2; dropped += 1) cut = text.indexOf('\n', cut) + 1;
    let left = cut;
    while (left > 0 && this.history.firstChild) {
      const first = this.history.firstChild;
      const len = first.textContent.length;
      if (len <= left) {
        first.remove();
        left -= len;
      } else {
        first.textContent = first.textContent.slice(left);
        left = 0;
      }
    }
    this.lines -= KEEP_LINES / 2;
  }

  draw() {
    const line = this.line.padEnd(this.col + 1);
    this.before.data = line.slice(0, this.col);
    this.under.textContent = line[this.col];
    this.after.data = line.slice(this.col + 1).trimEnd();
    this.under.dataset.stream = this.stream;
  }

  /** The terminal's size in characters, from the element's size and its font. */
  size() {
    const probe = h('span', { class: 'measure', 'aria-hidden': 'true' }, 'M'.repeat(10));
    this.el.appendChild(probe);
    const box = probe.getBoundingClientRect();
    probe.remove();
    const style = getComputedStyle(this.el);
    const width = this.el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const height = this.el.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    const charWidth = box.width / 10 || 8;
    const lineHeight = box.height || 16;
    return {
      width: Math.max(20, Math.floor(width / charWidth)),
      height: Math.max(5, Math.floor(height / lineHeight)),
    };
  }
}
