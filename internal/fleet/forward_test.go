package fleet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type oneOwner struct{ in store.Instance }

func (o oneOwner) Owner(context.Context, string) (store.Instance, error) { return o.in, nil }
func (oneOwner) OwnerByMetadata(context.Context, string, string) (string, store.Instance, error) {
	return "", store.Instance{}, store.ErrNotFound
}
func (oneOwner) OwnerOfResponse(context.Context, string) (store.Instance, error) {
	return store.Instance{}, store.ErrNotFound
}
func (oneOwner) OwnerOfKept(context.Context, string, string) (string, store.Instance, error) {
	return "", store.Instance{}, store.ErrNotFound
}

// lateEOF is a request body that gives its bytes at once and looks for
// its end 200 ms later: the transport's last read of a body, on a busy
// machine.
type lateEOF struct {
	io.ReadCloser
	gave bool
}

func (b *lateEOF) Read(p []byte) (int, error) {
	if b.gave {
		time.Sleep(200 * time.Millisecond)
		return b.ReadCloser.Read(p)
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && n > 0 {
		b.gave, err = true, nil
	}
	return n, err
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestForwardStreamBeforeBodyEnd: an owner that opens its stream before
// the forwarder's transport has read the request body's end (an exec's
// SSE opens once the command is read) streams through the forwarder
// whole. Without full duplex the forwarding server drained and closed the
// body at the stream's first flush, the transport's last read of it
// failed, and the transport dropped its connection to the owner: the
// caller got the headers and then "unexpected EOF" (CI, 1 in 15 runs of
// TestServeFleet).
func TestForwardStreamBeforeBodyEnd(t *testing.T) {
	secret := []byte(strings.Repeat("s", MinSecret))
	owner := New(Config{Self: "srv_a", Secret: secret, Local: func(string) bool { return true }},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			line, _ := bufio.NewReader(r.Body).ReadString('\n')
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			http.NewResponseController(w).Flush()
			time.Sleep(400 * time.Millisecond)
			fmt.Fprintf(w, "data: ran %s\n", strings.TrimSpace(line))
		}))
	a := httptest.NewServer(owner)
	defer a.Close()
	slow := roundTripper(func(r *http.Request) (*http.Response, error) {
		r.Body = &lateEOF{ReadCloser: r.Body}
		return http.DefaultTransport.RoundTrip(r)
	})
	b := httptest.NewServer(New(Config{Self: "srv_b", Secret: secret, Lease: time.Minute, Local: func(string) bool { return false },
		Owners: oneOwner{store.Instance{ID: "srv_a", URL: a.URL, LastSeen: time.Now()}}, Transport: slow}, nil))
	defer b.Close()

	res, err := http.Post(b.URL+"/v1/computers/cmp_1/exec", "text/plain", strings.NewReader("echo\n"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || err != nil || string(body) != "data: ran echo\n" {
		t.Fatalf("the stream through the forwarder: %d %q (%v)", res.StatusCode, body, err)
	}
}
