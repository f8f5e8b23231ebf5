// The organisation's scripts (admin keys): its own programs offered to
// models as the tools script__<name> (docs/api.md, Scripts).
import {api, qs} from './api.js';
import {h, replace, table, field, fmtTime, announce, busy} from './dom.js';
import {pager} from './pager.js';

const SCHEMA = '{"type": "object", "properties": {}, "additionalProperties": false}';

export async function render(main) {
  const name = h('input', {name: 'name', required: true, maxlength: 56, autocomplete: 'off'});
  const description = h('textarea', {name: 'description', rows: 2, required: true});
  const schema = h('textarea', {name: 'input_schema', rows: 4, spellcheck: 'false', class: 'code'}, SCHEMA);
  const source = h('textarea', {name: 'source', rows: 8, spellcheck: 'false', class: 'code', required: true});
  const interpreter = h('input', {name: 'interpreter', value: '/bin/sh', spellcheck: 'false', class: 'code'});
  const timeout = h('input', {name: 'timeout_seconds', type: 'number', min: 1, max: 3600});
  const submit = h('button', {type: 'submit'}, 'Create script');
  const cancel = h('button', {type: 'button', class: 'quiet', hidden: true}, 'Cancel');
  const title = h('h2', {}, 'New script');
  const box = h('div');
  const form = h('form', {class: 'card'}, title,
    h('div', {class: 'fields'}, field('Name', name, 'The tool is script__<name>.'), field('Interpreter', interpreter, 'Absolute path and options, space-separated.'),
      field('Time limit (s)', timeout, 'Empty: the computer\'s exec limit.')),
    field('Description', description, 'What the model reads about it.'),
    field('Input schema (JSON Schema)', schema, 'The arguments, given to the program as one line of JSON on its standard input.'),
    field('Source', source),
    submit, cancel);
  replace(main, h('h1', {tabindex: -1}, 'Scripts'), form,
    h('section', {'aria-labelledby': 'scripts-title'}, h('h2', {id: 'scripts-title'}, 'Scripts'), box));

  let editing = '';
  function reset() {
    editing = '';
    form.reset();
    schema.value = SCHEMA;
    interpreter.value = '/bin/sh';
    name.disabled = false;
    title.textContent = 'New script';
    submit.textContent = 'Create script';
    cancel.hidden = true;
  }
  async function edit(n) {
    const s = await api('GET', `/v1/scripts/${encodeURIComponent(n)}`);
    editing = s.name;
    name.value = s.name;
    name.disabled = true;
    description.value = s.description;
    schema.value = JSON.stringify(s.input_schema, null, 2);
    source.value = s.source;
    interpreter.value = s.interpreter.join(' ');
    timeout.value = s.timeout_seconds || '';
    title.textContent = `Edit ${s.tool}`;
    submit.textContent = 'Save script';
    cancel.hidden = false;
    description.focus();
  }
  const load = () => pager(box, after => api('GET', '/v1/scripts' + qs({limit: 100, after})),
    rows => table('Scripts', columns(edit, load), rows, 'No scripts yet.'));
  cancel.addEventListener('click', reset);
  form.addEventListener('submit', e => {
    e.preventDefault();
    busy(submit, async () => {
      let input_schema;
      try { input_schema = JSON.parse(schema.value); } catch { throw new Error('The input schema is not valid JSON.'); }
      const body = {name: editing || name.value.trim(), description: description.value, input_schema, source: source.value,
        interpreter: interpreter.value.trim().split(/\s+/), timeout_seconds: timeout.value ? Number(timeout.value) : null};
      const s = editing
        ? await api('PUT', `/v1/scripts/${encodeURIComponent(editing)}`, {json: body})
        : await api('POST', '/v1/scripts', {json: body});
      announce(`${editing ? 'Saved' : 'Created'} ${s.tool} (version ${s.version}).`);
      reset();
      load();
    });
  });
  await load();
}

function columns(edit, changed) {
  return [
    {label: 'Tool', cell: s => h('code', {}, s.tool)},
    {label: 'Description', cell: s => s.description},
    {label: 'Interpreter', cell: s => h('code', {}, s.interpreter.join(' '))},
    {label: 'Version', num: true, cell: s => String(s.version)},
    {label: 'Updated', cell: s => fmtTime(s.updated_at)},
    {label: '', cell: s => {
      const e = h('button', {type: 'button', class: 'quiet', 'aria-label': `Edit ${s.name}`}, 'Edit');
      e.addEventListener('click', () => busy(e, () => edit(s.name)));
      const d = h('button', {type: 'button', class: 'danger', 'aria-label': `Delete ${s.name}`}, 'Delete');
      d.addEventListener('click', () => busy(d, async () => {
        if (!confirm(`Delete the script ${s.name}? Models can no longer call ${s.tool}.`)) return;
        await api('DELETE', `/v1/scripts/${encodeURIComponent(s.name)}`);
        announce(`Deleted ${s.tool}.`);
        changed();
      }));
      return h('span', {class: 'actions'}, e, d);
    }},
  ];
}
