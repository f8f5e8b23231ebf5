package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// The request's logger (internal/log) gets its id from ServeHTTP and the
// rest here, as the mux and authentication resolve it.

// attachRoute adds the route pattern r will be served by (never the path:
// paths carry file names, which never go to logs).
func (a *API) attachRoute(r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern != "" {
		log.Attach(r.Context(), "route", pattern)
	}
}

// attachComputer adds the computer id of a computer's route.
func attachComputer(r *http.Request) {
	if strings.Contains(r.Pattern, " /v1/computers/{id}") {
		log.Attach(r.Context(), "computer", r.PathValue("id"))
	}
}

// attachPrincipal adds the authenticated key and its organisation.
func attachPrincipal(ctx context.Context, p governance.Principal, err error) {
	if err == nil {
		log.Attach(ctx, "org", p.Org.ID, "key", p.Key.ID)
	}
}
