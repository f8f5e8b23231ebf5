// readEvents yields the server-sent events of a fetch body: {event, data}
// with data parsed as JSON (comments and events without data are skipped).
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const ev = parse(buf.slice(0, end));
      buf = buf.slice(end + 2);
      if (ev) yield ev;
    }
  }
}

function parse(block) {
  let event = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const name = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (name === 'event') event = value;
    else if (name === 'data') data.push(value);
  }
  if (!data.length) return null;
  try {
    return {event, data: JSON.parse(data.join('\n'))};
  } catch {
    return {event, data: data.join('\n')};
  }
}
