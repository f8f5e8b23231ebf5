package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
)

// serveLimited serves e's API on a real TCP listener with a body timeout
// and a connection limit, as cubicle serve does.
func serveLimited(t *testing.T, e *env, bodyTimeout time.Duration, maxConns int) string {
	t.Helper()
	e.rewire(func(o *httpapi.Options) { o.BodyTimeout = bodyTimeout })
	srv := httptest.NewUnstartedServer(e.api)
	srv.Listener = httpapi.LimitListener(srv.Listener, maxConns)
	srv.Start()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.Listener.Addr().String()
}

// rawRequest sends a request head and the first bytes of its body on a
// new connection.
func rawRequest(t *testing.T, addr, head, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	return c
}

func readResponse(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no HTTP answer: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestSlowClients: over real TCP, a client that stops sending its body is
// answered 408 once the body timeout passes; an upload that keeps sending
// more slowly than the timeout in total, and an SSE exec running longer
// than it, are not cut; connections beyond the limit are answered 503.
func TestSlowClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	addr := serveLimited(t, e, time.Second, 3)
	auth := "Authorization: Bearer " + e.admin + "\r\n"

	// One byte of a 100-byte body, then nothing.
	c := rawRequest(t, addr, "POST /v1/computers/"+id+"/exec HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 100\r\n\r\n", "{")
	res, body := readResponse(t, c)
	if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "request_timeout") {
		t.Fatalf("slow body: %d %s", res.StatusCode, body)
	}
	c = rawRequest(t, addr, "PUT /v1/computers/"+id+"/files/slow.txt HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 100\r\n\r\n", "x")
	if res, body := readResponse(t, c); res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow upload: %d %s", res.StatusCode, body)
	}

	// A steady upload: a byte every 300 ms for 3 s (longer than the timeout).
	const steady = 10
	c = rawRequest(t, addr, fmt.Sprintf("PUT /v1/computers/%s/files/steady.txt HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n", id, auth, steady), "")
	for range steady {
		time.Sleep(300 * time.Millisecond)
		if _, err := c.Write([]byte("s")); err != nil {
			t.Fatalf("steady upload cut: %v", err)
		}
	}
	if res, body := readResponse(t, c); res.StatusCode != http.StatusCreated {
		t.Fatalf("steady upload: %d %s", res.StatusCode, body)
	}

	// An SSE exec that runs 3 s, with nothing to read from the client.
	cmd := `{"command":"sleep 3; echo done"}`
	c = rawRequest(t, addr, fmt.Sprintf("POST /v1/computers/%s/exec HTTP/1.1\r\nHost: x\r\n%sAccept: text/event-stream\r\nContent-Length: %d\r\n\r\n", id, auth, len(cmd)), cmd)
	res, body = readResponse(t, c)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"data":"done\n"`) || !strings.Contains(body, "event: exit") {
		t.Fatalf("long SSE exec: %d %s", res.StatusCode, body)
	}

	// The limit: 3 open connections; the 4th is answered 503 at once.
	for range 3 {
		rawRequest(t, addr, "POST /v1/computers HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 100\r\n\r\n", "{")
	}
	// Accepted in order: the next connection is the 4th.
	c = rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "")
	res, body = readResponse(t, c)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "server.max_connections") {
		t.Fatalf("over the limit: %d %s", res.StatusCode, body)
	}
}

// TestTooManyConnectionsBody: the listener's 503 for a connection over the
// limit carries the error body of every other error, OpenAI's type
// included.
func TestTooManyConnectionsBody(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := httpapi.LimitListener(ln, 1)
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		l.Accept() // refuses the next connection; returns when the listener closes
	}()
	addr := ln.Addr().String()
	rawRequest(t, addr, "", "")
	res, body := readResponse(t, rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", ""))
	var got struct{ Error *errhttp.Body }
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Error == nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if e := got.Error; res.StatusCode != http.StatusServiceUnavailable || e.Type != "service_unavailable_error" ||
		e.Code != "too_many_connections" || e.Param != nil || !strings.Contains(e.Message, "limit of 1 connections") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
}

// TestBodyTimeoutSparesWebSocket: a Responses WebSocket that stays idle
// for longer than the body timeout is not cut; a response created after
// the silence completes on it.
func TestBodyTimeoutSparesWebSocket(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.withGateway(newScripted(t, func(n int, req map[string]any) (int, any) {
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "hello"})
	}))
	addr := serveLimited(t, e, time.Second, 0)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/v1/responses",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.admin}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	time.Sleep(2500 * time.Millisecond) // idle: 2.5 times the body timeout
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"hi"}`)); err != nil {
		t.Fatalf("write after an idle spell: %v", err)
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("the idle WebSocket was cut: %v", err)
		}
		if strings.Contains(string(data), `"type":"response.completed"`) {
			return
		}
	}
}
