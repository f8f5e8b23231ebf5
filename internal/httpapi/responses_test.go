package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/gateway"
)

// scripted is an OpenAI-compatible upstream answering /v1/chat/completions
// from a script: step gets the request's messages and returns the answer.
type scripted struct {
	mu       sync.Mutex
	calls    int
	requests []map[string]any
	srv      *httptest.Server
}

func newScripted(t *testing.T, step func(call int, req map[string]any) (int, any)) *scripted {
	s := &scripted{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != "POST" {
			http.Error(w, "no route", 404)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req map[string]any
		json.Unmarshal(b, &req)
		s.mu.Lock()
		s.calls++
		n := s.calls
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		code, body := step(n, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func chatAnswer(msg map[string]any) map[string]any {
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
}

func toolCallAnswer(name, args string) map[string]any {
	return chatAnswer(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": args}}}})
}

// lastToolMessage is the content of the last role:"tool" message ("": none).
func lastToolMessage(req map[string]any) string {
	msgs, _ := req["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "tool" {
			s, _ := m["content"].(string)
			return s
		}
	}
	return ""
}

// sixTimesSeven: a code_interpreter call, then the answer once the tool
// message holds 42.
func sixTimesSeven(t *testing.T) *scripted {
	return newScripted(t, func(n int, req map[string]any) (int, any) {
		if lastToolMessage(req) == "" {
			return 200, toolCallAnswer("code_interpreter", `{"code":"print(6*7)"}`)
		}
		if strings.Contains(lastToolMessage(req), "42") {
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "The answer is 42"})
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "I did not see 42"})
	})
}

func (e *env) withGateway(up *scripted) {
	e.api.SetGateway(gateway.New(gateway.Config{UpstreamURL: up.srv.URL + "/v1", Model: "test-model"}, e.mgr))
}

type respItem struct {
	Type        string             `json:"type"`
	ID          string             `json:"id"`
	Status      string             `json:"status"`
	ContainerID string             `json:"container_id"`
	Code        string             `json:"code"`
	Outputs     *[]json.RawMessage `json:"outputs"`
	Name        string             `json:"name"`
	CallID      string             `json:"call_id"`
	Arguments   string             `json:"arguments"`
	Content     []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type responseObj struct {
	ID     string     `json:"id"`
	Object string     `json:"object"`
	Status string     `json:"status"`
	Model  string     `json:"model"`
	Output []respItem `json:"output"`
	Usage  struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

var ciTool = []any{map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}}}

func (e *env) computersOf(key, responseID string) []view {
	r := e.do(key, "GET", "/v1/computers?status=all&response_id="+responseID, nil)
	if r.code != 200 {
		e.t.Fatalf("list computers: %s", r)
	}
	var l struct {
		Data []view `json:"data"`
	}
	r.json(e.t, &l)
	return l.Data
}

func TestResponsesCodeInterpreter(t *testing.T) {
	e := newEnv(t, nil)
	up := sixTimesSeven(t)
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)

	for _, include := range []bool{false, true} {
		body := map[string]any{"model": "m1", "input": "What is 6*7? Use code.", "tools": ciTool}
		if include {
			body["include"] = []string{"code_interpreter_call.outputs"}
			body["input"] = []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "What is 6*7?"}}}}
		}
		r := e.do(key, "POST", "/v1/responses", body)
		if r.code != 200 {
			t.Fatalf("create response: %s", r)
		}
		var out responseObj
		r.json(t, &out)
		if !strings.HasPrefix(out.ID, "resp_") || out.Object != "response" || out.Status != "completed" || out.Model != "m1" {
			t.Fatalf("response: %s", r)
		}
		if len(out.Output) != 2 || out.Output[0].Type != "code_interpreter_call" || out.Output[1].Type != "message" {
			t.Fatalf("output items: %s", r)
		}
		ci, msg := out.Output[0], out.Output[1]
		if !strings.HasPrefix(ci.ContainerID, "cmp_") || ci.Code != "print(6*7)" || ci.Status != "completed" {
			t.Fatalf("code_interpreter_call: %s", r)
		}
		if len(msg.Content) != 1 || msg.Content[0].Type != "output_text" || msg.Content[0].Text != "The answer is 42" {
			t.Fatalf("message: %s", r)
		}
		if out.Usage.InputTokens != 20 || out.Usage.OutputTokens != 10 || out.Usage.TotalTokens != 30 {
			t.Fatalf("usage: %s", r)
		}
		if !include {
			if ci.Outputs != nil {
				t.Fatalf("outputs without include: %s", r)
			}
		} else {
			if ci.Outputs == nil || len(*ci.Outputs) != 1 {
				t.Fatalf("outputs with include: %s", r)
			}
			var o struct{ Type, Logs string }
			json.Unmarshal((*ci.Outputs)[0], &o)
			if o.Type != "logs" || o.Logs != "42" {
				t.Fatalf("outputs: %s", r)
			}
		}
		cs := e.computersOf(key, out.ID)
		if len(cs) != 1 || cs[0].ID != ci.ContainerID || cs[0].Status != "destroyed" {
			t.Fatalf("computer of the response: %+v", cs)
		}
	}
	// The upstream saw code_interpreter as a strict function.
	tl, _ := up.requests[0]["tools"].([]any)
	if len(tl) != 1 {
		t.Fatalf("upstream tools: %v", up.requests[0]["tools"])
	}
	fn := tl[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "code_interpreter" || fn["strict"] != true {
		t.Fatalf("upstream tool: %v", fn)
	}
}

