package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// upstreams are the upstream kinds every loop test runs against.
var upstreams = []struct {
	name, api string
	noStream  bool
}{
	{"chat", APIChat, false},
	{"chat-whole", APIChat, true},
	{"responses", APIResponses, false},
	{"responses-whole", APIResponses, true},
}

func forEachUpstream(t *testing.T, fn func(t *testing.T, api string, edit func(*Config))) {
	for _, u := range upstreams {
		t.Run(u.name, func(t *testing.T) {
			fn(t, u.api, func(c *Config) { c.Upstreams[0].NoStream = u.noStream })
		})
	}
}

// messages are the role:content (then the tool calls' names) of a request
// in Chat Completions form; consecutive calls without text are one turn
// (a Responses input has one function_call item per call).
func messages(req map[string]any) []string {
	var out []string
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		m := m.(map[string]any)
		s := fmt.Sprint(m["role"], ":", m["content"])
		tcs, _ := m["tool_calls"].([]any)
		var names string
		for _, tc := range tcs {
			names += " " + tc.(map[string]any)["function"].(map[string]any)["name"].(string)
		}
		if n := len(out); names != "" && m["content"] == nil && n > 0 && strings.HasPrefix(out[n-1], "assistant:<nil> ") {
			out[n-1] += names
			continue
		}
		out = append(out, s+names)
	}
	return out
}

// squash is types with runs of the same type reduced to one (delta
// counts depend on the upstream's fragmenting).
func squash(types []string) []string { return slices.Compact(types) }

const toolsBody = `"tools":[{"type":"code_interpreter","container":{"type":"auto"}},{"type":"tool","name":"builtin__computer_exec"}]`

// TestToolLoop: an answer with a code_interpreter call and a computer
// tool call runs both in one computer, in model order; their outputs go
// back to the model; its next answer ends the response.
func TestToolLoop(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, api string, edit func(*Config)) {
		h := newHarness(t, api, func(n int, req map[string]any) (int, any) {
			if n == 1 {
				return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "call_a", Name: tools.CodeInterpreterName, Args: `{"code":"print(\"h\u00e9\")\n"}`},
					upstreamtest.Call{ID: "call_b", Name: "builtin__computer_exec", Args: `{"command":"ls"}`})
			}
			return 200, upstreamtest.TextAnswer("all done")
		}, edit)
		h.comp.run = func(_ context.Context, name string, _ json.RawMessage) (tools.Result, error) {
			if name == tools.CodeInterpreterName {
				return tools.Result{Output: "hé\n", Outputs: []tools.CodeOutput{{Type: "logs", Logs: "hé\n"}}}, nil
			}
			return tools.Result{Output: "a.txt", Failed: true}, nil
		}
		resp, err := h.create(`{"input":"go",` + toolsBody + `,"include":["code_interpreter_call.outputs"]}`)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != "completed" || len(resp.Output) != 3 || resp.Usage.TotalTokens != 30 {
			t.Fatalf("response %+v", resp)
		}
		ci := resp.Output[0].(CodeInterpreterCall)
		if ci.Status != "completed" || ci.ContainerID != "cmp_1" || ci.Code != "print(\"hé\")\n" || ci.Outputs == nil ||
			(*ci.Outputs)[0].Logs != "hé\n" {
			t.Fatalf("code_interpreter_call %+v", ci)
		}
		tc := resp.Output[1].(ToolCall)
		if tc.Name != "builtin__computer_exec" || tc.Status != "failed" || tc.Output != "a.txt" || tc.ContainerID != "cmp_1" {
			t.Fatalf("tool_call %+v", tc)
		}
		if m := resp.Output[2].(Message); m.Status != "completed" || m.Content[0].Text != "all done" {
			t.Fatalf("message %+v", m)
		}
		created, ran, _ := h.comp.snapshot()
		if len(created) != 1 || created[0].ResponseID != resp.ID {
			t.Fatalf("created %+v", created)
		}
		if len(ran) != 2 || !strings.HasPrefix(ran[0], "cmp_1 code_interpreter ") || ran[1] != `cmp_1 builtin__computer_exec {"command":"ls"}` {
			t.Fatalf("ran %q", ran)
		}
		got := messages(h.up.Request(1))
		want := []string{"user:go", "assistant:<nil> code_interpreter builtin__computer_exec", "tool:hé\n", "tool:a.txt"}
		if !slices.Equal(got, want) {
			t.Fatalf("second round messages %q, want %q", got, want)
		}
		// The computer is deleted after the answer (Close, in the background).
		if err := h.g.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, _, deleted := h.comp.snapshot(); !slices.Equal(deleted, []string{"cmp_1"}) {
			t.Fatalf("deleted %q", deleted)
		}
	})
}

