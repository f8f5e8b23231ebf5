// The computer's /workspace: browse, upload, download (a directory as
// tar), make a directory, delete.
import {api, qs, download} from './api.js';
import {h, replace, table, field, fmtBytes, fmtTime, announce, busy} from './dom.js';

const ROOT = '/workspace';

// rel is a listing path relative to /workspace ('' for the root).
function rel(path) {
  return path === ROOT ? '' : path.replace(/^\/workspace\//, '');
}

function encodePath(p) {
  return p.split('/').map(encodeURIComponent).join('/');
}

export async function render(panel, id) {
  const base = `/v1/computers/${encodeURIComponent(id)}/files`;
  let dir = '';
  const crumbs = h('nav', {class: 'crumbs', 'aria-label': 'Directory'});
  const listBox = h('div');
  const upload = h('input', {type: 'file', multiple: true, id: 'upload'});
  const mkdirName = h('input', {name: 'dir', autocomplete: 'off', placeholder: 'name'});
  const mkdirButton = h('button', {type: 'submit', class: 'quiet'}, 'Make directory');
  const refreshButton = h('button', {type: 'button', class: 'quiet'}, 'Refresh');
  const tarButton = h('button', {type: 'button', class: 'quiet'}, 'Download directory (tar)');
  const mkdirForm = h('form', {class: 'inline-form'}, field('New directory', mkdirName), mkdirButton);
  replace(panel,
    h('div', {class: 'toolbar'}, field('Upload files here', upload), mkdirForm, refreshButton, tarButton),
    crumbs, listBox);

  async function list() {
    replace(crumbs, crumbLinks());
    try {
      const page = await api('GET', base + qs({dir}));
      const rows = [...page.data].sort((a, b) => (a.type === 'dir') === (b.type === 'dir') ? a.name.localeCompare(b.name) : a.type === 'dir' ? -1 : 1);
      replace(listBox,
        table(`Files in ${ROOT}/${dir}`, columns(), rows, 'This directory is empty.'),
        page.truncated ? h('p', {class: 'hint'}, 'The listing was cut at the server’s limit.') : null);
    } catch (err) {
      replace(listBox, h('p', {class: 'msg error'}, err.message));
    }
  }

  function crumbLinks() {
    const parts = dir ? dir.split('/') : [];
    const out = [crumbButton('workspace', '')];
    parts.forEach((p, i) => out.push(' / ', crumbButton(p, parts.slice(0, i + 1).join('/'))));
    return out;
  }
  function crumbButton(label, to) {
    return h('button', {type: 'button', class: 'link', 'aria-current': to === dir ? 'location' : null, onclick: () => { dir = to; list(); }}, label);
  }

  function columns() {
    return [
      {label: 'Name', cell: f => f.type === 'dir'
        ? h('button', {type: 'button', class: 'link', onclick: () => { dir = rel(f.path); list(); }}, f.name + '/')
        : f.name + (f.type === 'symlink' ? ' →' : '')},
      {label: 'Size', num: true, cell: f => f.type === 'dir' ? '' : fmtBytes(f.size)},
      {label: 'Modified', cell: f => fmtTime(f.mod_time)},
      {label: 'Actions', cell: f => h('div', {class: 'actions'},
        f.type === 'file' ? action('Download', f, () => download(`${base}/${encodePath(rel(f.path))}`, f.name)) : null,
        action('Delete', f, async () => {
          if (!confirm(`Delete ${f.path}${f.type === 'dir' ? ' and everything in it' : ''}?`)) return;
          await api('DELETE', `${base}/${encodePath(rel(f.path))}`);
          announce(`Deleted ${f.path}.`);
          list();
        }, 'danger'))},
    ];
  }
  function action(label, f, fn, cls = 'quiet') {
    const b = h('button', {type: 'button', class: cls, 'aria-label': `${label} ${f.name}`}, label);
    b.addEventListener('click', () => busy(b, fn));
    return b;
  }

  upload.addEventListener('change', () => busy(upload, async () => {
    for (const file of upload.files) {
      const to = dir ? `${dir}/${file.name}` : file.name;
      const r = await api('PUT', `${base}/${encodePath(to)}`, {body: file, headers: {'Content-Type': 'application/octet-stream'}});
      announce(`Uploaded ${r.path} (${fmtBytes(r.bytes)}).`);
    }
    upload.value = '';
    await list();
  }));
  mkdirForm.addEventListener('submit', e => {
    e.preventDefault();
    busy(mkdirButton, async () => {
      const name = mkdirName.value.trim();
      if (!name) return;
      await api('POST', `${base}/mkdir`, {json: {path: `${ROOT}/${dir ? dir + '/' : ''}${name}`}});
      mkdirName.value = '';
      await list();
    });
  });
  refreshButton.addEventListener('click', () => busy(refreshButton, list));
  tarButton.addEventListener('click', () => busy(tarButton, () =>
    download(`${base}/${encodePath(dir)}?format=tar`, `${(dir || 'workspace').replace(/\//g, '_')}.tar`)));
  await list();
}
