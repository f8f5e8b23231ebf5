package httpapi

import (
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

// routeMethods are the methods a route may serve (HEAD follows GET).
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// noRoute answers a request no route took: 405 with Allow when the path
// is served for other methods (REST, Kernel Gateway and Responses routes
// share this mux), else 404. The catch-all "/" route otherwise hides the
// mux's own 405.
func (a *API) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range routeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	if len(allow) == 0 {
		writeError(w, r, errdefs.New(errdefs.NotFound, "", "no route for "+r.Method+" "+r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, r, errdefs.New(errdefs.MethodNotAllowed, "", r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.Join(allow, ", ")))
}

// uncleanPath reports a path the mux would redirect to its clean form (a
// "." or ".." segment, or "//"). Such a path is refused instead: a client
// that follows the redirect with its method would send DELETE
// /v1/computers/X/files/.. to DELETE /v1/computers/X.
// p is the escaped path: "files/%2Fworkspace%2Fa" names /workspace/a.
func uncleanPath(p string) bool {
	c := path.Clean(p)
	return p != c && p != c+"/"
}

func refuseUncleanPath(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, errdefs.New(errdefs.InvalidArgument, "", "the path "+strconv.Quote(r.URL.Path)+
		` has a "." or ".." segment or an empty one ("//"); send it without them`))
}
