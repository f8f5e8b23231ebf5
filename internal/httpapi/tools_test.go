package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

type toolAnswer struct {
	Output  string `json:"output"`
	IsError bool   `json:"is_error"`
	Images  []struct {
		PNG    []byte `json:"png"`
		Width  int    `json:"width"`
		Height int    `json:"height"`
	} `json:"images"`
	Artifacts []json.RawMessage `json:"artifacts"`
}

// tool calls a tool on a computer and fails unless it answers 200.
func (e *env) tool(key, id, name string, args any) toolAnswer {
	e.t.Helper()
	r := e.do(key, "POST", "/v1/computers/"+id+"/tools/"+name, map[string]any{"arguments": args})
	if r.code != http.StatusOK {
		e.t.Fatalf("tool %s %v: %s", name, args, r)
	}
	var a toolAnswer
	r.json(e.t, &a)
	if a.Images == nil || a.Artifacts == nil {
		e.t.Fatalf("images and artifacts must be arrays: %s", r)
	}
	return a
}

// toolDef is a definition of GET /v1/tools.
type toolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
		Strict     bool            `json:"strict"`
	} `json:"function"`
}

// toolDefs reads the list GET /v1/tools answered.
func toolDefs(t *testing.T, r resp) []toolDef {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("list tools: %s", r)
	}
	var l struct {
		Object string    `json:"object"`
		Data   []toolDef `json:"data"`
	}
	r.json(t, &l)
	if l.Object != "list" || l.Data == nil {
		t.Fatalf("list shape: %s", r)
	}
	return l.Data
}

func toolNames(t *testing.T, r resp) []string {
	t.Helper()
	var names []string
	for _, d := range toolDefs(t, r) {
		if d.Type != "function" || !d.Function.Strict || !strings.Contains(string(d.Function.Parameters), `"additionalProperties":false`) {
			t.Fatalf("definition shape: %s", r)
		}
		names = append(names, d.Function.Name)
	}
	return names
}

func TestToolsOnAComputer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	org := e.newOrg("tools", true)
	_, key := e.newKey(org, computerCaps)
	c := e.create(key, map[string]any{})

	// Write then exec, as one round would.
	a := e.tool(key, c.ID, "builtin__computer_write_file", map[string]any{"path": "bin/run.sh", "content": "echo ran; echo oops >&2; exit 3\n"})
	if a.Output != "Wrote 32 bytes to /workspace/bin/run.sh." || a.IsError {
		t.Fatalf("write: %+v", a)
	}
	// Arguments as a JSON string, as OpenAI sends them.
	a = e.tool(key, c.ID, "builtin__computer_exec", `{"command":"sh bin/run.sh","timeout_seconds":null}`)
	if want := "exit_code: 3\nstdout:\nran\n\nstderr:\noops\n"; a.Output != want {
		t.Fatalf("exec: %q, want %q", a.Output, want)
	}
	a = e.tool(key, c.ID, "builtin__computer_exec", map[string]any{"command": "echo before; sleep 10", "timeout_seconds": 1})
	if want := "timed out after 1 seconds\nstdout:\nbefore\n\nstderr:\n"; a.Output != want {
		t.Fatalf("timeout: %q, want %q", a.Output, want)
	}
	// 2 MiB of output: the stream is cut at 1 MiB and the answer at 32 KiB.
	a = e.tool(key, c.ID, "builtin__computer_exec", map[string]any{"command": "head -c 2097152 /dev/zero | tr '\\0' x"})
	if len(a.Output) != 32<<10 || !strings.HasSuffix(a.Output, "xx\n[output cut by the computer]\n[truncated]") {
		t.Fatalf("big output: %d bytes, ends %q", len(a.Output), a.Output[len(a.Output)-60:])
	}

	a = e.tool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "/workspace/bin/run.sh"})
	if a.Output != "echo ran; echo oops >&2; exit 3\n" {
		t.Fatalf("read: %q", a.Output)
	}
	e.sh(key, c.ID, "printf 'a\\0b' > bin.dat; head -c 40000 /dev/zero | tr '\\0' 'é' > /dev/null; python3 -c \"print('é'*20000, end='')\" > long.txt")
	for args, want := range map[string]string{
		`{"path":"bin.dat"}`:                  "[binary file: 3 bytes; read it again with export to keep it]",
		`{"path":"bin.dat","export":true}`:    "Export is not available on this deployment yet.",
		`{"path":"missing.txt"}`:              "File not found: /workspace/missing.txt",
		`{"path":"../../etc/passwd"}`:         "Path is outside the workspace: /etc/passwd",
		`{"path":"bin"}`:                      "Is a directory: /workspace/bin",
		`{"path":"bin.dat","extra":1}`:        `Invalid arguments: unknown field "extra".`,
		`{"path":"bin.dat","export":"maybe"}`: "Invalid arguments: export must be a boolean.",
	} {
		a := e.tool(key, c.ID, "builtin__computer_read_file", json.RawMessage(args))
		if a.Output != want || !a.IsError && !strings.HasPrefix(want, "[binary") {
			t.Errorf("read %s: %q (is_error %v), want %q", args, a.Output, a.IsError, want)
		}
	}
	a = e.tool(key, c.ID, "builtin__computer_read_file", map[string]any{"path": "long.txt"})
	if len(a.Output) > 32<<10 || !strings.HasSuffix(a.Output, "é\n[truncated]") {
		t.Fatalf("long read: %d bytes, ends %q", len(a.Output), a.Output[len(a.Output)-20:])
	}

	// Python: text for the model, the image alongside.
	a = e.tool(key, c.ID, "python", map[string]any{"cells": []map[string]any{
		{"code": "x = 6*7\nprint('x is', x)"},
		{"code": "import base64, IPython.display as d\n" +
			"d.display(d.Image(base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')))"},
		{"code": "1/0"},
	}})
	for _, want := range []string{"[cell 0: ok]\nx is 42\n", "[cell 1: ok]\n[image: 1x1 PNG]\n", "[cell 2: error]\nZeroDivisionError: division by zero\n"} {
		if !strings.Contains(a.Output, want) {
			t.Fatalf("python output lacks %q:\n%s", want, a.Output)
		}
	}
	if len(a.Images) != 1 || a.Images[0].Width != 1 || len(a.Images[0].PNG) == 0 || !a.IsError {
		t.Fatalf("python images: %+v", a.Images)
	}

	// HTTP errors.
	e.do(key, "POST", "/v1/computers/"+c.ID+"/tools/nope", map[string]any{"arguments": map[string]any{}}).wantError(t, 404, "not_found")
	e.do(key, "POST", "/v1/computers/"+c.ID+"/tools/python", map[string]any{"arguments": 5}).wantError(t, 400, "invalid_request")
	e.do(key, "POST", "/v1/computers/"+c.ID+"/tools/python", map[string]any{"args": map[string]any{}}).wantError(t, 400, "invalid_request")
	e.do(key, "POST", "/v1/computers/cmp_nope/tools/python", map[string]any{"arguments": map[string]any{}}).wantError(t, 404, "not_found")

	// Audit: one computer.executed per call, kind exec/write_file/read_file/python, nothing of the arguments.
	evs := eventsOf(e.audit(key, ""), c.ID, "computer.executed")
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Data["kind"].(string))
		b, _ := json.Marshal(ev.Data)
		if strings.Contains(string(b), "run.sh") || strings.Contains(string(b), "oops") || strings.Contains(string(b), "workspace") {
			t.Fatalf("audit leaks arguments or output: %s", b)
		}
	}
	for _, k := range []string{"write_file", "exec", "read_file", "python"} {
		if !slices.Contains(kinds, k) {
			t.Fatalf("audit kinds %v lack %s", kinds, k)
		}
	}
	for _, ev := range evs {
		if ev.Data["kind"] == "exec" {
			if _, ok := ev.Data["exit_code"]; !ok {
				t.Fatalf("exec event lacks exit_code: %+v", ev.Data)
			}
		}
	}
}

func TestToolsListAndDirectCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	on := e.newOrg("on", true)
	off := e.newOrg("off", false)
	_, full := e.newKey(on, computerCaps)
	_, noTool := e.newKey(on, `{"tooling":{"system_tools":[]},"computer":{}}`)
	_, offOrg := e.newKey(off, computerCaps)

	want := []string{"builtin__computer_exec", "builtin__computer_write_file", "builtin__computer_read_file", "python", "code_interpreter"}
	if got := toolNames(t, e.do(full, "GET", "/v1/tools", nil)); !slices.Equal(got, want) {
		t.Fatalf("tools of a computer key: %v", got)
	}
	for _, k := range []string{noTool, offOrg} {
		if got := toolNames(t, e.do(k, "GET", "/v1/tools", nil)); len(got) != 0 {
			t.Fatalf("tools without computers: %v", got)
		}
	}
	e.do("", "GET", "/v1/tools", nil).wantError(t, 401, "")

	check := func(key, reason, msg string) {
		t.Helper()
		r := e.do(key, "POST", "/v1/tools/builtin__computer_exec/call", map[string]any{"arguments": map[string]any{"command": "id"}})
		// (wantError expects only "error" at the top; this body also has reason_code.)
		var body struct {
			Error struct {
				Code    string  `json:"code"`
				Message string  `json:"message"`
				Param   *string `json:"param"`
			} `json:"error"`
			ReasonCode string `json:"reason_code"`
		}
		r.json(t, &body)
		if r.code != 422 || body.Error.Code != reason || body.Error.Message != msg || body.Error.Param == nil ||
			*body.Error.Param != "name" || body.ReasonCode != reason {
			t.Fatalf("422 shape: %s", r)
		}
	}
	check(full, "computer_tool_outside_turn", "A computer tool runs only in a turn of its own.")
	check(noTool, "computer_not_configured", "This tool is not configured on this deployment.")
	check(offOrg, "computer_not_configured", "This tool is not configured on this deployment.")
	e.do(full, "POST", "/v1/tools/nope/call", map[string]any{}).wantError(t, 404, "not_found")

	// A key without the computer system tool cannot run the tools on a computer.
	c := e.create(noTool, map[string]any{})
	e.do(noTool, "POST", "/v1/computers/"+c.ID+"/tools/builtin__computer_exec",
		map[string]any{"arguments": map[string]any{"command": "id"}}).wantError(t, 403, "forbidden")
	// Another organisation's computer is not found.
	_, other := e.newKey(e.newOrg("other", true), computerCaps)
	e.do(other, "POST", "/v1/computers/"+c.ID+"/tools/builtin__computer_exec",
		map[string]any{"arguments": map[string]any{"command": "id"}}).wantError(t, 404, "not_found")
}
