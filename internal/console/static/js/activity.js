// Audit and usage of the key's organisation over a time window, oldest
// first as the API answers them (usage totalled by kind).
import {api, qs} from './api.js';
import {h, replace, table, field, fmtTime} from './dom.js';
import {pager} from './pager.js';

const WINDOWS = [['3600', 'last hour'], ['86400', 'last day'], ['604800', 'last week'], ['', 'all time']];

export async function render(main) {
  const windowSel = h('select', {name: 'window'}, WINDOWS.map(([v, l]) => h('option', {value: v, selected: v === '86400'}, l)));
  const type = h('input', {name: 'type', placeholder: 'e.g. computer.created', autocomplete: 'off'});
  const form = h('form', {class: 'inline-form'}, field('Window', windowSel), field('Audit event type', type),
    h('button', {type: 'submit', class: 'quiet'}, 'Show'));
  const auditBox = h('div');
  const usageBox = h('div');
  replace(main, h('h1', {tabindex: -1}, 'Audit and usage'), form,
    h('section', {'aria-labelledby': 'audit-title'}, h('h2', {id: 'audit-title'}, 'Audit'), auditBox),
    h('section', {'aria-labelledby': 'usage-title'}, h('h2', {id: 'usage-title'}, 'Usage'), usageBox));

  async function load() {
    const since = windowSel.value ? Math.floor(Date.now() / 1000) - Number(windowSel.value) : '';
    await Promise.all([
      pager(auditBox, after => api('GET', '/v1/audit' + qs({since, type: type.value.trim(), limit: 200, after})),
        rows => table('Audit events', auditColumns, rows, 'No audit events in this window.')),
      pager(usageBox, after => api('GET', '/v1/usage' + qs({since, limit: 500, after})),
        rows => h('div', {}, totals(rows), table('Usage rows', usageColumns, rows, 'No usage in this window.'))),
    ]);
  }
  form.addEventListener('submit', e => { e.preventDefault(); load(); });
  await load();
}

const computerLink = id => id ? h('a', {href: `#/computers/${id}`}, id) : '';

const auditColumns = [
  {label: 'Time', cell: e => fmtTime(e.created_at)},
  {label: 'Event', cell: e => h('code', {}, e.type)},
  {label: 'Computer', cell: e => computerLink(e.computer_id)},
  {label: 'Key', cell: e => e.key_id || ''},
  {label: 'Details', cell: e => e.data && Object.keys(e.data).length ? h('code', {class: 'wrap'}, JSON.stringify(e.data)) : ''},
];

const usageColumns = [
  {label: 'Time', cell: u => fmtTime(u.created_at)},
  {label: 'Kind', cell: u => u.kind},
  {label: 'Quantity', num: true, cell: u => String(u.quantity)},
  {label: 'Computer', cell: u => computerLink(u.computer_id)},
  {label: 'Key', cell: u => u.key_id || ''},
];

function totals(rows) {
  const sum = new Map();
  for (const u of rows) sum.set(u.kind, (sum.get(u.kind) || 0) + u.quantity);
  if (!sum.size) return null;
  return h('dl', {class: 'facts'}, [...sum].map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, String(v)))));
}