// TestStreamedEvents pins the order of the events of a streamed tool loop:
// the code streams while the model writes it (its computer made then),
// the other gateway tool shows only when it runs, text streams last.
func TestStreamedEvents(t *testing.T) {
	for _, api := range []string{APIChat, APIResponses} {
		t.Run(api, func(t *testing.T) {
			code := "x = 1\nprint(x * 2)\n"
			args, _ := json.Marshal(map[string]string{"code": code})
			h := newHarness(t, api, func(n int, req map[string]any) (int, any) {
				if n == 1 {
					return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: tools.CodeInterpreterName, Args: string(args)},
						upstreamtest.Call{ID: "c2", Name: "builtin__computer_exec", Args: `{"command":"true"}`})
				}
				return 200, upstreamtest.TextAnswer("two words")
			}, nil)
			resp, events, err := h.stream(context.Background(), `{"input":"go","stream":true,`+toolsBody+`}`)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"response.created", "response.in_progress",
				"response.output_item.added", "response.code_interpreter_call.in_progress",
				"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
				"response.code_interpreter_call.interpreting", "response.code_interpreter_call.completed",
				"response.output_item.done",
				"response.output_item.added", "response.output_item.done", // the exec tool_call
				"response.output_item.added", "response.content_part.added", "response.output_text.delta",
				"response.output_text.done", "response.content_part.done", "response.output_item.done",
				"response.completed"}
			if got := squash(types(events)); !slices.Equal(got, want) {
				t.Fatalf("events\n%q\nwant\n%q", got, want)
			}
			var streamed, text strings.Builder
			for i, ev := range events {
				if ev.Fields["sequence_number"] != i {
					t.Fatalf("event %d has sequence_number %v", i, ev.Fields["sequence_number"])
				}
				switch ev.Type {
				case "response.code_interpreter_call_code.delta":
					streamed.WriteString(ev.Fields["delta"].(string))
				case "response.output_text.delta":
					text.WriteString(ev.Fields["delta"].(string))
				}
			}
			// The code was streamed in several deltas, decoded from the JSON arguments.
			if streamed.String() != code || text.String() != "two words" {
				t.Fatalf("streamed code %q, text %q", streamed.String(), text.String())
			}
			last := asJSON(t, events[len(events)-1])["response"].(map[string]any)
			if last["status"] != "completed" || len(last["output"].([]any)) != 3 || last["id"] != resp.ID {
				t.Fatalf("last event's response %v", last)
			}
			// The computer was made while the code streamed: before the
			// first code delta there was an in_progress item with its id.
			added := asJSON(t, events[2])["item"].(map[string]any)
			if added["container_id"] != "cmp_1" || added["status"] != "in_progress" {
				t.Fatalf("added item %v", added)
			}
			if h.g.Close(context.Background()); len(h.comp.deleted) != 1 {
				t.Fatalf("deleted %q", h.comp.deleted)
			}
			if st := resp.Store; !st {
				t.Fatal("store defaults to true")
			}
			if _, err := h.store.Get(context.Background(), "org_1", resp.ID); err != nil {
				t.Fatalf("stored: %v", err)
			}
		})
	}
}

// TestCodeInterpreterWhole: code that could not be streamed (another key
// first) is shown whole when it runs; a tool failure is a failed item the
// model reads about, not an error.
func TestCodeInterpreterWhole(t *testing.T) {
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, upstreamtest.ToolCallsAnswer("let me run it", upstreamtest.Call{ID: "c1", Name: tools.CodeInterpreterName,
				Args: `{"x":1,"code":"1/0"}`})
		}
		return 200, upstreamtest.TextAnswer("it failed")
	}, nil)
	h.comp.run = func(context.Context, string, json.RawMessage) (tools.Result, error) {
		return tools.Result{Output: "ZeroDivisionError", Failed: true}, nil
	}
	resp, events, err := h.stream(context.Background(), `{"input":"go","stream":true,`+toolsBody+`}`)
	if err != nil {
		t.Fatal(err)
	}
	ci := resp.Output[1].(CodeInterpreterCall)
	if ci.Status != "failed" || ci.Code != "1/0" || ci.Outputs != nil {
		t.Fatalf("item %+v", ci)
	}
	var codeDeltas []string
	for _, ev := range events {
		if ev.Type == "response.code_interpreter_call_code.delta" {
			codeDeltas = append(codeDeltas, ev.Fields["delta"].(string))
		}
	}
	if !slices.Equal(codeDeltas, []string{"1/0"}) {
		t.Fatalf("code deltas %q", codeDeltas)
	}
	if got := messages(h.up.Request(1)); got[2] != "tool:ZeroDivisionError" || got[1] != "assistant:let me run it code_interpreter" {
		t.Fatalf("messages %q", got)
	}
}

