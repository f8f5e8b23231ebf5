package upstreamtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The upstream APIs, as internal/responses names them.
const (
	APIChat      = "chat"
	APIResponses = "responses"
)

// Step answers the call-th request (from 1), given in Chat Completions form
// (a Responses request is translated: input items become messages): a
// status and a chat completion (ChatAnswer, ToolCallsAnswer), or any body
// with a non-200 status, or a func(http.ResponseWriter, *http.Request)
// writing whatever it likes (stalls, broken streams).
type Step func(call int, req map[string]any) (int, any)

// Server is a scripted upstream. Answers are streamed (SSE, text word by
// word, tool arguments in 4-byte fragments) when the request says stream:
// true, whole otherwise.
type Server struct {
	URL string // the base URL, …/v1

	mu       sync.Mutex
	requests []map[string]any
	raw      []map[string]any
}

// New starts a scripted upstream speaking api, closed at the test's end.
func New(t testing.TB, api string, step Step) *Server {
	s := &Server{}
	srv := httptest.NewServer(Handler(api, step, func(req, raw map[string]any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests = append(s.requests, req)
		s.raw = append(s.raw, raw)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1"
	return s
}

// Calls is the number of requests so far.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Request is the i-th request (from 0) in Chat Completions form.
func (s *Server) Request(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[i]
}

// Raw is the i-th request (from 0) as sent.
func (s *Server) Raw(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw[i]
}

// Handler serves api's endpoint from step; record sees each request (in
// Chat Completions form, and as sent) before step answers it.
func Handler(api string, step Step, record func(req, raw map[string]any)) http.Handler {
	path := "/v1/chat/completions"
	if api == APIResponses {
		path = "/v1/responses"
	}
	calls := 0
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || r.Method != "POST" {
			http.Error(w, "no route", 404)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var raw map[string]any
		json.Unmarshal(b, &raw)
		req := raw
		if api == APIResponses {
			req = ChatFromResponses(raw)
		}
		mu.Lock()
		calls++
		n := calls
		record(req, raw)
		mu.Unlock()
		code, body := step(n, req)
		if f, ok := body.(func(http.ResponseWriter, *http.Request)); ok {
			f(w, r)
			return
		}
		answer, _ := body.(map[string]any)
		if code != 200 || raw["stream"] != true {
			if code == 200 && api == APIResponses {
				body = ResponsesFromChat(answer)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if api == APIResponses {
			WriteResponsesSSE(w, answer)
		} else {
			WriteChatSSE(w, answer)
		}
	})
}

// ChatAnswer is a chat completion whose message is msg (usage 10+5).
func ChatAnswer(msg map[string]any) map[string]any {
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
}

// TextAnswer is a chat completion answering text.
func TextAnswer(text string) map[string]any {
	return ChatAnswer(map[string]any{"role": "assistant", "content": text})
}

// Call is one tool call of an answer.
type Call struct{ ID, Name, Args string }

// ToolCallsAnswer is a chat completion with text ("": none) and calls.
func ToolCallsAnswer(text string, calls ...Call) map[string]any {
	var tcs []any
	for _, c := range calls {
		tcs = append(tcs, map[string]any{"id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Args}})
	}
	msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs}
	if text != "" {
		msg["content"] = text
	}
	return ChatAnswer(msg)
}

// SSE writes one event (data only, or named) and flushes it.
func SSE(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// Fragments cuts s into n-byte pieces.
func Fragments(s string, n int) []string {
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

// WriteChatSSE streams a chat answer as chat.completion.chunk events.
func WriteChatSSE(w http.ResponseWriter, answer map[string]any) {
	text, calls, usage := answerParts(answer)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	SSE(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if text != "" {
		for _, word := range strings.SplitAfter(text, " ") {
			SSE(w, "", chunk(map[string]any{"content": word}, nil))
		}
	}
	for i, tc := range calls {
		fn := tc["function"].(map[string]any)
		SSE(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil))
		for _, f := range Fragments(fn["arguments"].(string), 4) {
			SSE(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": f}}}}, nil))
		}
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	SSE(w, "", chunk(map[string]any{}, finish))
	SSE(w, "", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// responsesUsage is a chat usage in the Responses form.
func responsesUsage(usage any) map[string]any {
	u, _ := usage.(map[string]any)
	return map[string]any{"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"],
		"total_tokens": u["total_tokens"]}
}

// ResponsesFromChat is a chat answer as a Responses answer.
func ResponsesFromChat(answer map[string]any) map[string]any {
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

// WriteResponsesSSE streams a chat answer as Responses events.
func WriteResponsesSSE(w http.ResponseWriter, answer map[string]any) {
	whole := ResponsesFromChat(answer)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		SSE(w, typ, fields)
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
			for _, f := range Fragments(item["arguments"].(string), 4) {
				ev("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": "fc_up", "delta": f})
			}
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": whole})
}

// ChatFromResponses is a Responses request in Chat Completions form, for
// scripts: input items become messages, flat function tools get their
// "function" wrapper.
func ChatFromResponses(raw map[string]any) map[string]any {
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
