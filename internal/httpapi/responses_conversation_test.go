package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// roles renders an upstream request's messages compactly:
// role[:content][>tool names] each, "|"-separated.
func roles(req map[string]any) string {
	var out []string
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		s := fmt.Sprint(mm["role"])
		if c, ok := mm["content"].(string); ok && mm["role"] != "tool" && mm["role"] != "system" {
			s += ":" + c
		}
		calls, _ := mm["tool_calls"].([]any)
		for _, c := range calls {
			s += ">" + fmt.Sprint(c.(map[string]any)["function"].(map[string]any)["name"])
		}
		out = append(out, s)
	}
	return strings.Join(out, "|")
}

// TestResponsesPreviousResponse: previous_response_id replays the chain
// (inputs, gateway calls as function call + output, answers), copies the
// earlier artifacts into the new computer, and refuses what it cannot
// continue before any upstream call.
func TestResponsesPreviousResponse(t *testing.T) {
	for _, api := range []string{responses.APIChat, responses.APIResponses} {
		t.Run(api, func(t *testing.T) { testPreviousResponse(t, api) })
	}
}

func testPreviousResponse(t *testing.T, api string) {
	e := newEnv(t, nil, withFiles)
	var step string
	up := newScriptedAPI(t, api, func(n int, req map[string]any) (int, any) {
		switch step {
		case "plot":
			if lastToolMessage(req) == "" {
				return 200, toolCallAnswer("code_interpreter",
					`{"code":"x = 41\nimport matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.show()"}`)
			}
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "plotted"})
		case "again":
			if !strings.Contains(lastToolMessage(req), "artifacts") {
				return 200, toolCallAnswer("code_interpreter",
					`{"code":"import glob\nprint(glob.glob('/workspace/artifacts/*/*'))\nprint('x' in globals())"}`)
			}
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "listed"})
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "third"})
	})
	e.withFilesGatewayConfig(responses.Config{Model: "test-model", Upstreams: []responses.UpstreamConfig{
		{Name: "up", BaseURL: up.srv.URL + "/v1", API: api, Default: true}}})
	_, key := e.newKey("", computerCaps)
	create := func(body map[string]any) responseObj {
		t.Helper()
		r := e.do(key, "POST", "/v1/responses", body)
		if r.code != 200 {
			t.Fatalf("create: %s", r)
		}
		var out responseObj
		r.json(t, &out)
		return out
	}
	step = "plot"
	first := create(map[string]any{"model": "m", "input": "plot", "tools": ciTool, "instructions": "be brief",
		"include": []any{"code_interpreter_call.outputs"}})
	if len(imageURLs(t, first)) != 1 {
		t.Fatalf("first response: %+v", first)
	}
	step = "again"
	second := create(map[string]any{"model": "m", "input": "list your files", "tools": ciTool, "previous_response_id": first.ID})
	if len(second.Output) != 2 || second.Output[1].Content[0].Text != "listed" {
		t.Fatalf("second response: %+v", second)
	}
	// The upstream saw the first exchange replayed (instructions do not
	// carry over), the gateway call as a function call and its output.
	req := up.requests[2]
	if got := roles(req); got != "user:plot|assistant>code_interpreter|tool|assistant:plotted|user:list your files" {
		t.Fatalf("replayed conversation: %s", got)
	}
	if tm := toolMessages(req); len(tm) != 1 || !strings.HasPrefix(tm[0], "[image: ") {
		t.Fatalf("replayed tool output: %q", tm)
	}
	// The plot (an artifact of the first response) was in the new
	// computer; Python state was not.
	after := up.requests[3]
	out := lastToolMessage(after)
	if !strings.Contains(out, "/workspace/artifacts/art_") || !strings.HasSuffix(strings.TrimSpace(out), "False") {
		t.Fatalf("second computer: %q", out)
	}
	msgs := after["messages"].([]any)
	note := msgs[len(msgs)-1].(map[string]any)
	if note["role"] != "system" || !strings.HasPrefix(note["content"].(string), responses.ArtifactsNotePrefix+"/workspace/artifacts/art_") {
		t.Fatalf("artifacts note: %v", note)
	}

	// A chain of three: everything before is replayed, in order.
	step = "third"
	third := create(map[string]any{"model": "m", "input": "and now?", "previous_response_id": second.ID})
	if third.Output[0].Content[0].Text != "third" {
		t.Fatalf("third: %+v", third)
	}
	want := "user:plot|assistant>code_interpreter|tool|assistant:plotted|user:list your files|" +
		"assistant>code_interpreter|tool|system|assistant:listed|user:and now?"
	if got := roles(up.requests[4]); got != want {
		t.Fatalf("third conversation:\n%s\nwant\n%s", got, want)
	}

	// What cannot be continued is a 400 before any upstream call.
	calls := up.count()
	notStored := create(map[string]any{"model": "m", "input": "x", "store": false})
	_, other := e.newKey(e.newOrg("other", true), computerCaps)
	for _, c := range []struct{ key, id string }{{key, "resp_unknown"}, {key, notStored.ID}, {other, first.ID}} {
		r := e.do(c.key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "x", "previous_response_id": c.id})
		er := r.wantError(t, 400, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != "previous_response_id" || !strings.Contains(er.Error.Message, "not found") {
			t.Fatalf("previous %s: %s", c.id, r)
		}
	}
	if up.count() != calls+1 {
		t.Fatalf("upstream calls %d, want %d", up.count(), calls+1)
	}
}