func TestResponsesComputerNotConfigured(t *testing.T) {
	e := newEnv(t, nil)
	up := sixTimesSeven(t)
	e.withGateway(up)
	_, key := e.newKey("", `{}`)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "hi", "tools": ciTool})
	er := r.wantError(t, 400, "computer_not_configured")
	if er.Error.Message != "This tool is not configured on this deployment." || er.Error.Param == nil || *er.Error.Param != "tools" {
		t.Fatalf("error: %s", r)
	}
	if up.count() != 0 {
		t.Fatalf("upstream got %d calls, want 0", up.count())
	}
}

func TestResponsesValidation(t *testing.T) {
	e := newEnv(t, nil)
	up := sixTimesSeven(t)
	_, key := e.newKey("", computerCaps)
	// Without a gateway: a clear 503.
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "hi"})
	if er := r.wantError(t, 503, "gateway_not_configured"); !strings.Contains(er.Error.Message, "no upstream is configured") {
		t.Fatalf("no gateway: %s", r)
	}
	e.withGateway(up)
	for _, c := range []struct {
		body  string
		param string
	}{
		{`{"model":"m","input":"hi","temperature":0.2}`, "temperature"},
		{`{"model":"m","input":"hi","previous_response_id":"resp_x"}`, "previous_response_id"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":"cntr_1"}]}`, "tools[0].container"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto","file_ids":["f"]}}]}`, "tools[0].container"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"},"memory_limit":"1g"}]}`, "tools[0].memory_limit"},
		{`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}},{"type":"function","name":"code_interpreter","parameters":{}}]}`, "tools"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].image_url"},
		{`{"model":"m","input":"hi","include":["reasoning.encrypted_content"]}`, "include[0]"},
	} {
		r := e.do(key, "POST", "/v1/responses", c.body)
		er := r.wantError(t, 400, "")
		if er.Error.Param == nil || *er.Error.Param != c.param {
			t.Fatalf("%s: param, want %q: %s", c.body, c.param, r)
		}
	}
	if up.count() != 0 {
		t.Fatalf("upstream got %d calls for invalid requests", up.count())
	}
}

func TestResponsesClientFunction(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		return 200, toolCallAnswer("get_weather", `{"city":"Paris"}`)
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "weather?", "tools": append([]any{
		map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}}}}}, ciTool...)})
	if r.code != 200 {
		t.Fatalf("create: %s", r)
	}
	var out responseObj
	r.json(t, &out)
	if len(out.Output) != 1 || out.Output[0].Type != "function_call" || out.Output[0].Name != "get_weather" ||
		out.Output[0].CallID != "call_1" || out.Output[0].Arguments != `{"city":"Paris"}` {
		t.Fatalf("output: %s", r)
	}
	if up.count() != 1 {
		t.Fatalf("upstream calls %d, want 1", up.count())
	}
}

func TestResponsesUpstreamError(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, toolCallAnswer("code_interpreter", `{"code":"x = 1"}`)
		}
		return 500, map[string]any{"error": map[string]any{"message": "secret upstream detail"}}
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "go", "tools": ciTool,
		"metadata": map[string]string{"k": "v"}})
	er := r.wantError(t, 502, "upstream_error")
	if strings.Contains(er.Error.Message, "secret") {
		t.Fatalf("upstream detail leaked: %s", r)
	}
	// The response's computer is gone.
	cr := e.do(key, "GET", "/v1/computers?status=all", nil)
	var l struct {
		Data []view `json:"data"`
	}
	cr.json(t, &l)
	if len(l.Data) != 1 || l.Data[0].Status != "destroyed" {
		t.Fatalf("computers after an upstream failure: %s", cr)
	}
}

func TestResponsesStreaming(t *testing.T) {
	e := newEnv(t, nil)
	e.withGateway(sixTimesSeven(t))
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": ciTool, "stream": true})
	if r.code != 200 || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %s", r)
	}
	var types []string
	var last map[string]any
	for _, block := range strings.Split(strings.TrimSpace(string(r.body)), "\n\n") {
		var name, data string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		if ev["type"] != name || ev["sequence_number"] != float64(len(types)) {
			t.Fatalf("event %d: %s %s", len(types), name, data)
		}
		types = append(types, name)
		last = ev
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.code_interpreter_call.in_progress",
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
		"response.code_interpreter_call.interpreting", "response.code_interpreter_call.completed",
		"response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(types, "\n"), strings.Join(want, "\n"))
	}
	b, _ := json.Marshal(last["response"])
	var out responseObj
	json.Unmarshal(b, &out)
	if out.Status != "completed" || len(out.Output) != 2 || out.Output[1].Content[0].Text != "The answer is 42" {
		t.Fatalf("final response: %s", b)
	}
	if cs := e.computersOf(key, out.ID); len(cs) != 1 || cs[0].Status != "destroyed" {
		t.Fatalf("computer after the stream: %+v", cs)
	}
}

func TestResponsesStreamingUpstreamError(t *testing.T) {
	e := newEnv(t, nil)
	e.withGateway(newScripted(t, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, toolCallAnswer("code_interpreter", `{"code":"x = 1"}`)
		}
		return 500, map[string]any{"error": "boom"}
	}))
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "go", "tools": ciTool, "stream": true})
	blocks := strings.Split(strings.TrimSpace(string(r.body)), "\n\n")
	lastBlock := blocks[len(blocks)-1]
	if r.code != 200 || !strings.HasPrefix(lastBlock, "event: response.failed\n") || !strings.Contains(lastBlock, `"upstream_error"`) {
		t.Fatalf("stream: %s", r)
	}
	cr := e.do(key, "GET", "/v1/computers?status=all", nil)
	var l struct {
		Data []view `json:"data"`
	}
	cr.json(t, &l)
	if len(l.Data) != 1 || l.Data[0].Status != "destroyed" {
		t.Fatalf("computers after a failed stream: %s", cr)
	}
}
