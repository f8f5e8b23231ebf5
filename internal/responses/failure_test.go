package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// upstreamMessage is err's message if it is an upstream error (a 502).
func upstreamMessage(t *testing.T, err error) string {
	t.Helper()
	var ge *Error
	if !errors.As(err, &ge) || ge.Code != "upstream_error" {
		t.Fatalf("error %v is not an upstream error", err)
	}
	return ge.Message
}

// TestUpstreamFailures: each way an upstream fails is a 502 with its own
// fixed message (the upstream's body is never forwarded).
func TestUpstreamFailures(t *testing.T) {
	raw := func(contentType, body string) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			fmt.Fprint(w, body)
		}
	}
	for _, c := range []struct {
		name, api string
		noStream  bool
		answer    any
		code      int
		want      string
	}{
		{"status", APIChat, false, map[string]any{"error": "secret detail"}, 500, "the upstream model server answered HTTP 500"},
		{"not SSE", APIChat, false, raw("application/json", `{}`), 200, "did not stream its answer"},
		{"malformed chunk", APIChat, false, raw("text/event-stream", "data: {nope\n\n"), 200, "malformed chunk"},
		{"error chunk", APIChat, false, raw("text/event-stream", `data: {"error":{"message":"x"}}`+"\n\n"), 200, "reported an error mid-stream"},
		{"cut short", APIChat, false, raw("text/event-stream", `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n"), 200,
			"ended before the answer was complete"},
		{"nameless call", APIChat, false, raw("text/event-stream", `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c"}]},"finish_reason":"tool_calls"}]}`+"\n\n"), 200,
			"tool call without a name"},
		{"call index", APIChat, false, raw("text/event-stream", `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":500,"function":{"name":"f"}}]}}]}`+"\n\n"), 200,
			"index out of range"},
		{"not a completion", APIChat, true, raw("application/json", `{"choices":[]}`), 200, "not a chat completion"},
		{"too large", APIChat, true, raw("application/json", `{"choices":[`+strings.Repeat(" ", 2000)+`]}`), 200, "exceeds 1000 bytes"},
		{"responses failed event", APIResponses, false, raw("text/event-stream", `data: {"type":"response.failed"}`+"\n\n"), 200, "reported an error mid-stream"},
		{"responses malformed", APIResponses, false, raw("text/event-stream", "data: [\n\n"), 200, "malformed event"},
		{"responses cut short", APIResponses, false, raw("text/event-stream", `data: {"type":"response.created"}`+"\n\n"), 200, "ended before"},
		{"responses not a response", APIResponses, true, raw("application/json", `{"status":"completed"}`), 200, "not a response"},
		{"responses failed", APIResponses, true, raw("application/json", `{"status":"failed","output":[]}`), 200, "reported a failed response"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.api, func(int, map[string]any) (int, any) { return c.code, c.answer }, func(cfg *Config) {
				cfg.Upstreams[0].NoStream = c.noStream
				cfg.MaxUpstreamBytes = 1000
			})
			_, err := h.create(`{"input":"hi"}`)
			if msg := upstreamMessage(t, err); !strings.Contains(msg, c.want) || strings.Contains(msg, "secret") {
				t.Fatalf("message %q, want %q", msg, c.want)
			}
		})
	}
}

// TestUpstreamTimeouts: an upstream that sends nothing fails after the
// idle timeout, one that trickles fails after the call's timeout, and an
// unreachable one fails at once.
func TestUpstreamTimeouts(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, stall }, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
	start := time.Now()
	_, err := h.create(`{"input":"hi"}`)
	if msg := upstreamMessage(t, err); !strings.Contains(msg, "sent nothing for 100ms") || time.Since(start) > 3*time.Second {
		t.Fatalf("idle: %q after %s", msg, time.Since(start))
	}
	trickle := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for r.Context().Err() == nil {
			fmt.Fprint(w, ": keepalive\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	}
	h = newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, trickle }, func(c *Config) {
		c.Timeout, c.IdleTimeout = 300*time.Millisecond, time.Second
	})
	if msg := upstreamMessage(t, func() error { _, err := h.create(`{"input":"hi"}`); return err }()); !strings.Contains(msg, "did not answer within 300ms") {
		t.Fatalf("timeout: %q", msg)
	}
	h = newHarness(t, APIChat, nil, func(c *Config) { c.Upstreams[0].BaseURL = "http://127.0.0.1:1/v1" })
	if msg := upstreamMessage(t, func() error { _, err := h.create(`{"input":"hi"}`); return err }()); !strings.Contains(msg, "unreachable") {
		t.Fatalf("unreachable: %q", msg)
	}
}

