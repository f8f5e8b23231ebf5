// A Python output as DOM: stream text, results (markdown tables, text,
// JSON), PNG images, errors. Everything is text nodes or data: URLs of
// base64 PNGs; nothing the kernel sends is parsed as HTML.
import {h} from './dom.js';

export function renderOutput(o) {
  switch (o.type) {
    case 'stream':
      return h('pre', {class: 'out stream ' + (o.name || '')}, o.text);
    case 'execute_result':
    case 'display_data':
      return h('div', {class: 'out result'}, result(o), omitted(o));
    case 'error':
      return h('pre', {class: 'out error', role: 'alert'}, (o.traceback && o.traceback.length ? o.traceback.join('\n') : `${o.ename}: ${o.evalue}`));
    case 'truncated':
      return h('p', {class: 'out hint'}, o.text || 'Output was truncated.');
    default:
      return h('pre', {class: 'out'}, o.text || JSON.stringify(o));
  }
}

// omitted notes the representations the server left out that were not
// another form of the same text (an SVG next to a PNG, a widget).
function omitted(o) {
  const other = (o.omitted || []).filter(m => !m.startsWith('text/'));
  return other.length ? h('p', {class: 'hint'}, `also had: ${other.join(', ')} (not shown)`) : null;
}

function result(o) {
  if (o.png) {
    return h('img', {class: 'plot', src: 'data:image/png;base64,' + o.png, width: o.width || null, height: o.height || null,
      alt: `Figure ${o.execution_count ? 'from cell ' + o.execution_count : ''}`.trim()});
  }
  if (o.json !== undefined && o.mime === 'application/json') return h('pre', {}, JSON.stringify(o.json, null, 2));
  // text/html arrives converted to markdown by the server (tables as pipe tables).
  if (o.mime === 'text/markdown' || o.mime === 'text/html') return markdown(o.text || '');
  return h('pre', {}, o.text || '');
}

// markdown renders what the kernel's HTML conversion produces: pipe tables
// become tables, everything else stays preformatted text.
export function markdown(text) {
  const lines = text.split('\n');
  const out = [];
  let plain = [];
  const flush = () => { if (plain.length) out.push(h('pre', {}, plain.join('\n'))); plain = []; };
  for (let i = 0; i < lines.length; i++) {
    if (isRow(lines[i]) && i + 1 < lines.length && /^\|(\s*:?-{3,}:?\s*\|)+\s*$/.test(lines[i + 1])) {
      flush();
      const head = cells(lines[i]);
      const body = [];
      for (i += 2; i < lines.length && isRow(lines[i]); i++) body.push(cells(lines[i]));
      i--;
      out.push(h('div', {class: 'scroll'}, h('table', {class: 'frame'},
        h('thead', {}, h('tr', {}, head.map(c => h('th', {scope: 'col'}, c)))),
        h('tbody', {}, body.map(r => h('tr', {}, r.map((c, j) => j === 0 && head[0] === '' ? h('th', {scope: 'row'}, c) : h('td', {}, c))))))));
    } else {
      plain.push(lines[i]);
    }
  }
  flush();
  return h('div', {class: 'markdown'}, out);
}

function isRow(line) {
  return /^\|.*\|\s*$/.test(line);
}

// cells splits a pipe-table row on unescaped bars.
function cells(line) {
  return line.trim().slice(1, -1).split(/(?<!\\)\|/).map(c => c.trim().replace(/\\\|/g, '|'));
}
