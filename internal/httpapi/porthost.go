package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

// Preview hosts: with Options.PreviewDomain set (server.preview_domain),
// a request whose Host is <port>-<id>.<domain> goes to that port of that
// computer, whatever its path, as the path proxy's
// /v1/computers/{id}/ports/{port}/… does (the same key or preview link
// rules, the link's cookie scoped to that host): an app is then served at
// its own root, so absolute links work. Nothing else is served on such a
// host, the API neither. The computer's id may be written with "-" for
// its "_" (cmp-1a2b…), as DNS names have no "_".

// previewTarget is the computer and port a request's Host names, when it
// is a preview host.
func (a *API) previewTarget(r *http.Request) (portTarget, bool) {
	if a.previewDomain == "" {
		return portTarget{}, false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+a.previewDomain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return portTarget{}, false
	}
	port, id, _ := strings.Cut(label, "-")
	if rest, ok := strings.CutPrefix(id, "cmp-"); ok {
		id = "cmp_" + rest
	}
	n, err := strconv.Atoi(port)
	if err != nil || computer.ValidPort(n) != nil || id == "" {
		n = 0 // a preview host all the same: answered 404, never the API
	}
	return portTarget{id: id, port: n}, true
}

// servePreview answers a request on a preview host.
func (a *API) servePreview(w http.ResponseWriter, r *http.Request, t portTarget) {
	if t.port == 0 {
		writeError(w, r, errdefs.New(errdefs.NotFound, "", "this preview host names no port of a computer: use <port>-<computer id>."+a.previewDomain))
		return
	}
	a.proxyTo(w, r, t)
}

// previewHost is the preview host of a computer's port for a request to
// host (its port kept), or "" without a preview domain.
func (a *API) previewHost(host, id string, port int) string {
	if a.previewDomain == "" {
		return ""
	}
	h := strconv.Itoa(port) + "-" + strings.Replace(id, "_", "-", 1) + "." + a.previewDomain
	if _, p, err := net.SplitHostPort(host); err == nil && p != "" {
		h = net.JoinHostPort(h, p)
	}
	return h
}
