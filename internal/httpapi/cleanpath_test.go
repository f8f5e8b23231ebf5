package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestUncleanPathsRefused: a path with a "." or ".." segment or "//" is a
// 400, before authentication and routing; Go's mux redirected it to its
// clean form (307 to /v1/computers/X for DELETE
// /v1/computers/X/files/..), which a client following redirects with
// their method turned into a delete of the computer.
func TestUncleanPathsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	for _, p := range []string{"/v1/computers/" + id + "/files/..", "/v1/computers/" + id + "/files/./x",
		"/v1/computers//" + id, "/v1/../v1/computers/" + id} {
		// Raw, as the client's own library might not clean it.
		res := e.raw(fmt.Sprintf("DELETE %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", p, e.admin))
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
			t.Errorf("DELETE %s: %d (Location %q), want 400", p, res.StatusCode, res.Header.Get("Location"))
		}
	}
	if r := e.do(e.admin, "GET", "/v1/computers/"+id, nil); r.code != http.StatusOK {
		t.Fatalf("the computer after the refused deletes: %s", r)
	}
	// A trailing slash is not unclean (the files API answers it itself).
	if r := e.do(e.admin, "GET", "/v1/computers/"+id+"/files/", nil); strings.Contains(string(r.body), "segment") {
		t.Fatalf("a trailing slash: %s", r)
	}
}
