// The console's entry: the key login, the hash router and the navigation.
import './csp.js';
import {api, session} from './api.js';
import {h, replace, field, announce, errorText} from './dom.js';

// routes: a hash path's pattern and the module that renders it. A view is
// render(main, params) → cleanup function (or nothing).
const routes = [
  [/^\/computers$/, 'computers', () => import('./computers.js')],
  [/^\/computers\/([\w-]+)(?:\/(\w+))?$/, 'computers', () => import('./computer.js')],
  [/^\/artifacts$/, 'artifacts', () => import('./artifacts.js')],
  [/^\/activity$/, 'activity', () => import('./activity.js')],
  [/^\/egress$/, 'egress', () => import('./egress.js')],
  [/^\/admin\/keys$/, 'keys', () => import('./admin.js').then(m => ({render: m.renderKeys}))],
  [/^\/admin\/orgs$/, 'orgs', () => import('./admin.js').then(m => ({render: m.renderOrgs}))],
  [/^\/admin\/scripts$/, 'scripts', () => import('./scripts.js')],
];

const REVOKED = 'The server no longer accepts the key (revoked?). Sign in again.';
const main = document.getElementById('main');
const nav = document.getElementById('nav');
const logout = document.getElementById('logout');
let cleanup = null;
let generation = 0;

function stopView() {
  if (typeof cleanup === 'function') cleanup();
  cleanup = null;
}

async function route() {
  if (!session.key) return showLogin();
  const path = location.hash.replace(/^#/, '') || '/computers';
  const hit = routes.find(([re]) => re.test(path));
  if (!hit) { location.hash = '#/computers'; return; }
  const [re, section, load] = hit;
  const params = path.match(re).slice(1);
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.section === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  stopView();
  const gen = ++generation;
  try {
    const view = await load();
    if (gen !== generation) return; // another route started meanwhile
    main.replaceChildren();
    const stop = await view.render(main, params);
    if (gen !== generation) { // left while it rendered
      if (typeof stop === 'function') stop();
      return;
    }
    cleanup = stop;
    main.querySelector('h1')?.focus();
  } catch (err) {
    replace(main, h('h1', {tabindex: -1}, 'Something went wrong'), h('p', {class: 'msg error'}, errorText(err)));
  }
}

// whoami checks the key (any call needs it) and whether it is an admin's.
async function whoami() {
  await api('GET', '/v1/usage?limit=1'); // any valid key may read its usage
  try {
    await api('GET', '/v1/admin/orgs');
    return true;
  } catch (err) {
    if (err.status === 403) return false;
    throw err;
  }
}

function showSignedIn(admin) {
  nav.hidden = false;
  logout.hidden = false;
  for (const a of nav.querySelectorAll('[data-admin]')) a.hidden = !admin;
}

function showLogin(message) {
  stopView();
  nav.hidden = true;
  logout.hidden = true;
  const key = h('input', {type: 'password', name: 'key', autocomplete: 'off', required: true, spellcheck: 'false'});
  const submit = h('button', {type: 'submit'}, 'Sign in');
  const form = h('form', {class: 'card login', 'aria-labelledby': 'login-title'},
    h('h1', {id: 'login-title', tabindex: -1}, 'Sign in to Cubicle'),
    h('p', {}, 'Paste a Cubicle API key. It is kept in this tab only (sessionStorage) and sent to this server as a bearer header.'),
    field('API key', key),
    message ? h('p', {class: 'msg error', role: 'alert'}, message) : null,
    submit);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    submit.disabled = true;
    session.set(key.value.trim());
    try {
      showSignedIn(await whoami());
      announce('Signed in.');
      if (!location.hash || location.hash === '#/') location.hash = '#/computers';
      else route();
    } catch (err) {
      session.clear();
      showLogin(err.status === 401 ? 'That key was refused: it is unknown or revoked.' : errorText(err));
    }
  });
  replace(main, form);
  key.focus();
}

logout.addEventListener('click', () => {
  session.clear();
  announce('Signed out.');
  showLogin();
});

window.addEventListener('cubicle:unauthorized', () => {
  if (nav.hidden) return; // not signed in yet: the sign-in says why
  session.clear();
  showLogin(REVOKED);
});
window.addEventListener('hashchange', route);

(async () => {
  if (!session.key) return showLogin();
  try {
    showSignedIn(await whoami());
  } catch (err) {
    if (err.status === 401) {
      session.clear();
      return showLogin(REVOKED);
    }
    announce(errorText(err), 'error');
  }
  route();
})();
