// DOM helpers. Text from the API or a computer is only ever set as text
// (textContent, attribute values), never parsed as HTML.

// h makes an element: h('a', {href: '#/x', class: 'c', onclick: f}, 'text', child…).
// Attributes starting with "on" are listeners; false/null/undefined are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value' || k === 'checked' || k === 'selected') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

// replace empties el and fills it with children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// table is an accessible table: columns are {label, cell(row) → node|text, num?}.
export function table(caption, columns, rows, empty = 'Nothing yet.') {
  if (!rows.length) return h('p', {class: 'empty'}, empty);
  return h('div', {class: 'scroll'},
    h('table', {},
      h('caption', {class: 'visually-hidden'}, caption),
      h('thead', {}, h('tr', {}, columns.map(c => h('th', {scope: 'col', class: c.num ? 'num' : null}, c.label)))),
      h('tbody', {}, rows.map(r => h('tr', {}, columns.map(c => h('td', {class: c.num ? 'num' : null}, c.cell(r))))))));
}

// field is a labelled form control.
export function field(label, control, hint) {
  const id = control.id || (control.id = 'f' + Math.random().toString(36).slice(2, 9));
  return h('div', {class: 'field'},
    h('label', {for: id}, label), control,
    hint ? h('small', {class: 'hint'}, hint) : null);
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
}

// fmtTime formats Unix seconds or an RFC 3339 string as local time.
export function fmtTime(t) {
  if (t === null || t === undefined || t === 0) return '';
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

// fmtDuration formats seconds as "1h 2m", "3m 4s", "5s".
export function fmtDuration(s) {
  if (s <= 0) return '0s';
  const d = Math.floor(s / 86400), hh = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), ss = Math.floor(s % 60);
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  if (m) return `${m}m ${ss}s`;
  return `${ss}s`;
}

// announce says something in the status region (read by screen readers).
export function announce(text, kind = 'info') {
  const s = document.getElementById('status');
  replace(s, h('p', {class: 'msg ' + kind, role: kind === 'error' ? 'alert' : null}, text));
  clearTimeout(announce.timer);
  if (kind !== 'error') announce.timer = setTimeout(() => s.replaceChildren(), 6000);
}

// errorText is what an error says to the user (API errors carry the request id).
export function errorText(err) {
  return err && err.message ? err.message : String(err);
}

// busy disables a button while fn runs, reporting a failure.
export async function busy(button, fn) {
  button.disabled = true;
  try {
    return await fn();
  } catch (err) {
    announce(errorText(err), 'error');
  } finally {
    button.disabled = false;
  }
}

// refresh re-renders el from data only when data changed, keeping the
// keyboard focus on the control it was on (polled views).
export function refresh(el, data, build) {
  const sig = JSON.stringify(data);
  if (el.dataset.sig === sig) return;
  el.dataset.sig = sig;
  const name = c => c.getAttribute('aria-label') || c.getAttribute('href') || c.textContent;
  const active = document.activeElement;
  const focused = active && active !== el && el.contains(active) ? name(active) : null;
  replace(el, build());
  if (focused === null) return;
  for (const c of el.querySelectorAll('a, button, input, select')) {
    if (name(c) === focused) { c.focus(); break; }
  }
}
