package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// sseOfType returns the SSE events of type typ.
func sseOfType(evs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if ev["type"] == typ {
			out = append(out, ev)
		}
	}
	return out
}

// indexOf is the position of the first event of type typ (-1: none).
func indexOf(evs []map[string]any, typ string) int {
	for i, ev := range evs {
		if ev["type"] == typ {
			return i
		}
	}
	return -1
}

// finalResponse is the response of the stream's last event.
func finalResponse(t *testing.T, evs []map[string]any) responseObj {
	b, _ := json.Marshal(evs[len(evs)-1]["response"])
	var out responseObj
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResponsesStreamedUpstream: with a streamed Chat Completions upstream
// (the default), code → plot → final answer reaches the client as token
// deltas, and the upstream's streamed tool call (split across many chunks)
// runs as a code_interpreter_call, never shown as a function_call.
func TestResponsesStreamedUpstream(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if lastToolMessage(req) == "" {
			return 200, toolCallAnswer("code_interpreter",
				`{"code":"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "The plot shows a dip at x = 2."})
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "plot it", "tools": ciTool,
		"stream": true, "include": []string{"code_interpreter_call.outputs"}})
	if r.code != 200 {
		t.Fatalf("stream: %s", r)
	}
	evs := sseEvents(t, r.body)
	deltas := sseOfType(evs, "response.output_text.delta")
	var text strings.Builder
	for _, d := range deltas {
		text.WriteString(d["delta"].(string))
	}
	if len(deltas) != 9 || text.String() != "The plot shows a dip at x = 2." {
		t.Fatalf("%d text deltas %q", len(deltas), text.String())
	}
	// The message item and its part are announced before the first delta.
	first := indexOf(evs, "response.output_text.delta")
	if evs[first-2]["type"] != "response.output_item.added" || evs[first-1]["type"] != "response.content_part.added" ||
		evs[first]["output_index"] != float64(1) {
		t.Fatalf("before the first delta: %v / %v", evs[first-2], evs[first-1])
	}
	if n := len(sseOfType(evs, "response.function_call_arguments.delta")); n != 0 {
		t.Fatalf("the gateway call was shown as a function call (%d argument deltas)", n)
	}
	// The code streams out of the arguments' fragments, before the call runs.
	var code strings.Builder
	codeDeltas := sseOfType(evs, "response.code_interpreter_call_code.delta")
	for _, d := range codeDeltas {
		code.WriteString(d["delta"].(string))
	}
	const plot = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()"
	if len(codeDeltas) < 10 || code.String() != plot {
		t.Fatalf("%d code deltas %q", len(codeDeltas), code.String())
	}
	added := evs[indexOf(evs, "response.output_item.added")]["item"].(map[string]any)
	if !strings.HasPrefix(added["container_id"].(string), "cmp_") || indexOf(evs, "response.code_interpreter_call.in_progress") != 3 ||
		indexOf(evs, "response.code_interpreter_call_code.delta") != 4 ||
		indexOf(evs, "response.code_interpreter_call_code.done") > indexOf(evs, "response.code_interpreter_call.interpreting") {
		t.Fatalf("code_interpreter_call events out of order: %v", evs[:6])
	}
	out := finalResponse(t, evs)
	if out.Status != "completed" || len(out.Output) != 2 || out.Output[0].Type != "code_interpreter_call" ||
		!strings.Contains(out.Output[0].Code, "plt.plot") || out.Output[1].Content[0].Text != text.String() {
		t.Fatalf("final response: %+v", out)
	}
	if outs := out.Output[0].Outputs; outs == nil || len(*outs) == 0 || !strings.Contains(string((*outs)[len(*outs)-1]), `"image"`) {
		t.Fatalf("no image output: %+v", out.Output[0])
	}
	// Usage comes from the streams' usage chunks.
	if out.Usage.InputTokens != 20 || out.Usage.TotalTokens != 30 {
		t.Fatalf("usage %+v", out.Usage)
	}
	raw := up.rawRequest(0)
	if raw["stream"] != true || fmt.Sprint(raw["stream_options"]) != "map[include_usage:true]" {
		t.Fatalf("upstream request: stream %v, stream_options %v", raw["stream"], raw["stream_options"])
	}
}

// TestResponsesStreamedClientCall: a client function call streamed in
// fragments reaches the client as function_call_arguments.delta events,
// after the text the model said first; not streaming, the same answer is
// one response.
func TestResponsesStreamedClientCall(t *testing.T) {
	e := newEnv(t, nil)
	const args = `{"city":"Paris","unit":"celsius"}`
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		a := toolCallAnswer("get_weather", args)
		a["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"] = "Let me check."
		return 200, a
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	body := map[string]any{"model": "m", "input": "weather?", "stream": true, "tools": append([]any{
		map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}, ciTool...)}
	r := e.do(key, "POST", "/v1/responses", body)
	evs := sseEvents(t, r.body)
	argDeltas := sseOfType(evs, "response.function_call_arguments.delta")
	var got strings.Builder
	for _, d := range argDeltas {
		got.WriteString(d["delta"].(string))
		if d["output_index"] != float64(1) {
			t.Fatalf("argument delta at %v", d["output_index"])
		}
	}
	if len(argDeltas) != len(fragments(args, 4)) || got.String() != args {
		t.Fatalf("%d argument deltas %q", len(argDeltas), got.String())
	}
	added := sseOfType(evs, "response.output_item.added")
	if len(added) != 2 || added[1]["item"].(map[string]any)["type"] != "function_call" ||
		added[1]["item"].(map[string]any)["call_id"] != "call_1" {
		t.Fatalf("added items: %v", added)
	}
	out := finalResponse(t, evs)
	if out.Status != "completed" || len(out.Output) != 2 || out.Output[0].Content[0].Text != "Let me check." ||
		out.Output[1].Type != "function_call" || out.Output[1].Arguments != args || out.Output[1].Status != "completed" {
		t.Fatalf("final response: %+v", out)
	}
	body["stream"] = false
	r = e.do(key, "POST", "/v1/responses", body)
	var whole responseObj
	r.json(t, &whole)
	if len(whole.Output) != 2 || whole.Output[1].Arguments != args || whole.Output[1].CallID != "call_1" {
		t.Fatalf("not streamed: %s", r)
	}
	// Where the time went, for operators and the gateway bench.
	if st := r.hdr.Get("Server-Timing"); !strings.HasPrefix(st, "upstream;dur=") || !strings.Contains(st, ", tools;dur=0.000, create;dur=0.000, gateway;dur=") ||
		!strings.Contains(st, ", total;dur=") {
		t.Fatalf("Server-Timing %q", st)
	}
}

// TestResponsesResponsesUpstream: an api = "responses" upstream, streamed
// and not, runs a code_interpreter round: code_interpreter reaches it as
// a flat function tool, the call and its output come back as
// function_call / function_call_output items, the text as deltas.
func TestResponsesResponsesUpstream(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	for _, stream := range []bool{true, false} {
		up := newScriptedAPI(t, responses.APIResponses, sixTimesSevenStep)
		e.withGatewayConfig(responses.Config{Model: "m", Upstreams: []responses.UpstreamConfig{{Name: "r",
			BaseURL: up.srv.URL + "/v1", API: responses.APIResponses, Default: true, NoStream: !stream}}})
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": ciTool, "stream": true})
		evs := sseEvents(t, r.body)
		out := finalResponse(t, evs)
		if out.Status != "completed" || len(out.Output) != 2 || out.Output[0].Code != "print(6*7)" ||
			out.Output[1].Content[0].Text != "The answer is 42" || out.Usage.TotalTokens != 30 {
			t.Fatalf("stream %v: final response %+v", stream, out)
		}
		wantDeltas := 1
		if stream {
			wantDeltas = 4
		}
		if n := len(sseOfType(evs, "response.output_text.delta")); n != wantDeltas {
			t.Fatalf("stream %v: %d text deltas, want %d", stream, n, wantDeltas)
		}
		first, second := up.rawRequest(0), up.rawRequest(1)
		tools, _ := first["tools"].([]any)
		if len(tools) != 1 || fmt.Sprint(tools[0].(map[string]any)["name"]) != "code_interpreter" ||
			tools[0].(map[string]any)["type"] != "function" || first["store"] != false || (first["stream"] == true) != stream {
			t.Fatalf("first upstream request: %v", first)
		}
		input, _ := json.Marshal(second["input"])
		var items []map[string]any
		json.Unmarshal(input, &items)
		if len(items) != 3 || items[1]["type"] != "function_call" || items[1]["call_id"] != "call_1" ||
			items[2]["type"] != "function_call_output" || items[2]["call_id"] != "call_1" || items[2]["output"] != "42" {
			t.Fatalf("second upstream input: %s", input)
		}
	}
}

// TestResponsesRouting: the request's model picks the upstream (exact
// name, then pattern, then the default); without a default an unknown
// model is a 400 on model, before any upstream call.
func TestResponsesRouting(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	answer := func(text string) func(int, map[string]any) (int, any) {
		return func(int, map[string]any) (int, any) {
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": text})
		}
	}
	a := newScripted(t, answer("from a"))
	b := newScriptedAPI(t, responses.APIResponses, answer("from b"))
	ups := []responses.UpstreamConfig{
		{Name: "a", BaseURL: a.srv.URL + "/v1", Models: []string{"alpha", "beta*"}, NoStream: true},
		{Name: "b", BaseURL: b.srv.URL + "/v1", API: responses.APIResponses, Models: []string{"beta-exact"}, Default: true},
	}
	e.withGatewayConfig(responses.Config{Upstreams: ups})
	for model, want := range map[string]string{"alpha": "from a", "beta-2": "from a", "beta-exact": "from b", "other": "from b"} {
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": model, "input": "hi"})
		var out responseObj
		r.json(t, &out)
		if r.code != 200 || len(out.Output) != 1 || out.Output[0].Content[0].Text != want || out.Model != model {
			t.Fatalf("model %s: %s", model, r)
		}
	}
	// Map order: a's first request is for alpha or beta-2.
	if m := a.rawRequest(0)["model"]; a.count() != 2 || b.count() != 2 || a.rawRequest(0)["stream"] != nil || m != "alpha" && m != "beta-2" {
		t.Fatalf("calls a %d, b %d; a's request %v", a.count(), b.count(), a.rawRequest(0))
	}
	ups[1].Default = false
	e.withGatewayConfig(responses.Config{Upstreams: ups})
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "other", "input": "hi"})
	if er := r.wantError(t, 400, ""); er.Error.Param == nil || *er.Error.Param != "model" {
		t.Fatalf("unknown model: %s", r)
	}
	if a.count() != 2 || b.count() != 2 {
		t.Fatalf("an unknown model reached an upstream")
	}
	// A bad list is refused, naming the key.
	for _, c := range []struct {
		up   responses.UpstreamConfig
		want string
	}{
		{responses.UpstreamConfig{Name: "c", BaseURL: "http://x/v1", API: "completions", Default: true}, "upstreams[0].api"},
		{responses.UpstreamConfig{Name: "c", BaseURL: "x/v1", Default: true}, "upstreams[0].base_url"},
		{responses.UpstreamConfig{Name: "c", BaseURL: "http://x/v1"}, "upstreams[0].models"},
		{responses.UpstreamConfig{Name: "c", BaseURL: "http://x/v1", Models: []string{"[a"}}, "upstreams[0].models"},
	} {
		if _, err := responses.New(responses.Config{Upstreams: []responses.UpstreamConfig{c.up}}, responses.Deps{Computers: e.mgr}); err == nil ||
			!strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: %v, want %s", c.up, err, c.want)
		}
	}
	dup := []responses.UpstreamConfig{ups[0], ups[0]}
	if _, err := responses.New(responses.Config{Upstreams: dup}, responses.Deps{Computers: e.mgr}); err == nil || !strings.Contains(err.Error(), "upstreams[1].name") {
		t.Fatalf("duplicate name: %v", err)
	}
}

// TestResponsesUpstreamBrokenStream: an upstream whose stream breaks
// (connection closed mid-answer, an error chunk, a JSON answer to a
// streamed request) ends a streamed response with response.failed and a
// plain one with a 502, never forwarding the upstream's words, and the
// computer of the response is gone.
func TestResponsesUpstreamBrokenStream(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	for name, broken := range map[string]func(http.ResponseWriter, *http.Request){
		"closed": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, "", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "Half an ans"}}}})
		},
		"error chunk": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, "", map[string]any{"error": map[string]any{"message": "secret upstream detail"}})
		},
		"not streamed": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(chatAnswer(map[string]any{"role": "assistant", "content": "secret"}))
		},
	} {
		up := newScripted(t, func(n int, req map[string]any) (int, any) {
			if n%2 == 1 {
				return 200, toolCallAnswer("code_interpreter", `{"code":"x = 1"}`)
			}
			return 200, broken
		})
		e.withGateway(up)
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "go", "tools": ciTool, "stream": true})
		evs := sseEvents(t, r.body)
		last := evs[len(evs)-1]
		out := finalResponse(t, evs)
		errJSON, _ := json.Marshal(last["response"].(map[string]any)["error"])
		if last["type"] != "response.failed" || out.Status != "failed" || !strings.Contains(string(errJSON), "upstream_error") ||
			strings.Contains(string(r.body), "secret") {
			t.Fatalf("%s, streamed: %s", name, r.body)
		}
		e.waitDestroyed(key, out.ID)
		r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "go", "tools": ciTool})
		if er := r.wantError(t, 502, "upstream_error"); strings.Contains(er.Error.Message, "secret") {
			t.Fatalf("%s: leaked: %s", name, r)
		}
	}
}

// TestResponsesUpstreamStall: an upstream that stops sending mid-stream
// fails the response after the idle timeout, not the whole call's.
func TestResponsesUpstreamStall(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		return 200, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, "", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "Thinking"}}}})
			select { // stalls until the gateway gives up
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		}
	})
	e.withGatewayConfig(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m", IdleTimeout: 300 * time.Millisecond})
	r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "hi", "stream": true})
	evs := sseEvents(t, r.body)
	out := finalResponse(t, evs)
	errJSON, _ := json.Marshal(evs[len(evs)-1]["response"].(map[string]any)["error"])
	if out.Status != "failed" || !strings.Contains(string(errJSON), "sent nothing for 300ms") ||
		len(sseOfType(evs, "response.output_text.delta")) != 1 {
		t.Fatalf("stalled stream: %s", r.body)
	}
}

// TestResponsesFailedItemsIncomplete: when the upstream breaks mid-answer,
// every item the client saw added (a message cut short, a client call and
// streaming code with half their arguments, an earlier computer tool
// call) ends "incomplete" with its response.output_item.done before
// response.failed; the stored response says the same, nothing stays
// in_progress.
func TestResponsesFailedItemsIncomplete(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	call := func(index int, id, name, args string) map[string]any {
		return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
			map[string]any{"index": index, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}}}}
	}
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, toolCallAnswer("builtin__computer_exec", `{"command":"echo hi","timeout_seconds":null}`)
		}
		return 200, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, "", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "Half an ans"}}}})
			sse(w, "", call(0, "call_w", "get_weather", `{"ci`))
			sse(w, "", call(1, "call_c", "code_interpreter", `{"code":"print(`))
			// The connection closes: no finish_reason, no [DONE].
		}
	})
	e.withGateway(up)
	tools := append([]any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}},
		map[string]any{"type": "tool", "name": "builtin__computer_exec"}}, ciTool...)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "go", "tools": tools, "stream": true})
	evs := sseEvents(t, r.body)
	out := finalResponse(t, evs)
	if evs[len(evs)-1]["type"] != "response.failed" || out.Status != "failed" || len(out.Output) != 4 {
		t.Fatalf("stream: %s", r.body)
	}
	want := []struct{ typ, status, text string }{
		{"tool_call", "completed", ""},
		{"message", "incomplete", "Half an ans"},
		{"function_call", "incomplete", `{"ci`},
		{"code_interpreter_call", "incomplete", "print("},
	}
	for i, w := range want {
		it := out.Output[i]
		text := map[string]string{"message": "", "function_call": it.Arguments, "code_interpreter_call": it.Code}[w.typ]
		if w.typ == "message" && len(it.Content) == 1 {
			text = it.Content[0].Text
		}
		if it.Type != w.typ || it.Status != w.status || text != w.text {
			t.Fatalf("output[%d] = %+v, want %+v", i, it, w)
		}
	}
	// Each added item is done, with its final status, before response.failed.
	added, done := sseOfType(evs, "response.output_item.added"), sseOfType(evs, "response.output_item.done")
	if len(added) != 4 || len(done) != 4 {
		t.Fatalf("%d added, %d done: %s", len(added), len(done), r.body)
	}
	for _, d := range done {
		i := int(d["output_index"].(float64))
		if st := d["item"].(map[string]any)["status"]; st != want[i].status {
			t.Fatalf("output_item.done %d: status %v", i, st)
		}
	}
	if i := indexOf(evs, "response.content_part.done"); i < 0 || indexOf(evs, "response.output_text.done") > i {
		t.Fatalf("the message's text and part not closed: %s", r.body)
	}
	var stored responseObj
	e.do(key, "GET", "/v1/responses/"+out.ID, nil).json(t, &stored)
	for i, w := range want {
		if stored.Output[i].Status != w.status {
			t.Fatalf("stored output[%d]: %+v", i, stored.Output[i])
		}
	}
	e.waitDestroyed(key, out.ID)
}
