package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// newScripted is a scripted Chat Completions upstream (see scripted).
func newScripted(t *testing.T, step func(call int, req map[string]any) (int, any)) *scripted {
	return newScriptedAPI(t, responses.APIChat, step)
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
func sixTimesSeven(t *testing.T) *scripted { return newScripted(t, sixTimesSevenStep) }

func sixTimesSevenStep(n int, req map[string]any) (int, any) {
	if lastToolMessage(req) == "" {
		return 200, toolCallAnswer("code_interpreter", `{"code":"print(6*7)"}`)
	}
	if strings.Contains(lastToolMessage(req), "42") {
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "The answer is 42"})
	}
	return 200, chatAnswer(map[string]any{"role": "assistant", "content": "I did not see 42"})
}

func (e *env) withGateway(up *scripted) {
	e.withGatewayConfig(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "test-model"})
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
	Output      string             `json:"output"`
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
		e.waitDestroyed(key, out.ID) // deleted after the answer was sent
		if cs := e.computersOf(key, out.ID); cs[0].ID != ci.ContainerID {
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
		{`{"model":"m","input":"hi","temperature":2.5}`, "temperature"},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation"},
		{`{"model":"m","input":"hi","previous_response_id":"resp_x"}`, "previous_response_id"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":"cntr_1"}]}`, "tools[0].container"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"2g"}}]}`, "tools[0].container.memory_limit"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":"ctr_1"}]}`, "tools[0].container"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"manual"}}]}`, "tools[0].container"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"},"memory_limit":"1g"}]}`, "tools[0].memory_limit"},
		{`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}},{"type":"function","name":"code_interpreter","parameters":{}}]}`, "tools"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].image_url"},
		{`{"model":"m","input":"hi","include":["code_interpreter_call.logs"]}`, "include[0]"},
		{`{"model":"m","input":"hi","tools":[{"type":"tool","name":"builtin__computer_*"},{"type":"function","name":"builtin__computer_exec","parameters":{}}]}`, "tools"},
		{`{"model":"m","input":"hi","tools":[{"type":"tool","name":"builtin__nothing"}]}`, "tools[0].name"},
		{`{"model":"m","input":"hi","tools":[{"type":"tool","name":"python","strict":true}]}`, "tools[0].strict"},
		{`{"model":"m","input":"hi","parallel_tool_calls":"yes"}`, "parallel_tool_calls"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"http://x"}]}]}`, "input[0].content[0].file_url"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file"}]}]}`, "input[0].content[0]"},
	} {
		r := e.do(key, "POST", "/v1/responses", c.body)
		er := r.wantError(t, 400, "")
		if er.Error.Param == nil || *er.Error.Param != c.param {
			t.Fatalf("%s: param, want %q: %s", c.body, c.param, r)
		}
		if c.param == "input[0].content[0].file_url" && !strings.Contains(er.Error.Message, "fetches no URL") {
			t.Fatalf("file_url: the message says why: %s", r)
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
	eventually(t, 30*time.Second, "the computer destroyed after an upstream failure", func() bool {
		var l struct {
			Data []view `json:"data"`
		}
		e.do(key, "GET", "/v1/computers?status=all", nil).json(t, &l)
		return len(l.Data) == 1 && l.Data[0].Status == "destroyed"
	})
}

func TestResponsesStreaming(t *testing.T) {
	e := newEnv(t, nil)
	e.withGateway(sixTimesSeven(t))
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": ciTool, "stream": true})
	if r.code != 200 || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %s", r)
	}
	evs := sseEvents(t, r.body)
	if len(evs) == 0 {
		t.Fatalf("no events: %s", r)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev["type"].(string))
	}
	last := evs[len(evs)-1]
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.code_interpreter_call.in_progress",
		// The upstream streams the arguments {"code":"print(6*7)"} in 4-byte
		// fragments: the code arrives as "pri", "nt(6", "*7)".
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.delta",
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
		"response.code_interpreter_call.interpreting", "response.code_interpreter_call.completed",
		"response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		// The upstream streams "The answer is 42" word by word.
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
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
	e.waitDestroyed(key, out.ID)
}

// streamFailingAfterToolCall streams a response whose upstream asks for
// one code_interpreter call, then fails (500).
func streamFailingAfterToolCall(t *testing.T) (e *env, key string, r resp) {
	t.Helper()
	e = newEnv(t, nil)
	e.withGateway(newScripted(t, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, toolCallAnswer("code_interpreter", `{"code":"x = 1"}`)
		}
		return 500, map[string]any{"error": "boom"}
	}))
	_, key = e.newKey("", computerCaps)
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "go", "tools": ciTool, "stream": true})
	return e, key, r
}

