// A terminal into the computer: xterm.js over GET /v1/computers/{id}/pty
// (binary messages are the terminal's bytes both ways; text messages are
// JSON control: resize from here, exit or error from the server).
import {ptyURL} from './api.js';
import {h, replace} from './dom.js';

export async function render(panel, id) {
  const [{Terminal}, {FitAddon}] = await Promise.all([
    import('../vendor/xterm/xterm.mjs'),
    import('../vendor/xterm/addon-fit.mjs'),
  ]);
  const state = h('span', {class: 'term-state', role: 'status'}, 'connecting…');
  const again = h('button', {type: 'button', class: 'quiet', hidden: true}, 'New session');
  const reader = h('input', {type: 'checkbox'});
  const screen = h('div', {class: 'terminal', id: 'terminal'});
  replace(panel,
    h('div', {class: 'row'},
      h('p', {class: 'hint'}, 'A login shell as the computer’s user. Closing the page or the session hangs it up.'),
      h('label', {class: 'inline'}, reader, ' screen reader mode'),
      state, again),
    screen);

  const term = new Terminal({
    cursorBlink: true, scrollback: 5000, fontSize: 14,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
    theme: {background: '#000000', foreground: '#e6e6e6'},
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(screen);
  fit.fit();

  const encoder = new TextEncoder();
  let ws = null;
  function connect() {
    again.hidden = true;
    state.textContent = 'connecting…';
    term.reset();
    const sock = new WebSocket(ptyURL(id, term.cols, term.rows));
    sock.binaryType = 'arraybuffer';
    let ended = false;
    sock.addEventListener('open', () => { state.textContent = 'connected'; term.focus(); });
    sock.addEventListener('message', e => {
      if (typeof e.data !== 'string') return term.write(new Uint8Array(e.data));
      let m;
      try { m = JSON.parse(e.data); } catch { return; }
      if (m.type === 'exit') {
        ended = true;
        const how = m.signal ? `signal ${m.signal}` : `status ${m.exit_code}`;
        term.write(`\r\n\x1b[2m[the shell exited with ${how}]\x1b[0m\r\n`);
        state.textContent = 'exited';
      } else if (m.type === 'error') {
        ended = true;
        term.write(`\r\n\x1b[31m[${m.message}]\x1b[0m\r\n`);
        state.textContent = 'ended';
      }
    });
    sock.addEventListener('close', e => {
      if (ws !== sock) return; // replaced or the view was left
      if (!ended) state.textContent = e.code === 1006 ? 'could not connect (is the computer running?)' : `closed (${e.code})`;
      again.hidden = false;
    });
    ws = sock;
  }
  const send = data => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(data); };
  term.onData(d => send(encoder.encode(d)));
  term.onBinary(d => send(Uint8Array.from(d, c => c.charCodeAt(0) & 0xff)));
  term.onResize(({cols, rows}) => send(JSON.stringify({type: 'resize', cols, rows})));
  const observer = new ResizeObserver(() => { try { fit.fit(); } catch { /* hidden */ } });
  observer.observe(screen);
  again.addEventListener('click', connect);
  reader.addEventListener('change', () => { term.options.screenReaderMode = reader.checked; });
  connect();

  return () => {
    observer.disconnect();
    const sock = ws;
    ws = null;
    if (sock) sock.close(1000, 'left the page');
    term.dispose();
  };
}
