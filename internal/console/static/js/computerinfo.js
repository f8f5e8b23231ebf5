// What the list and a computer's page both show of a computer, and its actions.
import {api} from './api.js';
import {h, fmtDuration, announce, busy} from './dom.js';

const ALIVE = new Set(['ready', 'starting']);

export function limitsText(l) {
  if (!l) return '';
  const parts = [`${l.memory_mb} MiB`, `${l.cpus} CPU`, `${l.disk_mb} MiB disk`, `${l.pids} pids`];
  if (l.idle_timeout_seconds) parts.push(`idle ${fmtDuration(l.idle_timeout_seconds)}`);
  if (l.network_policy && l.network_policy.type !== 'disabled') parts.push('internet');
  return parts.join(' · ');
}

// lifetimeCell counts down to expires_at (tick updates it every second).
export function lifetimeCell(c) {
  if (!ALIVE.has(c.status)) return c.stopped_at ? 'stopped' : c.status;
  return h('span', {'data-expires': c.expires_at, title: `lifetime ${fmtDuration(c.limits.lifetime_seconds)}`}, remaining(c.expires_at));
}

function remaining(expiresAt) {
  const s = expiresAt - Date.now() / 1000;
  return s > 0 ? `ends in ${fmtDuration(s)}` : 'ending';
}

export function tick(root) {
  for (const el of root.querySelectorAll('[data-expires]')) el.textContent = remaining(Number(el.dataset.expires));
}

// computerActions are the buttons of a computer; changed runs after one acted.
export function computerActions(c, changed) {
  const act = (label, fn, cls) => {
    const b = h('button', {type: 'button', class: cls || 'quiet', 'aria-label': `${label} ${c.name || c.id}`}, label);
    b.addEventListener('click', () => busy(b, async () => { await fn(); changed(); }));
    return b;
  };
  const base = `/v1/computers/${encodeURIComponent(c.id)}`;
  const out = [];
  if (ALIVE.has(c.status)) {
    out.push(act('Extend 30 min', async () => {
      await api('POST', base + '/lifetime', {json: {lifetime_seconds: Math.max(1800, Math.round(c.expires_at - Date.now() / 1000) + 1800)}});
      announce(`Extended ${c.id}.`);
    }));
    out.push(act('Pause', async () => { await api('POST', base + '/pause'); announce(`Paused ${c.id}.`); }));
  }
  if (c.status === 'paused') out.push(act('Resume', async () => { await api('POST', base + '/resume'); announce(`Resumed ${c.id}.`); }));
  if (ALIVE.has(c.status) || c.status === 'paused') {
    out.push(act('Delete', async () => {
      if (!confirm(`Delete ${c.id}? Its processes and files are gone for good.`)) return;
      await api('DELETE', base);
      announce(`Deleted ${c.id}.`);
    }, 'danger'));
  }
  return h('div', {class: 'actions'}, out);
}
