// The REST API's client. The key lives in this tab's sessionStorage (never
// a cookie: no request carries it unless this code adds it) and travels as
// a bearer header; the terminal's WebSocket carries it as ?token=.

const KEY = 'cubicle.key';

export const session = {
  get key() { return sessionStorage.getItem(KEY) || ''; },
  set(key) { sessionStorage.setItem(KEY, key); },
  clear() { sessionStorage.removeItem(KEY); },
};

// APIError is an error answer: {error: {code, message, param, request_id}}.
export class APIError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super((e.message || `HTTP ${status}`) + (e.request_id ? ` (request ${e.request_id})` : ''));
    this.status = status;
    this.code = e.code || '';
    this.param = e.param || null;
  }
}

async function errorOf(r) {
  let body = null;
  try { body = await r.json(); } catch { /* not JSON */ }
  return new APIError(r.status, body);
}

// api calls the REST API. opts: json (a body to send as JSON), body (raw),
// headers, raw (answer the Response), signal.
export async function api(method, path, opts = {}) {
  const headers = {Authorization: 'Bearer ' + session.key, ...(opts.headers || {})};
  let body = opts.body;
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  const r = await fetch(path, {method, headers, body, signal: opts.signal, cache: 'no-store', credentials: 'omit'});
  if (r.status === 401) window.dispatchEvent(new CustomEvent('cubicle:unauthorized'));
  if (!r.ok) throw await errorOf(r);
  if (opts.raw) return r;
  if (r.status === 204) return null;
  return r.json();
}

// qs builds a query string from the set values of params.
export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}

// download fetches path with the key and saves it as filename.
export async function download(path, filename) {
  const r = await api('GET', path, {raw: true});
  const url = URL.createObjectURL(await r.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// ptyURL is the terminal WebSocket's address for a computer.
export function ptyURL(id, cols, rows) {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${location.host}/v1/computers/${encodeURIComponent(id)}/pty` + qs({token: session.key, cols, rows});
}