func TestResponsesStreamingUpstreamError(t *testing.T) {
	e, key, r := streamFailingAfterToolCall(t)
	blocks := strings.Split(strings.TrimSpace(string(r.body)), "\n\n")
	lastBlock := blocks[len(blocks)-1]
	if r.code != 200 || !strings.HasPrefix(lastBlock, "event: response.failed\n") || !strings.Contains(lastBlock, `"upstream_error"`) {
		t.Fatalf("stream: %s", r)
	}
	eventually(t, 30*time.Second, "the computer destroyed after a failed stream", func() bool {
		var l struct {
			Data []view `json:"data"`
		}
		e.do(key, "GET", "/v1/computers?status=all", nil).json(t, &l)
		return len(l.Data) == 1 && l.Data[0].Status == "destroyed"
	})
}

// withFilesGateway wires a gateway copying input files: the env must be
// built withFiles.
func (e *env) withFilesGateway(up *scripted) {
	e.withFilesGatewayConfig(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "test-model"})
}

// withFilesGatewayConfig is withFilesGateway with any gateway config.
func (e *env) withFilesGatewayConfig(cfg responses.Config) {
	if e.files == nil {
		e.t.Fatal("withFilesGateway needs an env built withFiles")
	}
	e.withGatewayConfig(cfg)
}

// toolCallsAnswer is one assistant turn with several tool calls
// (name, arguments pairs), ids call_1, call_2, ….
func toolCallsAnswer(nameArgs ...string) map[string]any {
	var calls []any
	for i := 0; i+1 < len(nameArgs); i += 2 {
		calls = append(calls, map[string]any{"id": "call_" + string(rune('1'+i/2)), "type": "function",
			"function": map[string]any{"name": nameArgs[i], "arguments": nameArgs[i+1]}})
	}
	return chatAnswer(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
}

// toolMessages are the contents of the role:"tool" messages, in order.
func toolMessages(req map[string]any) []string {
	var out []string
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		if mm["role"] == "tool" {
			s, _ := mm["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

func upstreamToolNames(req map[string]any) []string {
	var names []string
	tl, _ := req["tools"].([]any)
	for _, t := range tl {
		fn, _ := t.(map[string]any)["function"].(map[string]any)
		if fn["strict"] != true {
			return append(names, "NOT STRICT")
		}
		names = append(names, fn["name"].(string))
	}
	return names
}

func TestResponsesComputerTools(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		tm := toolMessages(req)
		if len(tm) == 0 {
			return 200, toolCallsAnswer(
				"builtin__computer_write_file", `{"path":"note.txt","content":"hello from the gateway"}`,
				"builtin__computer_exec", `{"command":"cat /workspace/note.txt","timeout_seconds":null}`)
		}
		if len(tm) == 2 && strings.Contains(tm[1], "hello from the gateway") {
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "The file says hello"})
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "unexpected: " + strings.Join(tm, " | ")})
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)

	for i, tl := range [][]any{
		{map[string]any{"type": "tool", "name": "builtin__computer_write_file"},
			map[string]any{"type": "tool", "name": "builtin__computer_exec"},
			map[string]any{"type": "tool", "name": "python"}},
		{map[string]any{"type": "tool", "name": "builtin__computer_*"}, map[string]any{"type": "tool", "name": "builtin__computer_exec"}},
	} {
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "write and read a file",
			"tools": tl, "parallel_tool_calls": false})
		if r.code != 200 {
			t.Fatalf("create: %s", r)
		}
		var out responseObj
		r.json(t, &out)
		if out.Status != "completed" || len(out.Output) != 3 {
			t.Fatalf("response: %s", r)
		}
		w, x, msg := out.Output[0], out.Output[1], out.Output[2]
		if w.Type != "tool_call" || w.Name != "builtin__computer_write_file" || w.Status != "completed" ||
			!strings.HasPrefix(w.ContainerID, "cmp_") || !strings.Contains(w.Arguments, "note.txt") {
			t.Fatalf("write_file item: %s", r)
		}
		if x.Type != "tool_call" || x.Name != "builtin__computer_exec" || x.Status != "completed" ||
			x.ContainerID != w.ContainerID || !strings.Contains(x.Output, "hello from the gateway") {
			t.Fatalf("exec item: %s", r)
		}
		if msg.Type != "message" || len(msg.Content) != 1 || msg.Content[0].Text != "The file says hello" {
			t.Fatalf("message: %s", r)
		}
		var raw map[string]any
		r.json(t, &raw)
		if raw["parallel_tool_calls"] != false {
			t.Fatalf("parallel_tool_calls: %s", r)
		}
		e.waitDestroyed(key, out.ID)
		if cs := e.computersOf(key, out.ID); cs[0].ID != w.ContainerID {
			t.Fatalf("computer of the response: %+v", cs)
		}
		req := up.requests[2*i]
		want := "builtin__computer_write_file,builtin__computer_exec,python"
		if i == 1 {
			want = "builtin__computer_exec,builtin__computer_write_file,builtin__computer_read_file"
		}
		if got := strings.Join(upstreamToolNames(req), ","); got != want {
			t.Fatalf("upstream tools %s, want %s", got, want)
		}
		if req["parallel_tool_calls"] != false {
			t.Fatalf("upstream parallel_tool_calls: %v", req["parallel_tool_calls"])
		}
	}
}

