// Modal forms for actions that take input (scale, dispatch, drain, signal)
// or need a confirmation (stop, purge): a <dialog> that answers its values,
// or null when cancelled.

import { h } from '../dom.js';

/**
 * Opens a modal form. fields: [{name, label, type: 'text'|'number'|'checkbox'|
 * 'select'|'textarea', value, options, placeholder, help}]. Resolves to
 * {name: value} on submit, null on cancel.
 */
export function openForm(title, fields = [], { submit = 'OK', danger = false, text } = {}) {
  return new Promise((resolve) => {
    const inputs = {};
    const rows = fields.map((f) => {
      let input;
      if (f.type === 'select') {
        input = h('select', { name: f.name }, f.options.map((o) => h('option', { value: o, selected: o === f.value }, o)));
      } else if (f.type === 'textarea') {
        input = h('textarea', { name: f.name, rows: f.rows || 4, placeholder: f.placeholder || '' });
        input.value = f.value || '';
      } else if (f.type === 'checkbox') {
        input = h('input', { type: 'checkbox', name: f.name, checked: !!f.value });
      } else {
        input = h('input', { type: f.type || 'text', name: f.name, value: f.value ?? '', placeholder: f.placeholder || '', min: f.min });
      }
      inputs[f.name] = input;
      return f.type === 'checkbox'
        ? h('label', { class: 'check' }, input, ` ${f.label}`)
        : h('label', {}, h('span', {}, f.label), input, f.help ? h('small', { class: 'muted' }, f.help) : null);
    });
    const dialog = h('dialog', { class: 'form-dialog' });
    const close = (value) => {
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    const form = h('form', {
      method: 'dialog',
      onsubmit: (e) => {
        e.preventDefault();
        const out = {};
        for (const [name, input] of Object.entries(inputs)) out[name] = input.type === 'checkbox' ? input.checked : input.value;
        close(out);
      },
    },
    h('h2', {}, title),
    text ? h('p', {}, text) : null,
    rows,
    h('div', { class: 'buttons' },
      h('button', { type: 'button', class: 'secondary', onclick: () => close(null) }, 'Cancel'),
      h('button', { type: 'submit', class: danger ? 'danger' : 'primary', dataset: { confirm: '' } }, submit)));
    dialog.appendChild(form);
    dialog.addEventListener('cancel', (e) => {
      e.preventDefault();
      close(null);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    (Object.values(inputs)[0] || form.querySelector('[type=submit]')).focus();
  });
}

/** Asks a yes/no question; resolves true when confirmed. */
export async function confirmAction(title, text, submit = 'Yes', danger = true) {
  return (await openForm(title, [], { submit, danger, text })) !== null;
}
