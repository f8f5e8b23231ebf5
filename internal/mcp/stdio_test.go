package mcp_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

// mcpCommand is `cubicle mcp` for the server at url with key (none: "").
func mcpCommand(t *testing.T, url, key string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), agentBin, "mcp")
	cmd.Env = append(os.Environ(), "CUBICLE_URL="+url)
	if key != "" {
		cmd.Env = append(cmd.Env, "CUBICLE_KEY="+key)
	}
	return cmd
}

// TestMCPStdio: `cubicle mcp` driven by the Go SDK's client over its stdin
// and stdout serves the server's tools (a computer created, a command run,
// a file written and read, the computer deleted, all by the server), and
// exits 0 when its stdin ends; without a key it is a usage error (2), with
// a refused key it says the server's reason and exits 1.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	for _, c := range []struct {
		key, stderr string
		code        int
	}{
		{"", "CUBICLE_KEY", 2},
		{"cub_not_a_key", "the server refused the key", 1},
	} {
		cmd := mcpCommand(t, e.url, c.key)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != c.code || !strings.Contains(string(out), c.stderr) {
			t.Errorf("key %q: %v\n%s", c.key, err, out)
		}
	}

	cmd := mcpCommand(t, e.url, e.newKey(computerCaps))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	s, err := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(t.Context(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListTools(t.Context(), nil)
	if err != nil || len(list.Tools) != 10 {
		t.Fatalf("tools: %v %v", list, err)
	}
	if !strings.Contains(s.InitializeResult().Instructions, "create_computer") {
		t.Errorf("instructions %q", s.InitializeResult().Instructions)
	}
	created := call(t, s, mcp.CreateComputer, nil)
	var c struct{ ID string }
	structured(t, created, &c)
	if created.IsError || !strings.HasPrefix(c.ID, "cmp_") {
		t.Fatalf("create: %q", text(created))
	}
	if r := call(t, s, mcp.Exec, map[string]any{"computer_id": c.ID, "command": "echo from stdio"}); r.IsError || !strings.Contains(text(r), "stdout:\nfrom stdio\n") {
		t.Errorf("exec: %v %q", r.IsError, text(r))
	}
	if r := call(t, s, mcp.WriteFile, map[string]any{"computer_id": c.ID, "path": "x.txt", "content": "via stdio"}); r.IsError {
		t.Errorf("write: %q", text(r))
	}
	if r := call(t, s, mcp.ReadFile, map[string]any{"computer_id": c.ID, "path": "x.txt"}); r.IsError || text(r) != "via stdio" {
		t.Errorf("read: %v %q", r.IsError, text(r))
	}
	// The computer is the server's: REST sees it.
	var got struct{ Status string }
	if code := e.rest(adminSecret, "GET", "/v1/computers/"+c.ID, &got); code != 200 || got.Status != "ready" {
		t.Errorf("GET the computer over REST: %d %+v", code, got)
	}
	if r := call(t, s, mcp.DeleteComputer, map[string]any{"computer_id": c.ID}); r.IsError {
		t.Errorf("delete: %q", text(r))
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if st := cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Errorf("cubicle mcp ended %v; stderr:\n%s", st, stderr.String())
	}
}