func TestResponsesInputFile(t *testing.T) {
	e := newEnv(t, nil, withFiles)
	var fileID string
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		tm := toolMessages(req)
		if len(tm) == 0 {
			return 200, toolCallAnswer("builtin__computer_exec",
				`{"command":"cat /workspace/inputs/`+fileID+`/data.csv","timeout_seconds":null}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "done"})
	})
	e.withFilesGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.doCtx(t.Context(), key, "POST", "/v1/files?filename=data.csv", []byte("a,b\n1,2\n"),
		map[string]string{"Content-Type": "application/octet-stream"})
	if r.code != 200 {
		t.Fatalf("upload: %s", r)
	}
	var f struct {
		ID string `json:"id"`
	}
	r.json(t, &f)
	fileID = f.ID
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m",
		"tools": []any{map[string]any{"type": "tool", "name": "builtin__computer_exec"}},
		"input": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_text", "text": "Sum column b."},
			map[string]any{"type": "input_file", "file_id": fileID},
			map[string]any{"type": "input_file", "file_id": "file_doesnotexist"}}}}})
	if r.code != 200 {
		t.Fatalf("create: %s", r)
	}
	var out responseObj
	r.json(t, &out)
	if len(out.Output) != 2 || out.Output[0].Type != "tool_call" || !strings.Contains(out.Output[0].Output, "a,b\n1,2") {
		t.Fatalf("exec of the input file: %s", r)
	}
	// The model was told where the file is, once, after the round's tool messages.
	path := "/workspace/inputs/" + fileID + "/data.csv"
	msgs := up.requests[1]["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "system" || last["content"] != responses.InputsNotePrefix+path {
		t.Fatalf("system note: %v", last)
	}
	first := up.requests[0]["messages"].([]any)
	if len(first) != 1 || first[0].(map[string]any)["content"] != "Sum column b." {
		t.Fatalf("first upstream messages: %v", first)
	}
}

func TestResponsesComputerToolsNotConfigured(t *testing.T) {
	e := newEnv(t, nil)
	up := sixTimesSeven(t)
	e.withGateway(up)
	_, key := e.newKey("", `{}`)
	for _, name := range []string{"builtin__computer_exec", "builtin__computer_*", "python"} {
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "hi",
			"tools": []any{map[string]any{"type": "tool", "name": name}}})
		er := r.wantError(t, 400, "computer_not_configured")
		if er.Error.Message != "This tool is not configured on this deployment." || er.Error.Param == nil || *er.Error.Param != "tools" {
			t.Fatalf("%s: %s", name, r)
		}
	}
	if up.count() != 0 {
		t.Fatalf("upstream got %d calls, want 0", up.count())
	}
}

// sseEvents parses an SSE body into its events with the API client's
// reader, checking names and contiguous sequence numbers.
func sseEvents(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var evs []map[string]any
	r := client.NewEventReader(bytes.NewReader(body), 0, 0)
	for {
		sev, err := r.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("event stream after %d events: %v", len(evs), err)
		}
		var ev map[string]any
		if err := json.Unmarshal(sev.Data, &ev); err != nil {
			t.Fatalf("event data %q: %v", sev.Data, err)
		}
		if ev["type"] != sev.Name || ev["sequence_number"] != float64(len(evs)) {
			t.Fatalf("event %d: %s %s", len(evs), sev.Name, sev.Data)
		}
		evs = append(evs, ev)
	}
}

func TestResponsesComputerToolsStreaming(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if len(toolMessages(req)) == 0 {
			return 200, toolCallAnswer("builtin__computer_exec", `{"command":"echo streamed","timeout_seconds":null}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "ok"})
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "echo", "stream": true,
		"tools": []any{map[string]any{"type": "tool", "name": "builtin__computer_*"}}})
	if r.code != 200 {
		t.Fatalf("stream: %s", r)
	}
	evs := sseEvents(t, r.body)
	var types []string
	for _, ev := range evs {
		types = append(types, ev["type"].(string))
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("events:\n%s", strings.Join(types, "\n"))
	}
	added, _ := evs[2]["item"].(map[string]any)
	done, _ := evs[3]["item"].(map[string]any)
	if added["type"] != "tool_call" || added["status"] != "in_progress" || added["output"] != "" ||
		done["type"] != "tool_call" || done["status"] != "completed" || done["name"] != "builtin__computer_exec" ||
		!strings.Contains(done["output"].(string), "streamed") || evs[3]["output_index"] != float64(0) {
		t.Fatalf("tool_call events: %v / %v", evs[2], evs[3])
	}
}

