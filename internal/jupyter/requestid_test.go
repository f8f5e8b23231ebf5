package jupyter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// find is the first captured line with message msg.
func (s *logSink) find(msg string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(s.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && strings.HasPrefix(m["msg"].(string), msg) {
			return m
		}
	}
	return nil
}

// TestRequestIDAndLogger: an error answers its request id in the header
// and the body; a log line of a channels WebSocket carries the request id,
// route, organisation, key, kernel and computer.
func TestRequestIDAndLogger(t *testing.T) {
	sink := &logSink{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	e := newFakeEnv(t, Config{})

	r := e.do("GET", "/api/kernels/nope", nil)
	var body struct {
		Message, Reason string
		RequestID       string `json:"request_id"`
	}
	if r.code != 404 || json.Unmarshal(r.body, &body) != nil || body.Reason != "not_found" ||
		!strings.HasPrefix(body.RequestID, "req_") || r.hdr.Get("X-Request-Id") != body.RequestID {
		t.Fatalf("404: %s, X-Request-Id %q", r, r.hdr.Get("X-Request-Id"))
	}

	k := startKernel(t, e.url, e.key, nil)
	ws := dialChannels(t, e.url, e.key, k.ID)
	frame := `{"header":{"msg_id":"m1","msg_type":"kernel_info_request","session":"s","username":"t","date":"2026-01-01T00:00:00.000Z","version":"5.3"},"parent_header":{},"metadata":{},"content":{},"buffers":[]}`
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ws.c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	eventually(t, 5*time.Second, "the no-channel warning", func() bool {
		line = sink.find("jupyter: a client message names no channel")
		return line != nil
	})
	for _, attr := range []string{"request_id", "org", "key", "computer"} {
		if s, _ := line[attr].(string); s == "" {
			t.Errorf("log line without %s: %v", attr, line)
		}
	}
	if line["route"] != "GET /api/kernels/{id}/channels" || line["kernel"] != k.ID {
		t.Errorf("log line route/kernel: %v", line)
	}
}
