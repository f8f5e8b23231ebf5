package jupyter

import (
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// handler is an authenticated handler of a principal that may use computers.
type handler func(w http.ResponseWriter, r *http.Request, p governance.Principal) error

// token is the Cubicle key of a request: "Authorization: token <key>"
// (what Jupyter clients send) or "Bearer <key>"; a WebSocket upgrade may
// carry it as ?token= instead (browsers cannot set headers there).
func token(r *http.Request) string {
	h := r.Header.Get("Authorization")
	for _, scheme := range []string{"token ", "Token ", "Bearer ", "bearer "} {
		if t, ok := strings.CutPrefix(h, scheme); ok {
			return strings.TrimSpace(t)
		}
	}
	if h == "" && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return r.URL.Query().Get("token")
	}
	return ""
}

// auth answers 401 for a missing or wrong key and 403 for a key that may
// not use computers, before h runs. It gives the request its id and
// logger (internal/log; the REST listener's middleware already has when
// the API is mounted there) and adds the key and its organisation.
func (s *Server) auth(h handler) http.Handler {
	return log.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.gov.Authenticate(r.Context(), token(r))
		if err == nil {
			log.Attach(r.Context(), "org", p.Org.ID, "key", p.Key.ID)
			err = computer.Allowed(p)
		}
		if err == nil {
			err = h(w, r, p)
		}
		if err != nil {
			writeError(w, r, err)
		}
	}))
}
