package mcp_test

import (
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

// TestMCPScripts: an organisation's scripts are MCP tools of its keys
// that may use them (script__<name>, the script's arguments plus
// computer_id), run on the computer named, listed afresh on every request
// (a deleted script is gone from the next tools/list); a key without the
// computer capability does not see them, and a schema that declares
// computer_id itself is refused at registration.
func TestMCPScripts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	schema := map[string]any{"type": "object", "additionalProperties": false,
		"properties": map[string]any{"who": map[string]any{"type": "string"}}, "required": []string{"who"}}
	script := map[string]any{"name": "greet", "description": "Greets someone.", "input_schema": schema,
		"source": "read args; echo \"hello $args from $CUBICLE_SCRIPT\"\n"}
	if code := e.restBody(adminSecret, "POST", "/v1/scripts", script, nil); code != 201 {
		t.Fatalf("register: %d", code)
	}
	var refused struct {
		Error struct{ Param, Message string }
	}
	taken := map[string]any{"name": "taken", "description": "d", "source": "true\n", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{"computer_id": map[string]any{"type": "string"}}}}
	if code := e.restBody(adminSecret, "POST", "/v1/scripts", taken, &refused); code != 400 ||
		refused.Error.Param != "input_schema" || !strings.Contains(refused.Error.Message, "computer_id is reserved") {
		t.Errorf("a schema with computer_id: %d %+v", code, refused)
	}

	key := e.newKey(computerCaps)
	s := e.connect(key)
	list, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, tl := range list.Tools {
		if tl.Name != "script__greet" {
			continue
		}
		found = true
		sc, _ := tl.InputSchema.(map[string]any)
		props, _ := sc["properties"].(map[string]any)
		req, _ := sc["required"].([]any)
		if tl.Description != "Greets someone." || props["computer_id"] == nil || props["who"] == nil ||
			!slices.Equal(req, []any{"computer_id", "who"}) || sc["additionalProperties"] != false {
			t.Errorf("script__greet: %q %v", tl.Description, tl.InputSchema)
		}
	}
	if !found {
		t.Fatalf("tools/list has no script__greet: %d tools", len(list.Tools))
	}

	var c struct{ ID string }
	structured(t, call(t, s, mcp.CreateComputer, nil), &c)
	r := call(t, s, "script__greet", map[string]any{"computer_id": c.ID, "who": "ann"})
	if r.IsError || !strings.HasPrefix(text(r), "exit_code: 0\nstdout:\nhello {\"who\":\"ann\"} from greet\n") {
		t.Errorf("script__greet: error %v %q", r.IsError, text(r))
	}
	r = call(t, s, "script__greet", map[string]any{"computer_id": c.ID})
	if !r.IsError || !strings.Contains(text(r), "who") {
		t.Errorf("script__greet without who: error %v %q", r.IsError, text(r))
	}
	r = call(t, s, "script__greet", map[string]any{"who": "ann"})
	if !r.IsError || !strings.Contains(text(r), "computer_id") {
		t.Errorf("script__greet without computer_id: error %v %q", r.IsError, text(r))
	}

	// A key that may not use computers sees the built-in tools only.
	other := e.connect(e.newKey(`{"tooling":{"system_tools":["computer"]}}`))
	if names := toolNames(t, other); slices.Contains(names, "script__greet") {
		t.Errorf("a key without the computer capability lists %v", names)
	}
	// Deleted: gone from the next tools/list, and a call says it is unknown.
	if code := e.rest(adminSecret, "DELETE", "/v1/scripts/greet", nil); code != 204 {
		t.Fatalf("delete the script: %d", code)
	}
	if names := toolNames(t, s); slices.Contains(names, "script__greet") {
		t.Errorf("after the delete: %v", names)
	}
	if r, err := s.CallTool(t.Context(), &sdk.CallToolParams{Name: "script__greet", Arguments: map[string]any{"computer_id": c.ID, "who": "ann"}}); err == nil && !r.IsError {
		t.Errorf("a deleted script ran: %q", text(r))
	}
	call(t, s, mcp.DeleteComputer, map[string]any{"computer_id": c.ID})
}

// toolNames are the tools s lists.
func toolNames(t *testing.T, s *sdk.ClientSession) []string {
	t.Helper()
	list, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	return names
}
