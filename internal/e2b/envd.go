package e2b

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// The sandbox's routes: envd's (port 49983) and the code interpreter's
// (port 49999), paths relative to Prefix.
func (s *Server) sandboxRoutes() {
	envd := func(pattern string, h boxHandler) { s.box.Handle(pattern, s.boxAuth(envdPort, h)) }
	envd("GET /health", func(w http.ResponseWriter, r *http.Request, b *box) { w.WriteHeader(http.StatusNoContent) })
	envd("GET /files", s.download)
	envd("POST /files", s.upload)
	s.processRoutes(envd)
	s.filesystemRoutes(envd)
	s.box.Handle("POST /execute", s.boxAuth(jupyterPort, s.execute))
	s.box.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeBoxError(w, r, errdefs.New(errdefs.NotFound, "", "no such route in a Cubicle sandbox: "+r.Method+" "+r.URL.Path+" (docs/e2b.md lists what is supported)"))
	})
}

// isRPC reports whether a sandbox request is a Connect call.
func isRPC(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/")
}

// writeBoxError answers a sandbox request's error: a Connect error for a
// Connect call, else envd's {code, message}.
func writeBoxError(w http.ResponseWriter, r *http.Request, err error) {
	if !isRPC(r) {
		writeError(w, r, err)
		return
	}
	re := toRPCError(r.Context(), err)
	status, _ := errhttp.Of(err)
	if s, ok := connectStatus[re.Code]; ok && status != http.StatusBadGateway {
		status = s
	}
	writeJSON(w, status, re)
}

// boxAuth authenticates a sandbox request by its access token (the
// Cubicle key create or connect answered as envdAccessToken), checks that
// it is for port and that its sandbox runs, then serves it. A sandbox
// that does not run (unknown, gone or paused) is answered 502, as E2B's
// proxy does: the SDK reads it as the sandbox's end.
func (s *Server) boxAuth(port string, h boxHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := &box{id: r.Header.Get("E2b-Sandbox-Id")}
		if got := r.Header.Get("E2b-Sandbox-Port"); got != port {
			writeBoxError(w, r, errdefs.New(errdefs.BadGateway, "", fmt.Sprintf(
				"%s %s is served on port %s, not %q: Cubicle serves envd (49983) and the code interpreter (49999) only", r.Method, r.URL.Path, port, got)))
			return
		}
		key := r.Header.Get("X-Access-Token")
		if key == "" {
			key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		p, err := s.authenticate(r.Context(), key)
		if err != nil {
			writeBoxError(w, r, err)
			return
		}
		b.p = p
		log.Attach(r.Context(), "computer", b.id)
		if err := s.mgr.CheckRunning(r.Context(), p, b.id); err != nil {
			if errors.Is(err, computer.ErrNotFound) || errors.Is(err, computer.ErrGone) || errors.Is(err, computer.ErrPaused) {
				err = errdefs.New(errdefs.BadGateway, "", fmt.Sprintf("the sandbox %s is not running: %v", b.id, err))
			}
			writeBoxError(w, r, err)
			return
		}
		h(w, r, b)
	})
}

// box is a sandbox request's target: the computer and the principal the
// access token authenticated.
type box struct {
	id string
	p  governance.Principal
}

// boxHandler serves a sandbox request.
type boxHandler func(w http.ResponseWriter, r *http.Request, b *box)
