// Administration (admin keys only): API keys and organisations.
import {api, qs} from './api.js';
import {h, replace, table, field, fmtTime, announce, busy} from './dom.js';

const DEFAULT_CAPS = '{"tooling": {"system_tools": ["computer"]}, "computer": {}, "files": {}, "artifacts": {}}';

async function orgs() {
  return (await api('GET', '/v1/admin/orgs')).data;
}

export async function renderKeys(main) {
  const list = await orgs();
  const org = h('select', {name: 'org_id'}, list.map(o => h('option', {value: o.id}, `${o.name} (${o.id})`)));
  const name = h('input', {name: 'name', required: true, maxlength: 128, autocomplete: 'off'});
  const caps = h('textarea', {name: 'capabilities', rows: 3, spellcheck: 'false', class: 'code'}, DEFAULT_CAPS);
  const submit = h('button', {type: 'submit'}, 'Create key');
  const secretBox = h('div', {'aria-live': 'polite'});
  const filter = h('select', {name: 'filter_org'}, h('option', {value: ''}, 'all organisations'), list.map(o => h('option', {value: o.id}, o.name)));
  const box = h('div');
  const form = h('form', {class: 'card'}, h('h2', {}, 'New key'),
    h('div', {class: 'fields'}, field('Organisation', org), field('Name', name)),
    field('Capabilities (JSON)', caps, 'computer: computers; files: uploads; artifacts: exported files; tooling.system_tools: the LLM tools.'),
    submit, secretBox);
  replace(main, h('h1', {tabindex: -1}, 'API keys'), form,
    h('section', {'aria-labelledby': 'keys-title'}, h('div', {class: 'row'}, h('h2', {id: 'keys-title'}, 'Keys'), field('Show', filter)), box));

  const orgName = new Map(list.map(o => [o.id, o.name]));
  async function load() {
    try {
      const keys = (await api('GET', '/v1/admin/keys' + qs({org_id: filter.value}))).data;
      replace(box, table('Keys', keyColumns(orgName, load), keys, 'No keys.'));
    } catch (err) {
      replace(box, h('p', {class: 'msg error'}, err.message));
    }
  }
  form.addEventListener('submit', e => {
    e.preventDefault();
    busy(submit, async () => {
      let capabilities;
      try { capabilities = JSON.parse(caps.value); } catch { throw new Error('Capabilities are not valid JSON.'); }
      const r = await api('POST', '/v1/admin/keys', {json: {org_id: org.value, name: name.value.trim(), capabilities}});
      const secret = h('input', {readonly: true, value: r.secret, class: 'secret', id: 'new-secret', 'aria-label': 'The new key'});
      const copy = h('button', {type: 'button', class: 'quiet'}, 'Copy');
      copy.addEventListener('click', async () => {
        try { await navigator.clipboard.writeText(r.secret); announce('Copied.'); } catch { secret.select(); }
      });
      replace(secretBox, h('p', {class: 'msg ok'}, `Key ${r.key.id} created. Its secret is shown once: copy it now.`), secret, copy);
      name.value = '';
      load();
    });
  });
  filter.addEventListener('change', load);
  await load();
}

function keyColumns(orgName, changed) {
  return [
    {label: 'Name', cell: k => k.name},
    {label: 'Id', cell: k => h('code', {}, k.id)},
    {label: 'Prefix', cell: k => h('code', {}, k.prefix + '…')},
    {label: 'Organisation', cell: k => orgName.get(k.org_id) || k.org_id},
    {label: 'Admin', cell: k => k.admin ? 'yes' : ''},
    {label: 'Capabilities', cell: k => h('code', {class: 'wrap'}, Object.keys(k.capabilities || {}).join(', '))},
    {label: 'Created', cell: k => fmtTime(k.created_at)},
    {label: 'State', cell: k => k.revoked_at ? `revoked ${fmtTime(k.revoked_at)}` : 'active'},
    {label: '', cell: k => {
      if (k.revoked_at) return '';
      const b = h('button', {type: 'button', class: 'danger', 'aria-label': `Revoke ${k.name}`}, 'Revoke');
      b.addEventListener('click', () => busy(b, async () => {
        if (!confirm(`Revoke the key ${k.name} (${k.id})? Clients using it are refused at once.`)) return;
        await api('DELETE', `/v1/admin/keys/${encodeURIComponent(k.id)}`);
        announce(`Revoked ${k.id}.`);
        changed();
      }));
      return b;
    }},
  ];
}

export async function renderOrgs(main) {
  const name = h('input', {name: 'name', required: true, maxlength: 128, autocomplete: 'off'});
  const allow = h('input', {type: 'checkbox', checked: true});
  const internet = h('input', {type: 'checkbox'});
  const submit = h('button', {type: 'submit'}, 'Create organisation');
  const box = h('div');
  const form = h('form', {class: 'card'}, h('h2', {}, 'New organisation'),
    h('div', {class: 'fields'}, field('Name', name),
      h('label', {class: 'inline'}, allow, ' computers allowed'),
      h('label', {class: 'inline'}, internet, ' internet for its computers')),
    submit);
  replace(main, h('h1', {tabindex: -1}, 'Organisations'), form, h('h2', {}, 'Organisations'), box);
  async function load() {
    try {
      replace(box, table('Organisations', orgColumns(load), await orgs(), 'No organisations.'));
    } catch (err) {
      replace(box, h('p', {class: 'msg error'}, err.message));
    }
  }
  form.addEventListener('submit', e => {
    e.preventDefault();
    busy(submit, async () => {
      const o = await api('POST', '/v1/admin/orgs', {json: {name: name.value.trim(), allow_computer: allow.checked, computer_internet: internet.checked}});
      announce(`Created ${o.name} (${o.id}).`);
      name.value = '';
      load();
    });
  });
  await load();
}

function orgColumns(changed) {
  const toggle = (o, key, label) => {
    const box = h('input', {type: 'checkbox', checked: o[key], 'aria-label': `${label} for ${o.name}`});
    box.addEventListener('change', () => busy(box, async () => {
      try {
        await api('PATCH', `/v1/admin/orgs/${encodeURIComponent(o.id)}`, {json: {[key]: box.checked}});
        announce(`${o.name}: ${label} ${box.checked ? 'on' : 'off'}.`);
      } finally {
        changed();
      }
    }));
    return box;
  };
  return [
    {label: 'Name', cell: o => o.name},
    {label: 'Id', cell: o => h('code', {}, o.id)},
    {label: 'Computers', cell: o => toggle(o, 'allow_computer', 'computers')},
    {label: 'Internet', cell: o => toggle(o, 'computer_internet', 'internet')},
    {label: 'Policy', cell: o => o.policy && o.policy.settings && Object.keys(o.policy.settings).length ? h('code', {class: 'wrap'}, JSON.stringify(o.policy.settings)) : 'none'},
    {label: 'Created', cell: o => fmtTime(o.created_at)},
  ];
}
