// The page's Content-Security-Policy allows <style> elements only with
// this page's nonce (the server makes one per page and puts it on the
// stylesheet's <link>). xterm.js writes its theme and sizes as <style>
// elements, so every <style> this page's own scripts create is stamped
// with the nonce before it is inserted; markup injected as HTML would not
// be, and stays blocked.
const nonce = document.querySelector('link[nonce]')?.nonce || '';
if (nonce) {
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function (tag, options) {
    const el = create.call(this, tag, options);
    if (String(tag).toLowerCase() === 'style') el.setAttribute('nonce', nonce);
    return el;
  };
}