// TestResponsesContinueClientFunction: a client function call continued
// with previous_response_id and its function_call_output.
func TestResponsesContinueClientFunction(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, toolCallAnswer("get_weather", `{"city":"Paris"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "It is " + lastToolMessage(req)})
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	fn := []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "weather?", "tools": fn})
	var first responseObj
	r.json(t, &first)
	if r.code != 200 || first.Output[0].Type != "function_call" {
		t.Fatalf("first: %s", r)
	}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "tools": fn, "previous_response_id": first.ID,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": first.Output[0].CallID, "output": "sunny"}}})
	var second responseObj
	r.json(t, &second)
	if r.code != 200 || second.Output[0].Content[0].Text != "It is sunny" {
		t.Fatalf("second: %s", r)
	}
	if got := roles(up.requests[1]); got != "user:weather?|assistant>get_weather|tool" {
		t.Fatalf("replayed: %s", got)
	}
	call := up.requests[1]["messages"].([]any)[1].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	if call["id"] != first.Output[0].CallID {
		t.Fatalf("call id: %v", call)
	}
}

// TestResponsesMaxToolCallsClientCall: after max_tool_calls the upstream
// gets tool_choice "none"; a model that still calls a client function
// ends the response incomplete with the call as an item, and the stored
// conversation has the call, so previous_response_id plus its
// function_call_output continues it.
func TestResponsesMaxToolCallsClientCall(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		switch n {
		case 1:
			return 200, toolCallAnswer("code_interpreter", `{"code":"print(6 * 7)"}`)
		case 2:
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "Let me check.", "tool_calls": []any{
				map[string]any{"id": "call_w", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}},
				map[string]any{"id": "call_ci", "type": "function", "function": map[string]any{"name": "code_interpreter", "arguments": `{"code":"1"}`}}}})
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "It is " + lastToolMessage(req)})
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	tools := append([]any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}, ciTool...)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "weather?", "tools": tools, "max_tool_calls": 1})
	var first struct {
		responseObj
		IncompleteDetails struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	r.json(t, &first)
	if r.code != 200 || first.Status != "incomplete" || first.IncompleteDetails.Reason != "max_tool_calls" || len(first.Output) != 3 ||
		first.Output[0].Type != "code_interpreter_call" || first.Output[1].Type != "message" ||
		first.Output[2].Type != "function_call" || first.Output[2].CallID != "call_w" {
		t.Fatalf("first: %s", r)
	}
	if tc := up.requests[1]["tool_choice"]; tc != "none" {
		t.Fatalf("tool_choice after the limit: %v", tc)
	}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "tools": tools, "previous_response_id": first.ID,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_w", "output": "sunny"}}})
	var second responseObj
	r.json(t, &second)
	if r.code != 200 || second.Output[0].Content[0].Text != "It is sunny" {
		t.Fatalf("second: %s", r)
	}
	// The ignored gateway call is not replayed; the client's call is,
	// with the text said before it, followed by its output.
	if got := roles(up.requests[2]); got != "user:weather?|assistant>code_interpreter|tool|assistant:Let me check.>get_weather|tool" {
		t.Fatalf("replayed: %s", got)
	}
	msgs := up.requests[2]["messages"].([]any)
	if id := msgs[len(msgs)-1].(map[string]any)["tool_call_id"]; id != "call_w" {
		t.Fatalf("tool output follows call %v", id)
	}
}

// TestResponsesInputImage: input_image parts reach the upstream as
// image_url parts; a stored file is sent as a data URL; a file that is no
// image is a 400 naming the part.
func TestResponsesInputImage(t *testing.T) {
	e := newEnv(t, nil, withFiles)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "a pixel"})
	})
	e.withFilesGateway(up)
	_, key := e.newKey("", computerCaps)
	upload := func(name string, data []byte) string {
		r := e.doCtx(t.Context(), key, "POST", "/v1/files?filename="+name, data,
			map[string]string{"Content-Type": "application/octet-stream"})
		var f struct {
			ID string `json:"id"`
		}
		r.json(t, &f)
		if r.code != 200 || f.ID == "" {
			t.Fatalf("upload: %s", r)
		}
		return f.ID
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	img, txt := upload("p.png", png), upload("a.txt", []byte("hello"))
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": []any{map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "what is it?"},
			map[string]any{"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
			map[string]any{"type": "input_image", "file_id": img}}}}})
	if r.code != 200 {
		t.Fatalf("create: %s", r)
	}
	parts, _ := json.Marshal(up.requests[0]["messages"].([]any)[0].(map[string]any)["content"])
	want := `[{"text":"what is it?","type":"text"},{"image_url":{"detail":"low","url":"https://example.com/a.png"},"type":"image_url"},` +
		`{"image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="},"type":"image_url"}]`
	if string(parts) != want {
		t.Fatalf("upstream content:\n%s\nwant\n%s", parts, want)
	}
	for _, id := range []string{txt, "file_unknown"} {
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": []any{map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "input_image", "file_id": id}}}}})
		er := r.wantError(t, 400, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != "input[0].content[0].file_id" {
			t.Fatalf("image %s: %s", id, r)
		}
	}
	// A message made only of input_file parts sends no empty user message.
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "instructions": "summarize the file",
		"input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_file", "file_id": txt}}}}})
	if r.code != 400 || up.count() != 1 {
		t.Fatalf("file-only input: %s", r)
	}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": []any{
		map[string]any{"role": "user", "content": "summarize"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_file", "file_id": txt}}}}})
	if r.code != 200 || roles(up.requests[1]) != "user:summarize" {
		t.Fatalf("file-only message: %s %v", r, up.requests[1])
	}
}

// TestResponsesContinueMixedTurn: a turn with a gateway call and a client
// call, continued with the client's output: the note about the input
// files goes before the turn, so the outputs follow their calls.
func TestResponsesContinueMixedTurn(t *testing.T) {
	e := newEnv(t, nil, withFiles)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, toolCallsAnswer("builtin__computer_exec", `{"command":"ls /workspace/inputs","timeout_seconds":null}`,
				"get_weather", `{}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "done"})
	})
	e.withFilesGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.doCtx(t.Context(), key, "POST", "/v1/files?filename=a.txt", []byte("hello"),
		map[string]string{"Content-Type": "application/octet-stream"})
	var f struct {
		ID string `json:"id"`
	}
	r.json(t, &f)
	tools := []any{map[string]any{"type": "tool", "name": "builtin__computer_exec"},
		map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "tools": tools, "input": []any{map[string]any{
		"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "go"},
			map[string]any{"type": "input_file", "file_id": f.ID}}}}})
	var first responseObj
	r.json(t, &first)
	// The client call is an item as soon as the upstream streamed it; the
	// gateway call runs after the upstream's answer.
	if r.code != 200 || len(first.Output) != 2 || first.Output[0].Type != "function_call" || first.Output[1].Type != "tool_call" {
		t.Fatalf("first: %s", r)
	}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "tools": tools, "previous_response_id": first.ID,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_2", "output": "sunny"}}})
	if r.code != 200 {
		t.Fatalf("second: %s", r)
	}
	if got := roles(up.requests[1]); got != "user:go|system|assistant>builtin__computer_exec>get_weather|tool|tool" {
		t.Fatalf("continued turn: %s", got)
	}
}

