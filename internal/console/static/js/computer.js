// One computer: its state (polled) and a tab each for the terminal, the
// files, Python and the egress log.
import {api} from './api.js';
import {h, replace, refresh as update, fmtTime} from './dom.js';
import {limitsText, lifetimeCell, tick, computerActions} from './computerinfo.js';

const TABS = [
  ['terminal', 'Terminal', () => import('./terminal.js')],
  ['files', 'Files', () => import('./files.js')],
  ['python', 'Python', () => import('./python.js')],
  ['egress', 'Egress', () => import('./egress.js').then(m => ({render: m.renderComputer}))],
];
const POLL_MS = 5000;

export async function render(main, [id, tab = 'terminal']) {
  const current = TABS.find(t => t[0] === tab) || TABS[0];
  const summary = h('div', {class: 'summary'});
  const panel = h('section', {class: 'panel', id: 'panel', 'aria-label': current[1]});
  replace(main,
    h('p', {class: 'crumbs'}, h('a', {href: '#/computers'}, 'Computers'), ' / ', id),
    h('h1', {tabindex: -1}, id),
    summary,
    h('nav', {class: 'tabs', 'aria-label': 'Computer'},
      TABS.map(([name, label]) => h('a', {href: `#/computers/${id}/${name}`, 'aria-current': name === current[0] ? 'page' : null}, label))),
    panel);

  let stopped = false;
  let timer = null;
  async function refresh() {
    clearTimeout(timer);
    try {
      const c = await api('GET', `/v1/computers/${encodeURIComponent(id)}`);
      if (stopped) return;
      update(summary, c, () => [h('dl', {class: 'facts'},
        fact('Status', h('span', {class: 'badge ' + c.status}, c.status), c.failure ? ` — ${c.failure}` : null),
        c.name ? fact('Name', c.name) : null,
        fact('Template', c.template),
        fact('Limits', limitsText(c.limits)),
        fact('Lifetime', lifetimeCell(c)),
        fact('Created', fmtTime(c.created_at)),
        c.last_active_at ? fact('Last active', fmtTime(c.last_active_at)) : null),
      computerActions(c, refresh)]);
    } catch (err) {
      if (!stopped) update(summary, err.message, () => h('p', {class: 'msg error'}, err.message));
    }
    if (!stopped) timer = setTimeout(refresh, POLL_MS);
  }
  const clock = setInterval(() => tick(summary), 1000);
  await refresh();
  const view = await current[2]();
  const stopPanel = await view.render(panel, id);
  return () => {
    stopped = true;
    clearTimeout(timer);
    clearInterval(clock);
    if (typeof stopPanel === 'function') stopPanel();
  };
}

function fact(term, ...desc) {
  return h('div', {}, h('dt', {}, term), h('dd', {}, desc));
}
