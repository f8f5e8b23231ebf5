package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi/httpapitest"
	"github.com/cubicle-sandbox/cubicle/internal/mcp"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// agentBin is the real cubicle binary: computers run it as their agent,
// and the stdio test runs it as `cubicle mcp`.
var agentBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &agentBin))
}

const adminSecret = "cub_test_admin_secret_mcp01"

// env is one in-process server: real SQLite, real linux driver, real
// computers, the real REST API (which serves /mcp) over real HTTP.
type env struct {
	t     *testing.T
	url   string
	gov   *governance.Service
	admin governance.Principal
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg := httpapitest.Config()
	cfg.Prelude = config.DefaultPrelude // matplotlib inline, as serve's default
	srv := httpapitest.Start(t, agentBin, adminSecret, cfg)
	return &env{t: t, url: srv.URL, gov: srv.Gov, admin: srv.Admin}
}

// newKey makes a key of the admin's organisation with capabilities caps
// (JSON, the seed's shape) and returns its secret.
func (e *env) newKey(caps string) string {
	e.t.Helper()
	c, err := governance.ParseCapabilities([]byte(caps))
	if err != nil {
		e.t.Fatal(err)
	}
	_, secret, err := e.gov.CreateKey(context.Background(), e.admin.Org.ID, "mcp-test", c)
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// computerCaps is the seed's capability set of a key that uses computers.
const computerCaps = `{"tooling":{"system_tools":["computer"]},"computer":{},"files":{},"artifacts":{}}`

// connect opens a Go SDK client session on /mcp with key.
func (e *env) connect(key string) *sdk.ClientSession {
	e.t.Helper()
	s, err := mcp.Dial(e.t.Context(), e.url, key)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and fails the test on a protocol error.
func call(t *testing.T, s *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// text is a result's text content, joined.
func text(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, r *sdk.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// rest does a REST call with key and decodes the JSON answer into v (nil:
// none); it returns the status.
func (e *env) rest(key, method, path string, v any) int {
	e.t.Helper()
	return e.restBody(key, method, path, nil, v)
}

// restBody is rest with a JSON body (nil: none).
func (e *env) restBody(key, method, path string, body, v any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}
