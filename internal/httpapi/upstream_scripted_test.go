package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// scripted is an OpenAI-compatible upstream answering from a script, in
// either API (responses.APIChat: /v1/chat/completions, responses.APIResponses:
// /v1/responses), streamed (SSE, text word by word, tool arguments in
// 4-byte fragments) when the request says stream: true, whole otherwise.
//
// The script is written once for both APIs: step gets the request in Chat
// Completions form (a Responses request is translated: input items become
// messages) and answers a chat completion (chatAnswer, toolCallAnswer), or
// a func(http.ResponseWriter, *http.Request) writing whatever it likes
// (stalls, broken streams). raw keeps the requests as sent.
type scripted struct {
	mu       sync.Mutex
	calls    int
	requests []map[string]any
	raw      []map[string]any
	srv      *httptest.Server
}

func newScriptedAPI(t *testing.T, api string, step func(call int, req map[string]any) (int, any)) *scripted {
	s := &scripted{}
	path := "/v1/chat/completions"
	if api == responses.APIResponses {
		path = "/v1/responses"
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || r.Method != "POST" {
			http.Error(w, "no route", 404)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var raw map[string]any
		json.Unmarshal(b, &raw)
		req := raw
		if api == responses.APIResponses {
			req = chatFromResponses(raw)
		}
		s.mu.Lock()
		s.calls++
		n := s.calls
		s.requests = append(s.requests, req)
		s.raw = append(s.raw, raw)
		s.mu.Unlock()
		code, body := step(n, req)
		if f, ok := body.(func(http.ResponseWriter, *http.Request)); ok {
			f(w, r)
			return
		}
		answer, _ := body.(map[string]any)
		stream := raw["stream"] == true
		if code != 200 || !stream {
			if code == 200 && api == responses.APIResponses {
				body = responsesFromChat(answer)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if api == responses.APIResponses {
			writeResponsesSSE(w, answer)
		} else {
			writeChatSSE(w, answer)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) rawRequest(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw[i]
}

// sse writes one event (data only, or named) and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// fragments cuts s into n-byte pieces.
func fragments(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// answerParts is a chat answer's text, tool calls and usage.
func answerParts(answer map[string]any) (string, []map[string]any, any) {
	choice := answer["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	text, _ := msg["content"].(string)
	var calls []map[string]any
	tcs, _ := msg["tool_calls"].([]any)
	for _, tc := range tcs {
		calls = append(calls, tc.(map[string]any))
	}
	return text, calls, answer["usage"]
}

func writeChatSSE(w http.ResponseWriter, answer map[string]any) {
	text, calls, usage := answerParts(answer)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if text != "" {
		for _, word := range strings.SplitAfter(text, " ") {
			sse(w, "", chunk(map[string]any{"content": word}, nil))
		}
	}
	for i, tc := range calls {
		fn := tc["function"].(map[string]any)
		sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil))
		for _, f := range fragments(fn["arguments"].(string), 4) {
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": f}}}}, nil))
		}
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	sse(w, "", chunk(map[string]any{}, finish))
	sse(w, "", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// responsesUsage is a chat usage in the Responses form.
func responsesUsage(usage any) map[string]any {
	u, _ := usage.(map[string]any)
	return map[string]any{"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"],
		"total_tokens": u["total_tokens"]}
}

// responsesFromChat is a chat answer as a Responses answer.
func responsesFromChat(answer map[string]any) map[string]any {
	text, calls, usage := answerParts(answer)
	output := []any{}
	if text != "" {
		output = append(output, map[string]any{"type": "message", "id": "msg_up", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	for _, tc := range calls {
		fn := tc["function"].(map[string]any)
		output = append(output, map[string]any{"type": "function_call", "id": "fc_up", "call_id": tc["id"],
			"name": fn["name"], "arguments": fn["arguments"], "status": "completed"})
	}
	return map[string]any{"id": "resp_up", "object": "response", "status": "completed", "output": output,
		"usage": responsesUsage(usage)}
}

func writeResponsesSSE(w http.ResponseWriter, answer map[string]any) {
	whole := responsesFromChat(answer)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		sse(w, typ, fields)
	}
	ev("response.created", map[string]any{"response": map[string]any{"id": "resp_up", "status": "in_progress", "output": []any{}}})
	for i, it := range whole["output"].([]any) {
		item := it.(map[string]any)
		switch item["type"] {
		case "message":
			text := item["content"].([]any)[0].(map[string]any)["text"].(string)
			ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"type": "message",
				"id": "msg_up", "role": "assistant", "status": "in_progress", "content": []any{}}})
			for _, word := range strings.SplitAfter(text, " ") {
				ev("response.output_text.delta", map[string]any{"output_index": i, "item_id": "msg_up", "content_index": 0,
					"delta": word})
			}
		case "function_call":
			ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"type": "function_call",
				"id": "fc_up", "call_id": item["call_id"], "name": item["name"], "arguments": "", "status": "in_progress"}})
			for _, f := range fragments(item["arguments"].(string), 4) {
				ev("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": "fc_up", "delta": f})
			}
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": whole})
}

// chatFromResponses is a Responses request in Chat Completions form, for
// scripts: input items become messages, flat function tools get their
// "function" wrapper.
func chatFromResponses(raw map[string]any) map[string]any {
	var msgs []any
	items, _ := raw["input"].([]any)
	for _, it := range items {
		item := it.(map[string]any)
		switch item["type"] {
		case "function_call":
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": item["call_id"], "type": "function", "function": map[string]any{"name": item["name"],
					"arguments": item["arguments"]}}}})
		case "function_call_output":
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
		default:
			msgs = append(msgs, map[string]any{"role": item["role"], "content": item["content"]})
		}
	}
	var tools []any
	ts, _ := raw["tools"].([]any)
	for _, t := range ts {
		tools = append(tools, map[string]any{"type": "function", "function": t})
	}
	return map[string]any{"model": raw["model"], "messages": msgs, "tools": tools}
}

// withGatewayConfig wires a gateway with cfg (the test's model default),
// with the env's files service when it has one (the withFiles option).
func (e *env) withGatewayConfig(cfg responses.Config) {
	g, err := responses.New(cfg, responses.Deps{Computers: e.mgr, Files: e.files, Store: e.st.Responses()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.setGateway(g)
}

// setGateway serves g; at cleanup (before the server's) it waits for the
// computers its responses delete after answering.
func (e *env) setGateway(g *responses.Gateway) {
	e.gw = g
	e.rewire(func(o *httpapi.Options) { o.Gateway = g })
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			e.t.Error(err)
		}
	})
}
