// Python cells in the computer's Jupyter kernel (POST …/python, streamed
// as server-sent events): text, tables (the kernel's markdown), plots
// (PNG), errors; images can be kept as artifacts.
import {api, download} from './api.js';
import {h, replace, field, fmtBytes, announce, busy, errorText} from './dom.js';
import {renderOutput} from './outputs.js';
import {readEvents} from './sse.js';

const EXAMPLE = `import matplotlib.pyplot as plt
x = np.linspace(0, 2 * np.pi, 200)
plt.plot(x, np.sin(x))
plt.title("sin")
plt.show()
pd.DataFrame({"x": x[:5], "sin": np.sin(x[:5])})`;

export async function render(panel, id) {
  const base = `/v1/computers/${encodeURIComponent(id)}/python`;
  const code = h('textarea', {class: 'code', rows: 10, spellcheck: 'false', autocomplete: 'off', id: 'code'}, EXAMPLE);
  const save = h('input', {type: 'checkbox', id: 'save-images'});
  const timeout = h('input', {type: 'number', min: 1, max: 600, value: 60, id: 'timeout'});
  const run = h('button', {type: 'submit'}, 'Run');
  const interrupt = h('button', {type: 'button', class: 'quiet'}, 'Interrupt');
  const restart = h('button', {type: 'button', class: 'quiet'}, 'Restart kernel');
  const log = h('div', {class: 'cells', 'aria-live': 'polite'});
  const form = h('form', {class: 'card'},
    field('Code (Ctrl+Enter runs it; numpy as np, pandas as pd and inline matplotlib are loaded)', code),
    h('div', {class: 'row'},
      h('label', {class: 'inline'}, save, ' keep images as artifacts'),
      h('label', {class: 'inline', for: 'timeout'}, 'timeout (s) '), timeout,
      run, interrupt, restart));
  replace(panel, form, log);

  const controller = new AbortController();
  code.addEventListener('keydown', e => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });
  form.addEventListener('submit', e => {
    e.preventDefault();
    busy(run, () => runCell(base, {code: code.value, save: save.checked, timeout: Number(timeout.value) || 60}, log, controller.signal));
  });
  interrupt.addEventListener('click', () => busy(interrupt, async () => { await api('POST', base + '/interrupt'); announce('Interrupted.'); }));
  restart.addEventListener('click', () => busy(restart, async () => {
    await api('POST', base + '/restart');
    announce('The kernel restarted: its variables are gone.');
  }));
  return () => controller.abort();
}

async function runCell(base, {code, save, timeout}, log, signal) {
  const outputs = h('div', {class: 'outputs'});
  const status = h('p', {class: 'cell-status'}, 'running…');
  const block = h('article', {class: 'cell', 'aria-busy': 'true'},
    h('pre', {class: 'source'}, code), outputs, status);
  log.append(block);
  block.scrollIntoView({block: 'nearest'});
  try {
    const r = await api('POST', base, {
      json: {cells: [{code}], timeout_seconds: timeout, save_images: save},
      headers: {Accept: 'text/event-stream'}, raw: true, signal,
    });
    for await (const ev of readEvents(r.body)) {
      if (ev.event === 'output') outputs.append(renderOutput(ev.data.output));
      else if (ev.event === 'result') finish(ev.data, status, outputs);
      else if (ev.event === 'error') status.replaceChildren(h('span', {class: 'msg error'}, errorText(ev.data.error || ev.data)));
    }
  } catch (err) {
    if (err.name === 'AbortError') return;
    replace(status, h('span', {class: 'msg error'}, errorText(err)));
  } finally {
    block.removeAttribute('aria-busy');
  }
}

// finish shows the call's outcome and the artifacts its images became.
function finish(result, status, outputs) {
  const cell = result.cells && result.cells[0];
  const parts = [h('span', {class: 'badge ' + (result.status === 'ok' ? 'ready' : 'failed')}, result.status),
    ` ${cell && cell.execution_count ? `[${cell.execution_count}] ` : ''}${result.duration_ms} ms`];
  if (result.message) parts.push(' — ', result.message);
  if (result.kernel_restarted) parts.push(' (the kernel had restarted: earlier state was lost)');
  replace(status, parts);
  const arts = (cell && cell.artifacts) || [];
  if (arts.length) {
    outputs.append(h('ul', {class: 'artifacts'}, arts.map(a => {
      const b = h('button', {type: 'button', class: 'link'}, `Download ${a.filename}`);
      b.addEventListener('click', () => busy(b, () => download(`/v1/artifacts/${encodeURIComponent(a.id)}/content`, a.filename)));
      return h('li', {}, b, ` (${fmtBytes(a.bytes)}, artifact ${a.id})`);
    })));
  }
}
