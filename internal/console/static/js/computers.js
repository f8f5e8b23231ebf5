// Computers: the live list (polled while the tab is visible), creation,
// and the actions of each (open, extend, pause, resume, delete).
import {api, qs} from './api.js';
import {h, replace, refresh as update, table, field, fmtTime, announce, busy} from './dom.js';
import {limitsText, lifetimeCell, tick, computerActions} from './computerinfo.js';

const POLL_MS = 3000;

export async function render(main) {
  const listBox = h('div', {'aria-live': 'off'});
  const showAll = h('input', {type: 'checkbox', id: 'show-all'});
  const form = createForm(() => refresh());
  replace(main,
    h('h1', {tabindex: -1}, 'Computers'),
    form,
    h('section', {'aria-labelledby': 'list-title'},
      h('div', {class: 'row'},
        h('h2', {id: 'list-title'}, 'Your organisation’s computers'),
        h('label', {class: 'inline'}, showAll, ' show stopped')),
      listBox));

  let stopped = false;
  let timer = null;
  async function refresh() {
    clearTimeout(timer);
    try {
      const page = await api('GET', '/v1/computers' + qs({status: showAll.checked ? 'all' : '', order: 'desc', limit: 100}));
      if (stopped) return;
      update(listBox, page.data, () => table('Computers', columns(refresh), page.data, 'No computers. Create one above.'));
    } catch (err) {
      if (!stopped) update(listBox, err.message, () => h('p', {class: 'msg error'}, err.message));
    }
    if (!stopped) timer = setTimeout(poll, POLL_MS);
  }
  function poll() {
    if (document.visibilityState === 'visible') refresh();
    else timer = setTimeout(poll, POLL_MS);
  }
  showAll.addEventListener('change', refresh);
  const clock = setInterval(() => tick(listBox), 1000);
  await refresh();
  return () => { stopped = true; clearTimeout(timer); clearInterval(clock); };
}

function columns(refresh) {
  return [
    {label: 'Computer', cell: c => h('a', {href: `#/computers/${c.id}`}, c.name || c.id)},
    {label: 'Status', cell: c => h('span', {class: 'badge ' + c.status}, c.status)},
    {label: 'Template', cell: c => c.template},
    {label: 'Limits', cell: c => limitsText(c.limits)},
    {label: 'Lifetime', cell: c => lifetimeCell(c)},
    {label: 'Created', cell: c => fmtTime(c.created_at)},
    {label: 'Actions', cell: c => computerActions(c, refresh)},
  ];
}

// createForm makes a computer from a template with a memory and a lifetime.
function createForm(created) {
  const template = h('select', {name: 'template'}, h('option', {value: ''}, 'default'));
  const name = h('input', {name: 'name', maxlength: 64, placeholder: 'optional', autocomplete: 'off'});
  const memory = h('input', {name: 'memory_mb', type: 'number', min: 16, step: 16, placeholder: 'default'});
  const lifetime = h('input', {name: 'lifetime_minutes', type: 'number', min: 1, placeholder: 'default'});
  const submit = h('button', {type: 'submit'}, 'Create computer');
  api('GET', '/v1/templates').then(list => {
    for (const t of list.data) template.append(h('option', {value: t.name}, t.name + (t.default ? ' (default)' : '')));
  }).catch(() => { /* the default still works */ });
  const form = h('form', {class: 'card inline-form', 'aria-labelledby': 'create-title'},
    h('h2', {id: 'create-title'}, 'New computer'),
    h('div', {class: 'fields'},
      field('Template', template), field('Name', name), field('Memory (MiB)', memory), field('Lifetime (minutes)', lifetime)),
    submit);
  form.addEventListener('submit', e => {
    e.preventDefault();
    busy(submit, async () => {
      const body = {};
      if (template.value) body.template = template.value;
      if (name.value.trim()) body.name = name.value.trim();
      if (memory.value) body.memory_mb = Number(memory.value);
      if (lifetime.value) body.lifetime_seconds = Math.round(Number(lifetime.value) * 60);
      const c = await api('POST', '/v1/computers', {json: body});
      announce(`Created ${c.id} (${c.status}).`);
      created();
    });
  });
  return form;
}
