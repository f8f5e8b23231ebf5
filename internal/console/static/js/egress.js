// The egress log (internet computers only, docs/network.md): one record
// per connection, refusal or DNS question; the organisation's, or one
// computer's on its page.
import {api, qs} from './api.js';
import {h, replace, table, field, fmtBytes, fmtTime} from './dom.js';
import {pager} from './pager.js';

const EMPTY = 'No records. Only computers created with a network_policy (internet) have egress.';

export async function render(main) {
  replace(main, h('h1', {tabindex: -1}, 'Egress'));
  await renderLog(main, '/v1/computer-egress', true);
}

export async function renderComputer(panel, id) {
  await renderLog(panel, `/v1/computers/${encodeURIComponent(id)}/egress`, false);
}

async function renderLog(root, path, withComputer) {
  const host = h('input', {name: 'host', placeholder: 'example.com', autocomplete: 'off'});
  const form = h('form', {class: 'inline-form'}, field('Host', host), h('button', {type: 'submit', class: 'quiet'}, 'Filter'));
  const box = h('div');
  root.append(form, box);
  const cols = withComputer ? [{label: 'Computer', cell: r => h('a', {href: `#/computers/${r.computer_id}`}, r.computer_id)}, ...columns] : columns;
  const load = () => pager(box, after => api('GET', path + qs({host: host.value.trim(), limit: 200, after})),
    rows => table('Egress records', cols, rows, EMPTY));
  form.addEventListener('submit', e => { e.preventDefault(); load(); });
  await load();
}

const columns = [
  {label: 'Opened', cell: r => fmtTime(r.opened_at)},
  {label: 'Protocol', cell: r => r.protocol},
  {label: 'Host', cell: r => r.host || r.address},
  {label: 'Port', num: true, cell: r => String(r.port)},
  {label: 'Verdict', cell: r => h('span', {class: 'badge ' + (r.verdict === 'allowed' ? 'ready' : 'failed')}, r.verdict)},
  {label: 'Rule', cell: r => r.rule + (r.error ? ` — ${r.error}` : '')},
  {label: 'Sent', num: true, cell: r => fmtBytes(r.bytes_sent)},
  {label: 'Received', num: true, cell: r => fmtBytes(r.bytes_received)},
  {label: 'Duration', num: true, cell: r => `${r.duration_ms} ms`},
];