// TestResponsesContinueFailed: a response that failed (after its stream
// started) is stored but cannot be continued.
func TestResponsesContinueFailed(t *testing.T) {
	e, key, r := streamFailingAfterToolCall(t)
	evs := sseEvents(t, r.body)
	id := evs[0]["response"].(map[string]any)["id"].(string)
	if evs[len(evs)-1]["type"] != "response.failed" {
		t.Fatalf("stream: %s", r)
	}
	if g := e.do(key, "GET", "/v1/responses/"+id, nil); g.code != 200 {
		t.Fatalf("failed response not stored: %s", g)
	}
	r = e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "again", "previous_response_id": id})
	if er := r.wantError(t, 400, "invalid_request"); !strings.Contains(er.Error.Message, "it failed") {
		t.Fatalf("continue a failed response: %s", r)
	}
}

// TestResponsesInputFileData: an input_file sent inline (file_data) is
// stored as a file of the organisation and copied into the computer like
// one sent by id; without the files capability it is a 400.
func TestResponsesInputFileData(t *testing.T) {
	e := newEnv(t, nil, withFiles)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if len(toolMessages(req)) == 0 {
			return 200, toolCallAnswer("builtin__computer_exec", `{"command":"cat /workspace/inputs/*/data.csv","timeout_seconds":null}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "done"})
	})
	e.withFilesGateway(up)
	_, key := e.newKey("", computerCaps)
	body := func(data string) map[string]any {
		return map[string]any{"model": "m", "tools": []any{map[string]any{"type": "tool", "name": "builtin__computer_exec"}},
			"input": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "Sum column b."},
				map[string]any{"type": "input_file", "filename": "data.csv", "file_data": data}}}}}
	}
	r := e.do(key, "POST", "/v1/responses", body("data:text/csv;base64,YSxiCjEsMgo="))
	var out responseObj
	r.json(t, &out)
	if r.code != 200 || out.Output[0].Type != "tool_call" || !strings.Contains(out.Output[0].Output, "a,b\n1,2") {
		t.Fatalf("file_data: %s", r)
	}
	l := e.do(key, "GET", "/v1/files", nil)
	if !strings.Contains(string(l.body), `"filename":"data.csv"`) || !strings.Contains(string(l.body), `"purpose":"`+responses.UploadPurpose+`"`) {
		t.Fatalf("stored file: %s", l)
	}
	_, noFiles := e.newKey("", `{"tooling":{"system_tools":["computer"]},"computer":{}}`)
	r = e.do(noFiles, "POST", "/v1/responses", body("YSxiCjEsMgo="))
	if er := r.wantError(t, 400, "invalid_request"); er.Error.Param == nil || *er.Error.Param != "input[0].content[1].file_data" {
		t.Fatalf("without files: %s", r)
	}
	if up.count() != 2 {
		t.Fatalf("upstream calls %d, want 2", up.count())
	}
}

// TestResponsesKernelStateAndRecovery: an error in the code reaches the
// model as the call's output, the model recovers with a second call in
// the same response, and that call sees the first one's variables (one
// computer, one kernel); with both upstream APIs, streamed and not.
func TestResponsesKernelStateAndRecovery(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	for _, api := range []string{responses.APIChat, responses.APIResponses} {
		up := newScriptedAPI(t, api, func(n int, req map[string]any) (int, any) {
			switch len(toolMessages(req)) {
			case 0:
				return 200, toolCallAnswer("code_interpreter", `{"code":"x = 6 * 7\n1 / 0"}`)
			case 1:
				return 200, toolCallAnswer("code_interpreter", `{"code":"print(x)"}`)
			}
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "recovered: " + lastToolMessage(req)})
		})
		e.withGatewayConfig(responses.Config{Model: "m", Upstreams: []responses.UpstreamConfig{
			{Name: "up", BaseURL: up.srv.URL + "/v1", API: api, Default: true}}})
		stream := api == responses.APIResponses
		r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": ciTool, "stream": stream})
		var out responseObj
		if stream {
			out = finalResponse(t, sseEvents(t, r.body))
		} else {
			r.json(t, &out)
		}
		if out.Status != "completed" || len(out.Output) != 3 || out.Output[0].Type != "code_interpreter_call" ||
			out.Output[1].Type != "code_interpreter_call" || out.Output[0].ContainerID != out.Output[1].ContainerID ||
			out.Output[0].Status != "failed" || out.Output[1].Status != "completed" ||
			strings.TrimSpace(out.Output[2].Content[0].Text) != "recovered: 42" {
			t.Fatalf("%s: %s", api, r)
		}
		// The model saw the error as the first call's output.
		if seen := toolMessages(up.requests[1]); len(seen) != 1 || !strings.Contains(seen[0], "ZeroDivisionError") {
			t.Fatalf("%s: the model saw %q", api, seen)
		}
		e.waitDestroyed(key, out.ID)
	}
}

// TestResponsesMaxToolCallsOneAnswer: calls past max_tool_calls in the
// same answer as the calls before them do not run: the model is told, a
// code_interpreter_call shown while it streamed ends incomplete.
func TestResponsesMaxToolCallsOneAnswer(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, toolCallsAnswer("code_interpreter", `{"code":"print(1)"}`, "code_interpreter", `{"code":"print(2)"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "done"})
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "go", "tools": ciTool, "max_tool_calls": 1, "stream": true})
	evs := sseEvents(t, r.body)
	out := finalResponse(t, evs)
	if out.Status != "completed" || len(out.Output) != 3 || out.Output[0].Status != "completed" ||
		out.Output[1].Status != "incomplete" || out.Output[1].Code != "print(2)" || out.Output[2].Content[0].Text != "done" {
		t.Fatalf("response: %+v", out)
	}
	if n := len(sseOfType(evs, "response.code_interpreter_call.interpreting")); n != 1 {
		t.Fatalf("%d calls ran, want 1", n)
	}
	if done := sseOfType(evs, "response.output_item.done"); len(done) != 3 || done[1]["item"].(map[string]any)["status"] != "incomplete" {
		t.Fatalf("output_item.done events: %v", done)
	}
	if got := toolMessages(up.requests[1]); len(got) != 2 || got[0] != "1" || got[1] != responses.NotRunOutput ||
		up.requests[1]["tool_choice"] != "none" {
		t.Fatalf("second upstream call: tool outputs %q, tool_choice %v", got, up.requests[1]["tool_choice"])
	}
}