// TestMaxToolCalls: past max_tool_calls a gateway call of the same answer
// is not run (the model is told, its streamed item ends incomplete), the
// next round forbids tools, and calls there end the response incomplete
// with the client's calls kept for a continuation.
func TestMaxToolCalls(t *testing.T) {
	ci := func(id string) upstreamtest.Call {
		return upstreamtest.Call{ID: id, Name: tools.CodeInterpreterName, Args: `{"code":"1"}`}
	}
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, upstreamtest.ToolCallsAnswer("", ci("c1"), ci("c2"))
		}
		return 200, upstreamtest.ToolCallsAnswer("still", ci("c3"), upstreamtest.Call{ID: "f1", Name: "lookup", Args: `{}`})
	}, nil)
	body := `{"input":"go","stream":true,"max_tool_calls":1,"tools":[{"type":"code_interpreter","container":{"type":"auto"}},
		{"type":"function","name":"lookup","parameters":{"type":"object"}}]}`
	resp, _, err := h.stream(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "incomplete" || resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "max_tool_calls" {
		t.Fatalf("status %s %+v", resp.Status, resp.IncompleteDetails)
	}
	if _, ran, _ := h.comp.snapshot(); len(ran) != 1 {
		t.Fatalf("ran %q", ran)
	}
	if got := messages(h.up.Request(1)); got[len(got)-1] != "tool:"+NotRunOutput {
		t.Fatalf("second round %q", got)
	}
	if tc := h.up.Request(1); h.up.Raw(1)["tool_choice"] != "none" {
		t.Fatalf("second round tool_choice %v (%v)", h.up.Raw(1)["tool_choice"], tc)
	}
	var statuses []string
	for _, it := range resp.Output {
		statuses = append(statuses, fmt.Sprint(asJSON(t, it)["type"], ":", asJSON(t, it)["status"]))
	}
	want := []string{"code_interpreter_call:completed", "code_interpreter_call:incomplete", "message:completed", "function_call:completed"}
	if !slices.Equal(statuses, want) {
		t.Fatalf("output %q, want %q", statuses, want)
	}
	// The kept conversation ends with the client's call, not the gateway's.
	sr, _ := h.store.Get(context.Background(), "org_1", resp.ID)
	var c conversation
	if err := json.Unmarshal(sr.Conversation, &c); err != nil {
		t.Fatal(err)
	}
	lastMsg := c.Messages[len(c.Messages)-1]
	if len(lastMsg.ToolCalls) != 1 || lastMsg.ToolCalls[0].ID != "f1" || deref(lastMsg.Content) != "still" {
		t.Fatalf("last kept message %+v", lastMsg)
	}
}