// TestFailedStream: an upstream that breaks mid-answer fails a streamed
// response: what was open (the text so far, the streaming code) ends
// incomplete, each with its output_item.done, then response.failed; the
// failed response is stored without a conversation to continue.
func TestFailedStream(t *testing.T) {
	broken := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		upstreamtest.SSE(w, "", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "partial "}}}})
		upstreamtest.SSE(w, "", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
			map[string]any{"index": 0, "id": "c1", "function": map[string]any{"name": tools.CodeInterpreterName, "arguments": `{"code":"pri`}},
			map[string]any{"index": 1, "id": "f1", "function": map[string]any{"name": "lookup", "arguments": `{"q":`}}}}}}})
	}
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, broken }, nil)
	_, events, err := h.stream(context.Background(), `{"input":"go","stream":true,"tools":[{"type":"code_interpreter","container":{"type":"auto"}},
		{"type":"function","name":"lookup"}]}`)
	upstreamMessage(t, err)
	got := squash(types(events))
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_item.added", "response.code_interpreter_call.in_progress",
		"response.code_interpreter_call_code.delta", "response.output_item.added", "response.function_call_arguments.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.failed"}
	if !slices.Equal(got, want) {
		t.Fatalf("events\n%q\nwant\n%q", got, want)
	}
	// Each of the three open items got its output_item.done.
	if n := strings.Count(strings.Join(types(events), ","), "response.output_item.done"); n != 3 {
		t.Fatalf("%d output_item.done events", n)
	}
	failed := asJSON(t, events[len(events)-1])["response"].(map[string]any)
	out := failed["output"].([]any)
	msg, code, fc := out[0].(map[string]any), out[1].(map[string]any), out[2].(map[string]any)
	if failed["status"] != "failed" || msg["status"] != "incomplete" || msg["content"].([]any)[0].(map[string]any)["text"] != "partial " ||
		code["status"] != "incomplete" || code["code"] != "pri" || fc["status"] != "incomplete" || fc["arguments"] != `{"q":` {
		t.Fatalf("failed response %v", failed)
	}
	if e := failed["error"].(map[string]any); e["code"] != "upstream_error" {
		t.Fatalf("error %v", e)
	}
	sr, err := h.store.Get(context.Background(), "org_1", failed["id"].(string))
	if err != nil || sr.Conversation != nil {
		t.Fatalf("stored failed response: %v, conversation %s", err, sr.Conversation)
	}
	// Continuing it is refused before any upstream call.
	_, err = h.create(`{"input":"again","previous_response_id":"` + sr.ID + `"}`)
	var ge *Error
	if !errors.As(err, &ge) || ge.Param != "previous_response_id" || !strings.Contains(ge.Message, "cannot be continued") {
		t.Fatalf("continuing a failed response: %v", err)
	}
}

