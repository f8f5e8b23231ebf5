package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestEdgeMessages: a missing file says so (not "no such computer"), a
// wrong method on a route is 405 with Allow (REST and Responses routes),
// an unknown path stays 404.
func TestEdgeMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	base := "/v1/computers/" + id
	for _, c := range []struct{ method, path string }{
		{"GET", base + "/files/x"},
		{"DELETE", base + "/files/x"},
		{"GET", base + "/files?dir=x"},
	} {
		r := e.do(e.admin, c.method, c.path, nil)
		er := r.wantError(t, http.StatusNotFound, "not_found")
		if er.Error.Message != "no such file: /workspace/x" {
			t.Errorf("%s %s: %s", c.method, c.path, r)
		}
	}
	for _, c := range []struct{ method, path, allow string }{
		{"PATCH", base, "GET, HEAD, DELETE"},
		{"POST", base + "/files/a.txt", "GET, HEAD, PUT, DELETE"},
		{"GET", base + "/exec", "POST"},
		{"PUT", "/v1/responses", "GET, HEAD, POST"},
		{"DELETE", "/v1/computers", "GET, HEAD, POST"},
	} {
		r := e.do(e.admin, c.method, c.path, nil)
		r.wantError(t, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := r.hdr.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
	r := e.do(e.admin, "GET", "/v1/nothing", nil)
	if er := r.wantError(t, http.StatusNotFound, "not_found"); !strings.Contains(er.Error.Message, "no route for GET /v1/nothing") {
		t.Fatalf("unknown path: %s", r)
	}
}