// TestMaxRounds: a model that never stops calling ends at MaxRounds.
func TestMaxRounds(t *testing.T) {
	h := newHarness(t, APIResponses, func(n int, req map[string]any) (int, any) {
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: fmt.Sprint("c", n), Name: "builtin__computer_exec", Args: `{"command":"true"}`})
	}, func(c *Config) { c.MaxRounds = 3 })
	resp, err := h.create(`{"input":"go",` + toolsBody + `}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_rounds" || h.up.Calls() != 3 || len(resp.Output) != 3 {
		t.Fatalf("response %+v after %d calls", resp, h.up.Calls())
	}
	if created, ran, _ := h.comp.snapshot(); len(created) != 1 || len(ran) != 3 {
		t.Fatalf("created %d computers, ran %d calls", len(created), len(ran))
	}
}

// TestClientFunctionCall: a client function call is an output item (its
// arguments streamed) and ends the response; a gateway call of the same
// answer still runs, and the input files' note goes before the turn.
func TestClientFunctionCall(t *testing.T) {
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "e1", Name: "builtin__computer_exec", Args: `{"command":"ls"}`},
			upstreamtest.Call{ID: "f1", Name: "lookup", Args: `{"q":"weather"}`})
	}, nil)
	h.files.files["file_1"], h.files.names["file_1"] = []byte("x"), "data.csv"
	body := `{"input":[{"role":"user","content":[{"type":"input_text","text":"go"},{"type":"input_file","file_id":"file_1"}]}],
		"stream":true,"tools":[{"type":"tool","name":"builtin__computer_exec"},{"type":"function","name":"lookup"}]}`
	resp, events, err := h.stream(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	fc := resp.Output[0].(FunctionCall)
	if resp.Status != "completed" || fc.CallID != "f1" || fc.Arguments != `{"q":"weather"}` || fc.Status != "completed" {
		t.Fatalf("response %+v", resp)
	}
	var args strings.Builder
	for _, ev := range events {
		if ev.Type == "response.function_call_arguments.delta" {
			args.WriteString(ev.Fields["delta"].(string))
		}
	}
	if args.String() != fc.Arguments || !slices.Contains(types(events), "response.function_call_arguments.done") {
		t.Fatalf("streamed arguments %q", args.String())
	}
	if len(h.files.copies) != 1 || !slices.Equal(h.files.copies[0].FileIDs, []string{"file_1"}) {
		t.Fatalf("copies %+v", h.files.copies)
	}
	sr, _ := h.store.Get(context.Background(), "org_1", resp.ID)
	var c conversation
	json.Unmarshal(sr.Conversation, &c)
	if len(c.Messages) != 4 || c.Messages[1].Role != "system" || !strings.HasPrefix(deref(c.Messages[1].Content), InputsNotePrefix+"/workspace/data.csv") ||
		c.Messages[2].Role != "assistant" || c.Messages[3].Role != "tool" || !slices.Equal(c.FileIDs, []string{"file_1"}) {
		t.Fatalf("kept conversation %+v", c)
	}
}

// TestCodeInterpreterNetworkPolicy: the container's network_policy
// (OpenAI's shape) reaches the response's computer, domain_secrets with
// their values, while the response object shows them without; other
// shapes are a 400 naming the parameter.
func TestCodeInterpreterNetworkPolicy(t *testing.T) {
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		if n%2 == 1 { // each response calls code_interpreter once
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: tools.CodeInterpreterName, Args: `{"code":"1"}`})
		}
		return 200, upstreamtest.TextAnswer("done")
	}, nil)
	body := `{"input":"go","tools":[{"type":"code_interpreter","container":{"type":"auto","network_policy":{"type":"allowlist","allowed_domains":["pypi.org"]}}}]}`
	if _, err := h.create(body); err != nil {
		t.Fatal(err)
	}
	if len(h.comp.created) != 1 || h.comp.created[0].NetworkPolicy == nil ||
		h.comp.created[0].NetworkPolicy.Type != "allowlist" || !slices.Equal(h.comp.created[0].NetworkPolicy.AllowedDomains, []string{"pypi.org"}) {
		t.Fatalf("created %+v", h.comp.created)
	}
	body = `{"input":"go","tools":[{"type":"code_interpreter","container":{"type":"auto","network_policy":{"type":"allowlist","allowed_domains":["x.org"],"domain_secrets":[{"domain":"x.org","name":"Authorization","value":"Bearer sk-never-shown"}]}}}]}`
	resp, err := h.create(body)
	if err != nil {
		t.Fatal(err)
	}
	if np := h.comp.created[1].NetworkPolicy; np == nil || len(np.DomainSecrets) != 1 || np.DomainSecrets[0].Value != "Bearer sk-never-shown" {
		t.Fatalf("created %+v", h.comp.created[1])
	}
	if b, _ := json.Marshal(resp); bytes.Contains(b, []byte("sk-never-shown")) || !bytes.Contains(b, []byte(`"name":"Authorization"`)) {
		t.Errorf("the response object shows %s", b)
	}
	for _, np := range []string{
		`{"type":"allowlist","allowed_domains":["x.org"],"domain_secrets":[{"domain":"x.org","name":"K","value":"v","x":1}]}`,
		`{"type":"allowlist","allowed_domains":"x.org"}`,
	} {
		_, err := h.create(`{"input":"go","tools":[{"type":"code_interpreter","container":{"type":"auto","network_policy":` + np + `}}]}`)
		var e *Error
		if !errors.As(err, &e) || e.Param != "tools[0].container.network_policy" {
			t.Errorf("%s: %v", np, err)
		}
	}
}
