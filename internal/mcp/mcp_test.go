package mcp_test

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

// TestMCPAuth: /mcp takes the REST API's keys: no key and an unknown key
// are refused with the REST 401 before any MCP is spoken, and the Go
// client's Dial says the server's reason.
func TestMCPAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, key := range []string{"", "cub_not_a_key"} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", e.url+"/mcp", strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body.String(), `"code":"invalid_api_key"`) {
			t.Errorf("key %q: %d %s", key, resp.StatusCode, body.String())
		}
	}
	if _, err := mcp.Dial(t.Context(), e.url, "cub_not_a_key"); !errors.Is(err, mcp.ErrRefused) {
		t.Errorf("dial with an unknown key: %v", err)
	}
	// The right key initializes.
	s := e.connect(adminSecret)
	if got := s.InitializeResult().ServerInfo.Name; got != mcp.Name {
		t.Errorf("server name %q", got)
	}
}

// TestMCPTools: through the Go SDK's client, the tools a key lists, their
// schemas, and a computer's whole life: create, list, exec, write, read,
// list files, a python cell's PNG as image content, tool errors with the
// API's sentences, the audit rows of REST, delete.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.newKey(computerCaps)
	s := e.connect(key)

	list, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		schema, _ := tl.InputSchema.(map[string]any)
		if tl.Description == "" || schema["type"] != "object" {
			t.Errorf("tool %s: description %q, schema %v", tl.Name, tl.Description, tl.InputSchema)
		}
		if tl.Name == mcp.Exec {
			req, _ := schema["required"].([]any)
			if !slices.Equal(req, []any{"computer_id"}) {
				t.Errorf("exec requires %v; want computer_id (command or task_id, timeout_seconds, background optional)", req)
			}
		}
	}
	want := []string{"create_computer", "delete_computer", "exec", "extend_computer", "list_computers", "list_files", "list_templates", "python", "read_file", "write_file"}
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	created := call(t, s, mcp.CreateComputer, map[string]any{"lifetime_seconds": 300, "metadata": map[string]string{"task": "mcp"}})
	var c struct {
		ID     string
		Status string
		Limits struct {
			LifetimeSeconds int `json:"lifetime_seconds"`
		}
		Metadata map[string]string
	}
	structured(t, created, &c)
	if created.IsError || !strings.HasPrefix(c.ID, "cmp_") || c.Status != "ready" || c.Limits.LifetimeSeconds != 300 || c.Metadata["task"] != "mcp" {
		t.Fatalf("create: %s", text(created))
	}
	if !strings.Contains(text(call(t, s, mcp.ListComputers, nil)), c.ID) {
		t.Errorf("list_computers does not show %s", c.ID)
	}
	id := c.ID

	steps := []struct {
		tool    string
		args    map[string]any
		isError bool
		want    string
	}{
		{mcp.Exec, map[string]any{"command": "echo hello; echo oops >&2; exit 3"}, false, "exit_code: 3\nstdout:\nhello\n\nstderr:\noops\n"},
		{mcp.Exec, map[string]any{}, true, "Invalid arguments: command is required."},
		{mcp.Exec, map[string]any{"command": "true", "bogus": 1}, true, `Invalid arguments: unknown field "bogus".`},
		{mcp.WriteFile, map[string]any{"path": "data/a.txt", "content": "hi there"}, false, "Wrote 8 bytes to /workspace/data/a.txt."},
		{mcp.ReadFile, map[string]any{"path": "/workspace/data/a.txt"}, false, "hi there"},
		{mcp.ReadFile, map[string]any{"path": "../etc/passwd"}, true, "Path is outside the workspace: /etc/passwd"},
		{mcp.ReadFile, map[string]any{"path": "nope.txt"}, true, "File not found: /workspace/nope.txt"},
		{mcp.ListFiles, map[string]any{"path": "data"}, false, "file\t8\t/workspace/data/a.txt\n"},
		{mcp.ListFiles, map[string]any{"path": "missing"}, true, "no such file: /workspace/missing"},
	}
	for _, st := range steps {
		st.args["computer_id"] = id
		r := call(t, s, st.tool, st.args)
		if r.IsError != st.isError || text(r) != st.want {
			t.Errorf("%s %v: isError %v, %q; want %v, %q", st.tool, st.args, r.IsError, text(r), st.isError, st.want)
		}
	}
	if r := call(t, s, mcp.Exec, map[string]any{"command": "true"}); !r.IsError || text(r) != "Invalid arguments: computer_id is required." {
		t.Errorf("exec without computer_id: %v %q", r.IsError, text(r))
	}
	if r := call(t, s, mcp.Exec, map[string]any{"computer_id": "cmp_000000000000000000000000", "command": "true"}); !r.IsError || !strings.HasPrefix(text(r), "no such computer") {
		t.Errorf("exec on no computer: %v %q", r.IsError, text(r))
	}

	// A python cell: its text as text, its figure as a PNG image.
	py := call(t, s, mcp.Python, map[string]any{"computer_id": id, "cells": []map[string]any{
		{"code": "plt.plot([1, 2, 3]); plt.show()\nprint('plotted', 6 * 7)"}}})
	var pngs [][]byte
	for _, ct := range py.Content {
		if img, ok := ct.(*sdk.ImageContent); ok && img.MIMEType == "image/png" {
			pngs = append(pngs, img.Data)
		}
	}
	if py.IsError || !strings.Contains(text(py), "plotted 42") || len(pngs) != 1 || !bytes.HasPrefix(pngs[0], []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("python: isError %v, %q, %d PNGs", py.IsError, text(py), len(pngs))
	}
	if r := call(t, s, mcp.Python, map[string]any{"computer_id": id, "cells": []map[string]any{{"code": "1/0"}}}); !r.IsError || !strings.Contains(text(r), "ZeroDivisionError") {
		t.Errorf("a failing cell: %v %q", r.IsError, text(r))
	}

	// The calls are audited as REST's tool calls are, with their kinds.
	var audit struct {
		Data []struct {
			ComputerID string         `json:"computer_id"`
			Data       map[string]any `json:"data"`
		}
	}
	if code := e.rest(key, "GET", "/v1/audit?type=computer.executed", &audit); code != 200 {
		t.Fatalf("audit: %d", code)
	}
	kinds := map[string]bool{}
	for _, a := range audit.Data {
		if a.ComputerID == id {
			kinds[a.Data["kind"].(string)] = true
		}
	}
	for _, k := range []string{"exec", "write_file", "read_file", "python"} {
		if !kinds[k] {
			t.Errorf("no computer.executed of kind %s in the audit (%v)", k, kinds)
		}
	}

	if r := call(t, s, mcp.DeleteComputer, map[string]any{"computer_id": id}); r.IsError || text(r) != "Deleted computer "+id+"." {
		t.Fatalf("delete: %v %q", r.IsError, text(r))
	}
	r := call(t, s, mcp.DeleteComputer, map[string]any{"computer_id": id})
	var errBody struct {
		Error struct{ Code, Message string }
	}
	structured(t, r, &errBody)
	if !r.IsError || errBody.Error.Code != "computer_gone" || text(r) != "the computer is already gone: "+id {
		t.Errorf("delete again: %v %q %+v", r.IsError, text(r), errBody)
	}
	if r := call(t, s, mcp.ListComputers, nil); strings.Contains(text(r), id) {
		t.Errorf("list_computers still shows %s: %s", id, text(r))
	}
}

