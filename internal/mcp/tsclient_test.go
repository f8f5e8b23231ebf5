package mcp_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMCPTypeScriptClient: the official TypeScript SDK's client
// (@modelcontextprotocol/sdk, installed by `make test`:
// scripts/testdeps.sh) over streamable HTTP at /mcp and through `cubicle
// mcp` over stdio: a refused key, a capability-limited key refused a tool,
// the tools and their required arguments, and a computer's life (exec,
// write, read, list, a python cell's PNG as image content, a tool error,
// delete).
func TestMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("testdata/tsclient/node_modules/@modelcontextprotocol/sdk"); err != nil {
		t.Fatalf("the MCP TypeScript SDK is not installed (make test installs it: bash scripts/testdeps.sh): %v", err)
	}
	e := newEnv(t)
	key, limited := e.newKey(computerCaps), e.newKey(`{"files":{}}`)
	for _, mode := range []string{"http", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), "node", "client.mjs")
			cmd.Dir = "testdata/tsclient"
			cmd.Env = append(os.Environ(), "MODE="+mode, "CUBICLE_BIN="+agentBin, "CUBICLE_URL="+e.url,
				"CUBICLE_KEY="+key, "LIMITED_KEY="+limited)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s\n%s", err, out, stderr.String())
			}
			var got struct {
				BadKey  string
				Limited struct {
					IsError bool
					Text    string
				}
				Server string
				Tools  []struct {
					Name      string
					Required  []string
					Described bool
				}
				Created struct {
					IsError    bool
					ID, Status string
				}
				Exec, Write, Read, Listed string
				Python                    struct {
					IsError bool
					Text    string
					Images  []struct{ MimeType, Magic string }
				}
				BadArgs struct {
					IsError bool
					Text    string
				}
				Deleted      string
				DeletedAgain struct {
					IsError bool
					Text    string
				}
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s\n%s", err, out, stderr.String())
			}
			// Over HTTP the client sees the REST 401; over stdio, `cubicle
			// mcp` exits (its reason on its stderr), closing the connection.
			if got.BadKey == "connected" || (mode == "http" && !strings.Contains(got.BadKey, "invalid_api_key")) {
				t.Errorf("a bad key: %q", got.BadKey)
			}
			if mode == "stdio" && !strings.Contains(stderr.String(), "cubicle mcp: the server refused the key") {
				t.Errorf("stdio, bad key: stderr %q", stderr.String())
			}
			if !got.Limited.IsError || !strings.HasPrefix(got.Limited.Text, "computers are not enabled for this key") {
				t.Errorf("limited key: %+v", got.Limited)
			}
			required := map[string]string{}
			for _, tl := range got.Tools {
				required[tl.Name] = strings.Join(tl.Required, ",")
				if !tl.Described {
					t.Errorf("tool %s has no description", tl.Name)
				}
			}
			if len(got.Tools) != 10 || required["exec"] != "computer_id" || required["python"] != "computer_id,cells" || required["create_computer"] != "" {
				t.Errorf("tools: %+v", got.Tools)
			}
			if got.Server != "cubicle" || got.Created.IsError || !strings.HasPrefix(got.Created.ID, "cmp_") || got.Created.Status != "ready" {
				t.Fatalf("server %q, created %+v", got.Server, got.Created)
			}
			if got.Exec != "exit_code: 0\nstdout:\nhello from ts\n\nstderr:\n" || got.Write != "Wrote 13 bytes to /workspace/ts/hello.txt." ||
				got.Read != "written by ts" || got.Listed != "file\t13\t/workspace/ts/hello.txt\n" {
				t.Errorf("exec %q, write %q, read %q, list %q", got.Exec, got.Write, got.Read, got.Listed)
			}
			py := got.Python
			if py.IsError || !strings.Contains(py.Text, "ts plot") || len(py.Images) != 1 || py.Images[0].MimeType != "image/png" || py.Images[0].Magic != "89504e470d0a1a0a" {
				t.Errorf("python: %+v", py)
			}
			if !got.BadArgs.IsError || got.BadArgs.Text != "Invalid arguments: command is required." {
				t.Errorf("bad arguments: %+v", got.BadArgs)
			}
			if got.Deleted != "Deleted computer "+got.Created.ID+"." || !got.DeletedAgain.IsError || got.DeletedAgain.Text != "the computer is already gone: "+got.Created.ID {
				t.Errorf("deleted %q, again %+v", got.Deleted, got.DeletedAgain)
			}
		})
	}
}
