package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := func(body string, computers bool) *plan {
		t.Helper()
		var r Request
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		p, err := r.validate("default-model", computers)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return p
	}
	p := ok(`{"input":"hi","instructions":"be brief"}`, false)
	if p.model != "default-model" || len(p.messages) != 2 || p.messages[0].Role != "system" || *p.messages[1].Content != "hi" {
		t.Fatalf("plan: %+v", p)
	}
	p = ok(`{"model":"m","input":[{"role":"developer","content":"sys"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}],
		"tools":[{"type":"code_interpreter","container":{"type":"auto"}},{"type":"function","name":"f","parameters":{"type":"object"}}],
		"tool_choice":{"type":"function","name":"f"},"max_tool_calls":2,"include":["code_interpreter_call.outputs"]}`, true)
	if !p.codeInterpreter || !p.clientFuncs["f"] || len(p.tools) != 2 || p.maxToolCalls != 2 || !p.includeOutputs ||
		*p.messages[0].Content != "sys" || p.messages[0].Role != "system" || *p.messages[1].Content != "ab" {
		t.Fatalf("plan: %+v", p)
	}
	if string(p.toolChoice) != `{"function":{"name":"f"},"type":"function"}` {
		t.Fatalf("tool_choice: %s", p.toolChoice)
	}
	p = ok(`{"model":"m","parallel_tool_calls":false,"input":[{"role":"user","content":[{"type":"input_text","text":"a"},
		{"type":"input_file","file_id":"file_1"},{"type":"input_file","file_id":"file_2"}]},
		{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}],
		"tools":[{"type":"tool","name":"builtin__computer_exec"},{"type":"tool","name":"builtin__computer_*"},{"type":"tool","name":"python"}],
		"tool_choice":{"type":"function","name":"python"}}`, true)
	var names []string
	for _, tl := range p.tools {
		if tl.Function.Strict == nil || !*tl.Function.Strict {
			t.Fatalf("not strict: %+v", tl)
		}
		names = append(names, tl.Function.Name)
	}
	if got := fmt.Sprint(names); got != "[builtin__computer_exec builtin__computer_write_file builtin__computer_read_file python]" {
		t.Fatalf("tools: %s", got)
	}
	if fmt.Sprint(p.fileIDs) != "[file_1 file_2]" || *p.messages[0].Content != "a" || *p.messages[1].Content != "" ||
		p.parallel == nil || *p.parallel {
		t.Fatalf("plan: %+v", p)
	}
	bad := []struct{ body, code, param string }{
		{`{"input":"hi","tools":[{"type":"tool","name":"python"}]}`, "computer_not_configured", "tools"},
		{`{"input":"hi","tools":[{"type":"tool","name":"code_interpreter"}]}`, "invalid_request", "tools[0].name"},
		{`{"input":[{"role":"user","content":[{"type":"input_text","text":"a","file_id":"file_1"}]}]}`, "invalid_request", "input[0].content[0].file_id"},
		{`{"input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "computer_not_configured", "tools"},
		{`{"input":"hi","stream":true,"tools":[{"type":"function","name":"f","strict":"yes"}]}`, "invalid_request", "tools[0].strict"},
		{`{"input":"hi","max_tool_calls":0}`, "invalid_request", "max_tool_calls"},
		{`{"model":"m"}`, "invalid_request", "input"},
		{`{"input":[{"role":"user","content":"x","extra":1}]}`, "invalid_request", "input[0].extra"},
		{`{"input":"hi","tool_choice":{"type":"function","name":"nope"}}`, "invalid_request", "tool_choice"},
	}
	for _, c := range bad {
		var r Request
		json.Unmarshal([]byte(c.body), &r)
		_, err := r.validate("d", false)
		var ge *Error
		if !errors.As(err, &ge) || ge.Code != c.code || ge.Param != c.param || ge.Status != 400 {
			t.Fatalf("%s: got %v (%+v), want %s param %s", c.body, err, ge, c.code, c.param)
		}
	}
	var r Request
	json.Unmarshal([]byte(`{"input":"hi"}`), &r)
	if _, err := r.validate("", true); err == nil {
		t.Fatal("no model and no default: accepted")
	}
}
