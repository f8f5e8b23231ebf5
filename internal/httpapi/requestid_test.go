package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// logSink captures the server's log lines as JSON objects.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// captureLogs sends the default logger (the fallback of internal/log) to
// a sink for the test.
func captureLogs(t *testing.T) *logSink {
	sink := &logSink{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return sink
}

var generatedID = regexp.MustCompile(`^req_[0-9a-f]{24}$`)

// requestIDOf is the response's X-Request-Id, which must equal the error
// body's request_id.
func requestIDOf(t *testing.T, r resp) string {
	t.Helper()
	id := r.hdr.Get("X-Request-Id")
	var body struct {
		Error struct {
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	r.json(t, &body)
	if id == "" || body.Error.RequestID != id {
		t.Fatalf("X-Request-Id %q, body request_id %q: %s", id, body.Error.RequestID, r)
	}
	return id
}

func TestRequestIDAndLogger(t *testing.T) {
	sink := captureLogs(t)
	e := newEnv(t, nil)
	keyID, key := e.newKey("", computerCaps)
	c := e.create(key, map[string]any{})

	// A hostile client id (too long; a tab) is replaced by a generated one.
	for _, hostile := range []string{strings.Repeat("x", 100), "a\tb"} {
		r := e.doCtx(context.Background(), key, "GET", "/v1/computers/"+c.ID+"/files/missing.txt", nil,
			map[string]string{"X-Request-Id": hostile})
		r.wantError(t, 404, "not_found")
		if id := requestIDOf(t, r); !generatedID.MatchString(id) {
			t.Fatalf("hostile id %q answered as %q", hostile, id)
		}
	}
	// A sane client id is kept, and the request's log line carries it with
	// the route, the organisation, the key and the computer.
	r := e.doCtx(context.Background(), key, "GET", "/v1/computers/"+c.ID+"/files/missing.txt", nil,
		map[string]string{"X-Request-Id": "trace-7f3a"})
	if id := requestIDOf(t, r); id != "trace-7f3a" {
		t.Fatalf("client id answered as %q", id)
	}
	var line map[string]any
	for _, l := range sink.lines() {
		if l["msg"] == "http" && l["request_id"] == "trace-7f3a" {
			line = l
		}
	}
	if line == nil {
		t.Fatalf("no log line of the request: %v", sink.lines())
	}
	want := map[string]any{"route": "GET /v1/computers/{id}/files/{path...}", "key": keyID, "computer": c.ID}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log line %s = %v, want %v: %v", k, line[k], v, line)
		}
	}
	if org, _ := line["org"].(string); org == "" {
		t.Errorf("log line without org: %v", line)
	}

	// Every response has one: a success, a 401, the 404 and 405 fallbacks.
	for _, r := range []resp{e.do(key, "GET", "/v1/computers", nil), e.do("", "GET", "/v1/computers", nil),
		e.do(key, "GET", "/v1/nothing", nil), e.do(key, "PATCH", "/v1/computers", nil)} {
		if !generatedID.MatchString(r.hdr.Get("X-Request-Id")) {
			t.Errorf("no X-Request-Id: %s %v", r, r.hdr)
		}
		if r.code >= 400 {
			requestIDOf(t, r)
		}
	}
}