// plotScript: one code_interpreter call plotting with matplotlib, then a
// final answer.
func plotScript(t *testing.T) *scripted {
	return newScripted(t, func(n int, req map[string]any) (int, any) {
		if lastToolMessage(req) == "" {
			return 200, toolCallAnswer("code_interpreter",
				`{"code":"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "plotted"})
	})
}

// imageURLs returns the image output urls of the response's
// code_interpreter_call items.
func imageURLs(t *testing.T, out responseObj) []string {
	t.Helper()
	var urls []string
	for _, it := range out.Output {
		if it.Type != "code_interpreter_call" || it.Outputs == nil {
			continue
		}
		for _, raw := range *it.Outputs {
			var o struct {
				Type string `json:"type"`
				URL  string `json:"url"`
			}
			json.Unmarshal(raw, &o)
			if o.Type == "image" {
				urls = append(urls, o.URL)
			}
		}
	}
	return urls
}

// TestResponsesImageArtifacts: with the artifacts capability an image
// output's url is the artifact's content (a PNG); without it, a data URL.
func TestResponsesImageArtifacts(t *testing.T) {
	t.Run("public URL", func(t *testing.T) {
		e := newEnv(t, nil, withFiles)
		up := plotScript(t)
		e.withFilesGatewayConfig(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "test-model", PublicURL: "https://cubicle.example.com"})
		_, key := e.newKey("", computerCaps)
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "plot", "tools": ciTool,
			"include": []any{"code_interpreter_call.outputs"}})
		var out responseObj
		r.json(t, &out)
		if urls := imageURLs(t, out); len(urls) != 1 || !strings.HasPrefix(urls[0], "https://cubicle.example.com/v1/artifacts/art_") {
			t.Fatalf("image urls %q: %s", urls, r)
		}
	})
	e := newEnv(t, nil, withFiles)
	e.withFilesGateway(plotScript(t))
	body := map[string]any{"model": "m", "input": "plot", "tools": ciTool,
		"include": []any{"code_interpreter_call.outputs"}}
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", body)
	if r.code != 200 {
		t.Fatalf("create: %s", r)
	}
	var out responseObj
	r.json(t, &out)
	// An absolute URL: the request's origin (no public URL configured).
	urls := imageURLs(t, out)
	if len(urls) != 1 || !strings.HasPrefix(urls[0], e.url+"/v1/artifacts/art_") || !strings.HasSuffix(urls[0], "/content") {
		t.Fatalf("image urls %q: %s", urls, r)
	}
	c := e.do(key, "GET", strings.TrimPrefix(urls[0], e.url), nil)
	if c.code != 200 || !bytes.HasPrefix(c.body, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("artifact content: %d %.40q", c.code, c.body)
	}

	_, noArt := e.newKey("", `{"tooling":{"system_tools":["computer"]},"computer":{},"files":{}}`)
	r = e.do(noArt, "POST", "/v1/responses", body)
	if r.code != 200 {
		t.Fatalf("create without artifacts: %s", r)
	}
	out = responseObj{}
	r.json(t, &out)
	urls = imageURLs(t, out)
	if len(urls) != 1 || !strings.HasPrefix(urls[0], "data:image/png;base64,") {
		t.Fatalf("image urls without artifacts %.80q", urls)
	}
}

// TestResponsesStore: store (default true) keeps the response for GET,
// org-scoped; DELETE removes it; store:false keeps nothing.
func TestResponsesStore(t *testing.T) {
	e := newEnv(t, nil)
	e.withGateway(sixTimesSeven(t))
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": ciTool})
	if r.code != 200 {
		t.Fatalf("create: %s", r)
	}
	var out responseObj
	r.json(t, &out)
	var flags struct {
		Store bool `json:"store"`
	}
	r.json(t, &flags)
	if !flags.Store {
		t.Fatalf("store not echoed: %s", r)
	}
	g := e.do(key, "GET", "/v1/responses/"+out.ID, nil)
	if g.code != 200 {
		t.Fatalf("get: %s", g)
	}
	var got responseObj
	g.json(t, &got)
	if got.ID != out.ID || got.Status != "completed" || len(got.Output) != len(out.Output) ||
		got.Output[len(got.Output)-1].Content[0].Text != "The answer is 42" {
		t.Fatalf("stored response: %s", g)
	}
	// Another organisation sees nothing.
	_, other := e.newKey(e.newOrg("other", true), computerCaps)
	if g := e.do(other, "GET", "/v1/responses/"+out.ID, nil); g.code != 404 {
		t.Fatalf("cross-org get: %s", g)
	}
	if d := e.do(other, "DELETE", "/v1/responses/"+out.ID, nil); d.code != 404 {
		t.Fatalf("cross-org delete: %s", d)
	}
	d := e.do(key, "DELETE", "/v1/responses/"+out.ID, nil)
	var del map[string]any
	d.json(t, &del)
	if d.code != 200 || del["id"] != out.ID || del["object"] != "response" || del["deleted"] != true || len(del) != 3 {
		t.Fatalf("delete: %s", d)
	}
	if g := e.do(key, "GET", "/v1/responses/"+out.ID, nil); g.code != 404 {
		t.Fatalf("get after delete: %s", g)
	}
	if d := e.do(key, "DELETE", "/v1/responses/"+out.ID, nil); d.code != 404 {
		t.Fatalf("second delete: %s", d)
	}

	// store: false keeps nothing.
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": ciTool, "store": false})
	if r.code != 200 {
		t.Fatalf("create store:false: %s", r)
	}
	out = responseObj{}
	r.json(t, &out)
	flags.Store = true
	r.json(t, &flags)
	if flags.Store {
		t.Fatalf("store:false echoed as true: %s", r)
	}
	if g := e.do(key, "GET", "/v1/responses/"+out.ID, nil); g.code != 404 {
		t.Fatalf("get store:false: %s", g)
	}
}

// TestResponsesDeleteAfterAnswer: the response's computer is deleted after
// the answer was sent (Server-Timing has no delete), and the gateway's
// Close (server shutdown) waits for that delete.
func TestResponsesDeleteAfterAnswer(t *testing.T) {
	e := newEnv(t, nil)
	e.withGateway(sixTimesSeven(t))
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": ciTool})
	var out responseObj
	r.json(t, &out)
	st := r.hdr.Get("Server-Timing")
	if r.code != 200 || out.Status != "completed" || strings.Contains(st, "delete") ||
		!strings.Contains(st, "create;dur=") || !strings.Contains(st, "total;dur=") {
		t.Fatalf("answer: %s, Server-Timing %q", r, st)
	}
	t.Logf("Server-Timing: %s", st)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := e.gw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if cs := e.computersOf(key, out.ID); len(cs) != 1 || cs[0].Status != "destroyed" {
		t.Fatalf("computer once the gateway closed: %+v", cs)
	}
}

// TestResponsesMaxRounds: a model that keeps calling tools stops after
// the configured round limit, incomplete with reason max_rounds.
func TestResponsesMaxRounds(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		return 200, toolCallAnswer("code_interpreter", `{"code":"print(1)"}`)
	})
	e.withGatewayConfig(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m", MaxRounds: 2})
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "loop", "tools": ciTool})
	var out struct {
		responseObj
		IncompleteDetails struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	r.json(t, &out)
	if r.code != 200 || out.Status != "incomplete" || out.IncompleteDetails.Reason != "max_rounds" || len(out.Output) != 2 || up.count() != 2 {
		t.Fatalf("after %d upstream calls: %s", up.count(), r)
	}
}
