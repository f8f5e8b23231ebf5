package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

// serveHTTP serves h on a new local listener with httpServer(c) and
// returns its address.
func serveHTTP(t *testing.T, c config.Server, h http.HandlerFunc) string {
	t.Helper()
	srv := httpServer(c, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestIdleConnectionClosed (issue 10 item 12): the server serve builds
// closes a keep-alive connection that stays idle past idle_timeout_seconds.
func TestIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	addr := serveHTTP(t, config.Server{IdleTimeoutSeconds: 1}, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("first request: %d, close %v", res.StatusCode, res.Close)
	}

	start := time.Now()
	c.SetReadDeadline(start.Add(5 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle keep-alive connection after %v (idle timeout 1 s): %v, want closed by the server", time.Since(start), err)
	}
}

// TestLongResponseNotCut (issue 10 item 12): the server has no
// whole-request timeout: an answer that streams, with silences, for longer
// than the body and idle timeouts (an SSE exec) is not cut.
func TestLongResponseNotCut(t *testing.T) {
	t.Parallel()
	addr := serveHTTP(t, config.Server{BodyTimeoutSeconds: 1, IdleTimeoutSeconds: 1}, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for _, part := range []string{"one ", "two"} {
			time.Sleep(1500 * time.Millisecond)
			io.WriteString(w, part)
			http.NewResponseController(w).Flush()
		}
	})
	res, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{"command":"sleep 3"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, err := io.ReadAll(res.Body); err != nil || string(b) != "one two" {
		t.Fatalf("a 3 s answer: %q, %v", b, err)
	}
}
