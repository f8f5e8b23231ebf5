// Package console is Cubicle's web console: a small single-page
// application (vanilla JavaScript modules, no framework, no build step of
// its own) embedded in the binary with go:embed and served on the REST
// API's listener as an httpapi Mount: GET / is the page, GET /console/…
// its files. It registers nothing else, so the API's routes, /openapi.json,
// /mcp, the Kernel Gateway API and the health endpoints are never shadowed,
// and every other path still gets the API's own 404 and 405.
//
// The console holds no credentials on the server: the user pastes a
// Cubicle API key, which the page keeps in the tab's sessionStorage and
// sends as a bearer header to the same REST API every client uses (the
// terminal's WebSocket carries it as ?token=, which /pty accepts). No
// cookie is involved, so there is nothing for a cross-site request to ride
// on. Every page is served with a strict Content-Security-Policy: scripts
// only from the console's own files (no inline script, no eval), styles
// from its own files plus <style> elements carrying the per-page nonce (the
// terminal library, xterm.js, writes its theme as <style> elements; the
// page stamps the nonce on them), images from itself and data: URLs (plots),
// connections to the same origin only, no framing (docs/console.md).
//
// The third-party files (static/vendor) are copied byte for byte from npm
// packages pinned by assets/package-lock.json (scripts/console-assets.sh);
// static/vendor/MANIFEST records their sources and digests, and
// TestVendoredAssets checks both against the lockfile's install.
//
// It may import internal/errdefs and internal/errdefs/errhttp (the API's
// error shape for a missing file).
package console