// TestComputerFailures: a computer that cannot be made, or a tool call
// whose computer fails, fails the response (the running call ends
// incomplete); the error is the computer's, not an upstream error.
func TestComputerFailures(t *testing.T) {
	step := func(int, map[string]any) (int, any) {
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: "builtin__computer_exec", Args: `{"command":"ls"}`})
	}
	h := newHarness(t, APIChat, step, nil)
	gone := errors.New("computer gone")
	h.comp.createErr = gone
	if _, err := h.create(`{"input":"go",` + toolsBody + `}`); !errors.Is(err, gone) {
		t.Fatalf("create failure: %v", err)
	}
	h = newHarness(t, APIChat, step, nil)
	h.comp.run = func(context.Context, string, json.RawMessage) (tools.Result, error) { return tools.Result{}, gone }
	_, events, err := h.stream(context.Background(), `{"input":"go","stream":true,`+toolsBody+`}`)
	if !errors.Is(err, gone) {
		t.Fatalf("run failure: %v", err)
	}
	failed := asJSON(t, events[len(events)-1])
	resp := failed["response"].(map[string]any)
	item := resp["output"].([]any)[0].(map[string]any)
	if failed["type"] != "response.failed" || item["status"] != "incomplete" || item["type"] != "tool_call" ||
		resp["error"].(map[string]any)["code"] != "server_error" {
		t.Fatalf("failed event %v", failed)
	}
	// The computer made for the response is still deleted.
	h.g.Close(context.Background())
	if _, _, deleted := h.comp.snapshot(); len(deleted) != 1 {
		t.Fatalf("deleted %q", deleted)
	}
}

// TestCancel: the client leaving (the request context) ends the run with
// the context's error, whether the upstream is streaming or a tool runs;
// the computer is deleted all the same.
func TestCancel(t *testing.T) {
	started := make(chan struct{})
	hang := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		upstreamtest.SSE(w, "", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "x"}}}})
		close(started)
		<-r.Context().Done()
	}
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, hang }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, _, err := h.stream(ctx, `{"input":"go","stream":true}`); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel while streaming: %v", err)
	}

	h = newHarness(t, APIChat, func(int, map[string]any) (int, any) {
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: tools.CodeInterpreterName, Args: `{"code":"sleep"}`})
	}, nil)
	ctx, cancel = context.WithCancel(context.Background())
	h.comp.run = func(ctx context.Context, _ string, _ json.RawMessage) (tools.Result, error) {
		cancel()
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}
	if _, err := h.g.Create(ctx, h.p, h.request(`{"input":"go",`+toolsBody+`}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel while running: %v", err)
	}
	if err := h.g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, deleted := h.comp.snapshot(); !slices.Equal(deleted, []string{"cmp_1"}) {
		t.Fatalf("deleted %q", deleted)
	}
}

// TestRequestErrors: request errors are found in Begin, before any
// upstream call.
func TestRequestErrors(t *testing.T) {
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, upstreamtest.TextAnswer("no") }, func(c *Config) {
		c.Upstreams[0].Default, c.Upstreams[0].Models = false, []string{"m", "gpt-*"}
	})
	h.comp.disabled = true
	for body, param := range map[string]string{
		`{"input":"hi","model":"other"}`:                                                       "model",
		`{"input":"hi",` + toolsBody + `}`:                                                     "tools",
		`{"input":"hi","previous_response_id":"resp_nope"}`:                                    "previous_response_id",
		`{"input":[{"type":"item_reference","id":"msg_nope"}]}`:                                "input[0].id",
		`{"input":[{"type":"item_reference","id":""}]}`:                                        "input[0].id",
		`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]}`:     "input",
		`{"input":[{"role":"user","content":[{"type":"input_image","file_id":"file_nope"}]}]}`: "input[0].content[0].file_id",
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_file","filename":"a/b","file_data":"eA=="}]}]}`: "input[0].content[1].filename",
	} {
		_, err := h.g.Begin(context.Background(), h.p, h.request(body))
		var ge *Error
		if !errors.As(err, &ge) || ge.Param != param {
			t.Errorf("%s: %v, want a 400 naming %q", body, err, param)
		}
	}
	if h.up.Calls() != 0 {
		t.Fatalf("%d upstream calls", h.up.Calls())
	}
	if _, err := h.create(`{"input":"hi","model":"gpt-4o"}`); err != nil {
		t.Fatalf("a pattern route: %v", err)
	}
}
