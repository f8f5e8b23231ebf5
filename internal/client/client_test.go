package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// fake answers every request with status and body (an event stream when
// the content type says so).
func fake(t *testing.T, status int, contentType, body string) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer cub_k" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"type":"authentication_error","code":"invalid_api_key","message":"bad key","param":null}}`)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{URL: srv.URL + "/", Key: "cub_k", MaxLine: 1 << 10, MaxEvent: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const sseType = "text/event-stream"

// TestPythonStreamAssembles: outputs streamed to the callback and put in
// their cells of the result, which the result event sends without them.
func TestPythonStreamAssembles(t *testing.T) {
	c := fake(t, 200, sseType, ": keep-alive\n\n"+
		"event: output\ndata: {\"cell\":0,\"output\":{\"type\":\"stream\",\"name\":\"stdout\",\"text\":\"a\\n\"}}\n\n"+
		"event: output\r\ndata: {\"cell\":1,\"output\":{\"type\":\"execute_result\",\"text\":\"2\",\"png\":\"iVBORw==\"}}\r\n\r\n"+
		"event: result\ndata: {\"status\":\"ok\",\"cells\":[{\"index\":0,\"status\":\"ok\",\"outputs\":null},{\"index\":1,\"status\":\"ok\"},{\"index\":2,\"status\":\"skipped\"}],\"cancelled\":false,\"timed_out\":false,\"duration_ms\":3}\n\n")
	var streamed []client.PythonOutput
	res, err := c.PythonStream(context.Background(), "cmp_1", client.PythonRequest{Cells: make([]client.Cell, 3)},
		func(o client.PythonOutput) { streamed = append(streamed, o) })
	if err != nil || res.Status != "ok" || len(streamed) != 2 || streamed[1].Cell != 1 {
		t.Fatalf("%v, %+v, %+v", err, res, streamed)
	}
	if len(res.Cells) != 3 || res.Cells[0].Outputs[0].Text != "a\n" || string(res.Cells[1].Outputs[0].PNG) != "\x89PNG" ||
		res.Cells[2].Outputs == nil || len(res.Cells[2].Outputs) != 0 {
		t.Fatalf("assembled %+v", res.Cells)
	}
}

// TestStreamErrors: what goes wrong is a clear error, at once.
func TestStreamErrors(t *testing.T) {
	req := client.PythonRequest{Cells: make([]client.Cell, 1)}
	for _, tc := range []struct {
		name, ct, body string
		status         int
		want           string
	}{
		{"no result", sseType, "event: output\ndata: {\"cell\":0,\"output\":{\"type\":\"stream\"}}\n\n", 200, "ended without a result event"},
		{"truncated", sseType, "event: output\ndata: {\"cell\":0,", 200, "middle of an event"},
		{"invalid JSON", sseType, "event: output\ndata: {nope}\n\n", 200, "bad output event"},
		{"bad cell", sseType, "event: output\ndata: {\"cell\":5,\"output\":{}}\n\n", 200, "bad output event"},
		{"invalid result", sseType, "event: result\ndata: [1]\n\n", 200, "bad result event"},
		{"oversize line", sseType, "event: output\ndata: " + strings.Repeat("x", 2000) + "\n\n", 200, "longer than 1024 bytes"},
		{"oversize event", sseType, strings.Repeat("data: "+strings.Repeat("x", 1000)+"\n", 5) + "\n", 200, "larger than 4096 bytes"},
		{"not a stream", "application/json", `{"status":"ok"}`, 200, "not an event stream"},
		{"error event", sseType, "event: error\ndata: {\"error\":{\"type\":\"invalid_request_error\",\"code\":\"computer_gone\",\"message\":\"gone\",\"param\":null}}\n\n", 200, "error event computer_gone: gone"},
		{"HTTP error", "application/json", `{"error":{"type":"invalid_request_error","code":"not_found","message":"no such computer","param":null}}`, 404, "HTTP 404 not_found: no such computer"},
		{"HTTP error, not JSON", "text/html", "<h1>bad gateway</h1>", 502, "HTTP 502 <h1>bad gateway</h1>"},
	} {
		c := fake(t, tc.status, tc.ct, tc.body)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.PythonStream(ctx, "cmp_1", req, nil)
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) || timedOut {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if strings.Contains(tc.name, "error") {
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Status != tc.status%200 && ce.Status != tc.status || ce.Message == "" {
				t.Errorf("%s: %#v is not an *Error with status %d", tc.name, err, tc.status)
			}
		}
	}
}

// TestErrorAnswer: an error answer is an *Error with every field.
func TestErrorAnswer(t *testing.T) {
	c := fake(t, 400, "application/json", `{"error":{"type":"invalid_request_error","code":"invalid_request","message":"bad timeout","param":"timeout","request_id":"req_1"}}`)
	_, err := c.Exec(context.Background(), "cmp_1", client.ExecRequest{Command: "true"})
	var ce *client.Error
	if !errors.As(err, &ce) || *ce != (client.Error{Method: "POST", Path: "/v1/computers/cmp_1/exec", Status: 400,
		Type: "invalid_request_error", Code: "invalid_request", Message: "bad timeout", Param: "timeout", RequestID: "req_1"}) {
		t.Fatalf("%#v", err)
	}
	if got := fmt.Sprint(err); got != "POST /v1/computers/cmp_1/exec: HTTP 400 invalid_request: bad timeout (request req_1)" {
		t.Fatalf("message %q", got)
	}
	if _, err := client.New(client.Config{URL: "ftp://x"}); err == nil {
		t.Fatal("ftp:// accepted")
	}
}

// TestAnswerBounded: a JSON answer larger than MaxAnswer is refused.
func TestAnswerBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id":"`+strings.Repeat("x", 5000)+`"}`)
	}))
	defer srv.Close()
	c, _ := client.New(client.Config{URL: srv.URL, MaxAnswer: 4096})
	if _, err := c.Get(context.Background(), "cmp_1"); err == nil || !strings.Contains(err.Error(), "larger than 4096") {
		t.Fatalf("%v", err)
	}
}

// TestStreamStalls: a server that stops sending mid-stream holds the call
// only until its context ends.
func TestStreamStalls(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", sseType)
		io.WriteString(w, "event: output\ndata: {\"cell\":0,")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, _ := client.New(client.Config{URL: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.PythonStream(ctx, "cmp_1", client.PythonRequest{Cells: make([]client.Cell, 1)}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
}