// TestMCPCapabilities: a key's capabilities bound its tools as they bound
// the REST API: without the computer capability nothing is created; with
// it but without the "computer" system tool, a computer is created but the
// computer tools are refused.
func TestMCPCapabilities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	files := e.connect(e.newKey(`{"files":{}}`))
	r := call(t, files, mcp.CreateComputer, nil)
	var errBody struct {
		Error struct{ Code, Message string }
	}
	structured(t, r, &errBody)
	if !r.IsError || errBody.Error.Code != "forbidden" || text(r) != "computers are not enabled for this key or organisation: the key lacks the computer capability" {
		t.Errorf("create without the computer capability: %v %q %+v", r.IsError, text(r), errBody)
	}

	noTool := e.connect(e.newKey(`{"tooling":{"system_tools":[]},"computer":{}}`))
	created := call(t, noTool, mcp.CreateComputer, nil)
	var c struct{ ID string }
	structured(t, created, &c)
	if created.IsError || c.ID == "" {
		t.Fatalf("create: %q", text(created))
	}
	r = call(t, noTool, mcp.Exec, map[string]any{"computer_id": c.ID, "command": "echo hi"})
	if !r.IsError || !strings.Contains(text(r), "lacks the computer system tool") {
		t.Errorf("exec without the computer system tool: %v %q", r.IsError, text(r))
	}
	if r := call(t, noTool, mcp.DeleteComputer, map[string]any{"computer_id": c.ID}); r.IsError {
		t.Errorf("delete: %q", text(r))
	}
}
