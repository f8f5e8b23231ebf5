package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestTruncatedBodiesStoreNothing: a body that ends before its end (a
// multipart body without its closing boundary, an upload whose client
// closes before its Content-Length) is a 400 and stores nothing: it was
// a 500 on POST /v1/files, and a truncated file committed as whole on
// the container and computer file uploads.
func TestTruncatedBodiesStoreNothing(t *testing.T) {
	t.Parallel()
	e, _ := newFilesEnv(t, nil)
	id := e.create(e.admin, nil).ID
	const cut = "--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nxxxx"
	mp := map[string]string{"Content-Type": "multipart/form-data; boundary=zz"}

	e.doCtx(t.Context(), e.admin, "POST", "/v1/files", cut, mp).wantError(t, http.StatusBadRequest, "invalid_request")
	var list struct{ Data []fileObj }
	if r := e.do(e.admin, "GET", "/v1/files", nil); r.code != http.StatusOK {
		t.Fatalf("list files: %s", r)
	} else if r.json(t, &list); len(list.Data) != 0 {
		t.Fatalf("a truncated upload was stored: %s", r)
	}

	e.doCtx(t.Context(), e.admin, "POST", "/v1/containers/"+id+"/files", cut, mp).wantError(t, http.StatusBadRequest, "invalid_request")
	if r := e.do(e.admin, "GET", "/v1/computers/"+id+"/files/a?stat=true", nil); r.code != http.StatusNotFound {
		t.Fatalf("a truncated container upload was stored: %s", r)
	}

	// A PUT whose client stops after 10 of its 100 bytes.
	res := e.raw(fmt.Sprintf("PUT /v1/computers/%s/files/put.txt HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n0123456789", id, e.admin))
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a PUT cut after 10 of 100 bytes: %d, want 400", res.StatusCode)
	}
	if r := e.do(e.admin, "GET", "/v1/computers/"+id+"/files/put.txt?stat=true", nil); r.code != http.StatusNotFound {
		t.Fatalf("a truncated PUT was stored: %s", r)
	}
}

// TestFilePathsAreNever5xx: a path of a megabyte on mkdir and move (the
// bodies take 16 MiB) is a 400 naming the field; it was a 500, the
// request being too large for the computer's control channel.
func TestFilePathsAreNever5xx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	long := strings.Repeat("a", 1<<20)
	for _, c := range []struct {
		route string
		body  map[string]any
		param string
	}{
		{"mkdir", map[string]any{"path": long}, "path"},
		{"mkdir", map[string]any{"path": "a\x00b"}, "path"},
		{"move", map[string]any{"from": long, "to": "b"}, "from"},
		{"move", map[string]any{"from": "a", "to": long}, "to"},
	} {
		r := e.do(e.admin, "POST", "/v1/computers/"+id+"/files/"+c.route, c.body)
		er := r.wantError(t, http.StatusBadRequest, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != c.param || !strings.Contains(er.Error.Message, "path") {
			t.Errorf("%s: param %v, want %q: %.200s", c.route, er.Error.Param, c.param, r.body)
		}
	}
}

// raw sends request, as written, on a connection of its own, ends its
// side of the connection, and reads the answer's status and headers: for
// what an HTTP client would not send (a lying Content-Length, an unclean
// path).
func (e *env) raw(request string) *http.Response {
	e.t.Helper()
	u, _ := url.Parse(e.url)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(request))
	c.(*net.TCPConn).CloseWrite()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res
}
