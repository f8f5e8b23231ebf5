package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// sleeper calls code_interpreter with code that runs for a minute.
func sleeper(t *testing.T) *scripted {
	return newScripted(t, func(n int, req map[string]any) (int, any) {
		return 200, toolCallAnswer("code_interpreter", `{"code":"import time\ntime.sleep(60)"}`)
	})
}

// waitDestroyed waits (bounded) until the response's computer is
// destroyed: it is deleted after the answer or the last event was sent.
func (e *env) waitDestroyed(key, responseID string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cs := e.computersOf(key, responseID)
		if len(cs) == 1 && cs[0].Status == "destroyed" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("computer of %s not destroyed: %+v", responseID, cs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestResponsesDisconnectMidExecution: a client leaving while its code
// runs (SSE or WebSocket) cancels the code and destroys the computer; the
// upstream is not called again.
func TestResponsesDisconnectMidExecution(t *testing.T) {
	e := newEnv(t, nil)
	up := sleeper(t)
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)

	// SSE: read up to "interpreting", then hang up (Stream returns and
	// closes the connection).
	var respID string
	body := map[string]any{"model": "m", "input": "sleep", "tools": ciTool, "stream": true}
	err := e.apiClient(key).Stream(t.Context(), "/v1/responses", body, func(ev client.Event) error {
		var d struct {
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		json.Unmarshal(ev.Data, &d)
		switch ev.Name {
		case "response.created":
			respID = d.Response.ID
		case "response.code_interpreter_call.interpreting":
			return client.Stop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if respID == "" {
		t.Fatal("no response.created before interpreting")
	}
	e.waitDestroyed(key, respID)
	// The stored response failed; the code it was running ended (failed:
	// the kernel was interrupted, or incomplete), never in_progress.
	var stored responseObj
	e.do(key, "GET", "/v1/responses/"+respID, nil).json(t, &stored)
	if st := stored.Output[0].Status; stored.Status != "failed" || len(stored.Output) != 1 || (st != "failed" && st != "incomplete") ||
		stored.Output[0].Code != "import time\ntime.sleep(60)" {
		t.Fatalf("stored after the disconnect: %+v", stored)
	}

	// WebSocket: the same, closing the connection.
	wctx, wcancel := context.WithTimeout(t.Context(), time.Minute)
	defer wcancel()
	client := e.sdk(key)
	conn, err := client.Responses.Connect(wctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = conn.Create(wctx, responses.ResponsesClientEventResponseCreateParam{Model: "m", Tools: sdkTools,
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String("sleep")}})
	if err != nil {
		t.Fatal(err)
	}
	respID = ""
	for {
		ev, err := conn.Recv(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "response.created" {
			respID = ev.AsResponseCreated().Response.ID
		}
		if ev.Type == "response.code_interpreter_call.interpreting" {
			break
		}
	}
	conn.Abort()
	e.waitDestroyed(key, respID)
	if up.count() != 2 {
		t.Fatalf("upstream calls %d, want 2 (one per response)", up.count())
	}

	// Server shutdown: CloseSockets ends the connection and its running
	// response; new upgrades are refused.
	wsURL := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/responses"
	auth := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}}
	c, _, err := websocket.Dial(wctx, wsURL, auth)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.Write(wctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"sleep","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`))
	respID = ""
	for {
		_, data, err := c.Read(wctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		json.Unmarshal(data, &ev)
		if ev.Type == "response.created" {
			respID = ev.Response.ID
		}
		if ev.Type == "response.code_interpreter_call.interpreting" {
			break
		}
	}
	// As cubicle serve shuts down: the sockets, then the gateway, which
	// waits for the computers its responses are deleting.
	if err := e.api.CloseSockets(wctx); err != nil {
		t.Fatal(err)
	}
	if err := e.gw.Close(wctx); err != nil {
		t.Fatal(err)
	}
	if cs := e.computersOf(key, respID); len(cs) != 1 || cs[0].Status != "destroyed" {
		t.Fatalf("computer after shutdown: %+v", cs)
	}
	for {
		if _, _, err = c.Read(wctx); err != nil {
			break // the events of the cancelled response, then the close
		}
	}
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("close after shutdown: %v", err)
	}
	if _, resp, err := websocket.Dial(wctx, wsURL, auth); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("dial after shutdown: %v %v", err, resp)
	}
}

// TestResponsesSocketRaw: the WebSocket transport's edges with a plain
// WebSocket client: auth like the POST, binary and malformed frames are
// error events on a connection that stays usable, GET without an upgrade
// is a 400.
func TestResponsesSocketRaw(t *testing.T) {
	e := newEnv(t, nil)
	e.withGateway(newScripted(t, func(n int, req map[string]any) (int, any) {
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "hello"})
	}))
	_, key := e.newKey("", computerCaps)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/responses"
	if _, resp, err := websocket.Dial(ctx, wsURL, nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial without a key: %v %v", err, resp)
	}
	if r := e.do(key, "GET", "/v1/responses", nil); r.code != 200 || !strings.Contains(string(r.body), `"object":"list"`) {
		t.Fatalf("GET without upgrade (the stored responses): %s", r)
	}
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	next := func() map[string]any {
		t.Helper()
		typ, data, err := c.Read(ctx)
		var ev map[string]any
		if err != nil || typ != websocket.MessageText || json.Unmarshal(data, &ev) != nil {
			t.Fatalf("read: %v %d %q", err, typ, data)
		}
		return ev
	}
	errorCode := func(ev map[string]any) string {
		er, _ := ev["error"].(map[string]any)
		if ev["type"] != "error" || ev["status"] != float64(400) || er == nil {
			t.Fatalf("want an error event: %v", ev)
		}
		return fmt.Sprint(er["code"], " ", er["param"])
	}
	c.Write(ctx, websocket.MessageBinary, []byte(`{"type":"response.create"}`))
	if got := errorCode(next()); got != "invalid_request <nil>" {
		t.Fatalf("binary frame: %s", got)
	}
	c.Write(ctx, websocket.MessageText, []byte(`not json`))
	if got := errorCode(next()); got != "invalid_request <nil>" {
		t.Fatalf("malformed frame: %s", got)
	}
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","stream_id":"bad id"}`))
	if got := errorCode(next()); got != "invalid_request stream_id" {
		t.Fatalf("bad stream_id: %s", got)
	}
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","input":"hi","previous_response_id":"resp_nope","stream_id":"s1"}`))
	if ev := next(); errorCode(ev) != "invalid_request previous_response_id" || ev["stream_id"] != "s1" {
		t.Fatalf("unknown previous response: %v", ev)
	}
	// Two creates sent back to back are answered in order.
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"one","stream_id":"a"}`))
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"m","input":"two","stream_id":"b"}`))
	for _, id := range []string{"a", "b"} {
		for seq := 0; ; seq++ {
			ev := next()
			if ev["stream_id"] != id || ev["sequence_number"] != float64(seq) {
				t.Fatalf("response %s event %d: %v", id, seq, ev)
			}
			if ev["type"] == "response.completed" {
				break
			}
		}
	}
}
