package e2b

import (
	"context"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// Prefix is where the E2B protocols are served: E2B_API_URL and
// E2B_SANDBOX_URL are both http(s)://<cubicle>/e2b.
const Prefix = "/e2b"

// The ports the SDK names in E2b-Sandbox-Port.
const (
	envdPort    = "49983"
	jupyterPort = "49999"
)

// envdVersion is the envd version sandboxes announce: the SDK enables
// features by it (0.4.0: no default user; 0.5.2: closing stdin; 0.5.7:
// octet-stream uploads). 0.6.2 (file metadata) and later are not claimed.
const envdVersion = "0.5.7"

// Server serves the E2B protocols over the computers service.
type Server struct {
	mgr *computer.Manager
	gov *governance.Service
	api *http.ServeMux // the REST API, authenticated by X-API-Key
	box *http.ServeMux // envd and the code interpreter, by X-Access-Token
}

// New returns the E2B server of mgr's computers, authenticating gov's keys.
func New(mgr *computer.Manager, gov *governance.Service) *Server {
	s := &Server{mgr: mgr, gov: gov, api: http.NewServeMux(), box: http.NewServeMux()}
	s.apiRoutes()
	s.sandboxRoutes()
	return s
}

// Routes registers the prefix with handle (a ServeMux's Handle).
func (s *Server) Routes(handle func(pattern string, h http.Handler)) {
	handle(Prefix+"/", http.StripPrefix(Prefix, s))
}

// ServeHTTP serves a request whose path is relative to Prefix: a sandbox
// request when it names a sandbox (E2b-Sandbox-Id), else an API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("E2b-Sandbox-Id") != "" {
			s.box.ServeHTTP(w, r)
			return
		}
		s.api.ServeHTTP(w, r)
	})).ServeHTTP(w, r)
}

// handler is an authenticated handler.
type handler func(w http.ResponseWriter, r *http.Request, p governance.Principal) error

// authenticate checks a key that may use computers.
func (s *Server) authenticate(ctx context.Context, key string) (governance.Principal, error) {
	p, err := s.gov.Authenticate(ctx, strings.TrimSpace(key))
	if err != nil {
		return p, err
	}
	log.Attach(ctx, "org", p.Org.ID, "key", p.Key.ID)
	return p, computer.Allowed(p)
}
