package log_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/log"
)

func serve(h http.Handler, id string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/x", nil)
	if id != "" {
		r.Header.Set("X-Request-Id", id)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestRequestID(t *testing.T) {
	var seen string
	h := log.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = log.RequestID(r.Context()) }))
	w := serve(h, "")
	if !regexp.MustCompile(`^req_[0-9a-f]{24}$`).MatchString(seen) || w.Header().Get("X-Request-Id") != seen {
		t.Fatalf("generated id %q, header %q", seen, w.Header().Get("X-Request-Id"))
	}
	if w := serve(h, "client-42"); seen != "client-42" || w.Header().Get("X-Request-Id") != "client-42" {
		t.Fatalf("a client's id: %q", seen)
	}
	for _, hostile := range []string{strings.Repeat("a", 65), "a\x1bb", "a b", "é"} {
		w := serve(h, hostile)
		if seen == hostile || !strings.HasPrefix(seen, "req_") || w.Header().Get("X-Request-Id") != seen {
			t.Errorf("hostile id %q kept: %q", hostile, seen)
		}
	}
	// An inner HTTP keeps the outer id.
	var inner string
	nested := log.HTTP(log.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner = log.RequestID(r.Context()) })))
	if w := serve(nested, ""); w.Header().Get("X-Request-Id") != inner {
		t.Fatalf("nested: %q vs %q", w.Header().Get("X-Request-Id"), inner)
	}
}

func TestAttach(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, nil))
	ctx := log.Into(context.Background(), "req_1", base.With("request_id", "req_1"))
	shared := ctx
	if !log.Attach(ctx, "org", "o1") {
		t.Fatal("Attach in a request")
	}
	log.From(shared).Info("hello")
	if got := buf.String(); !strings.Contains(got, "request_id=req_1") || !strings.Contains(got, "org=o1") {
		t.Fatalf("line %q", got)
	}
	if log.Attach(context.Background(), "org", "o1") || log.From(context.Background()) != slog.Default() {
		t.Fatal("outside a request")
	}
}

// TestAttributeOnce: a request path's line carries the computer id once
// though the route Attached it and the call site passes it too; a
// background line (no request) still carries it, and a different value or
// a grouped attribute is kept.
func TestAttributeOnce(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, nil))
	h := log.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Attach(r.Context(), "computer", "cmp_1")
		log.From(r.Context()).Info("computer created", "computer", "cmp_1", "ms", 3)
		log.From(r.Context()).Info("other", "computer", "cmp_2")
		log.From(r.Context()).WithGroup("g").Info("grouped", "computer", "cmp_1")
	}))
	r := httptest.NewRequest("GET", "/v1/computers/cmp_1", nil)
	h.ServeHTTP(httptest.NewRecorder(), r.WithContext(log.Into(r.Context(), "", base)))
	base.Info("reaped", "computer", "cmp_1")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("lines %q", lines)
	}
	for i, want := range []int{1, 2, 1, 1} {
		if n := strings.Count(lines[i], " computer="); n != want {
			t.Errorf("line %q has %d computer= attributes, want %d", lines[i], n, want)
		}
	}
	if !strings.Contains(lines[0], "ms=3") || !strings.Contains(lines[1], "computer=cmp_2") ||
		!strings.Contains(lines[2], "g.computer=cmp_1") || !strings.Contains(lines[3], "computer=cmp_1") {
		t.Fatalf("lines %q", lines)
	}
}
