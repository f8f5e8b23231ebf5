// Artifacts: files computers exported (images kept from Python cells,
// builtin__computer_read_file with export), newest first, downloadable.
import {api, qs, download} from './api.js';
import {h, replace, table, field, fmtBytes, fmtTime, busy} from './dom.js';
import {pager} from './pager.js';

export async function render(main) {
  const computer = h('input', {name: 'computer_id', placeholder: 'cmp_…', autocomplete: 'off'});
  const filter = h('form', {class: 'inline-form'}, field('Computer', computer), h('button', {type: 'submit', class: 'quiet'}, 'Filter'));
  const box = h('div');
  replace(main, h('h1', {tabindex: -1}, 'Artifacts'), filter, box);
  const load = () => pager(box, after => api('GET', '/v1/artifacts' + qs({computer_id: computer.value.trim(), limit: 50, after})),
    rows => table('Artifacts', columns, rows, 'No artifacts. Python cells keep their images as artifacts when asked to.'));
  filter.addEventListener('submit', e => { e.preventDefault(); load(); });
  await load();
}

const columns = [
  {label: 'File', cell: a => a.filename},
  {label: 'Size', num: true, cell: a => fmtBytes(a.bytes)},
  {label: 'Computer', cell: a => a.computer_id ? h('a', {href: `#/computers/${a.computer_id}`}, a.computer_id) : ''},
  {label: 'Created', cell: a => fmtTime(a.created_at)},
  {label: 'Id', cell: a => h('code', {}, a.id)},
  {label: '', cell: a => {
    const b = h('button', {type: 'button', class: 'quiet', 'aria-label': `Download ${a.filename}`}, 'Download');
    b.addEventListener('click', () => busy(b, () => download(`/v1/artifacts/${encodeURIComponent(a.id)}/content`, a.filename)));
    return b;
  }},
];
