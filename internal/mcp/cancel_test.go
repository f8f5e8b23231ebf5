package mcp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

// TestMCPCallEndsWithItsRequest: a tools/call whose client goes away
// (its POST cancelled) stops its process, as a REST exec does, whatever
// protocol version the client speaks; a client of one before 2026-07-28
// left it running up to the exec timeout.
func TestMCPCallEndsWithItsRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.newKey(computerCaps)
	id := e.computer(key)
	for _, version := range []string{"2025-06-18", "2025-03-26"} {
		marker := "/workspace/finished-" + version
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"computer_id":%q,"command":"sleep 3; touch %s"}}}`,
			mcp.Exec, id, marker)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if res, err := e.post(ctx, key, version, body); err == nil {
			// An SSE answer starts at once: read until the cancellation.
			buf := make([]byte, 4096)
			for err == nil {
				_, err = res.Body.Read(buf)
			}
			res.Body.Close()
		}
		cancel()
		time.Sleep(4 * time.Second) // past the command's own end
		if code := e.rest(key, "GET", "/v1/computers/"+id+"/files/"+strings.TrimPrefix(marker, "/workspace/")+"?stat=true", nil); code != http.StatusNotFound {
			t.Errorf("protocol %s: the command ran to its end after its client went (stat: %d)", version, code)
		}
	}
}

// TestMCPDuplicateArguments: a tool call that gives an argument twice is
// refused naming it, and nothing runs; the last one ran.
func TestMCPDuplicateArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.newKey(computerCaps)
	id := e.computer(key)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"computer_id":%q,"command":"touch /workspace/a","command":"touch /workspace/b"}}}`,
		mcp.Exec, id)
	res, err := e.post(t.Context(), key, "2025-06-18", body)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), `duplicate field \"command\"`) || !strings.Contains(string(b), `"isError":true`) {
		t.Errorf("a call with command twice: %s", b)
	}
	for _, f := range []string{"a", "b"} {
		if code := e.rest(key, "GET", "/v1/computers/"+id+"/files/"+f+"?stat=true", nil); code != http.StatusNotFound {
			t.Errorf("/workspace/%s exists: the refused call ran", f)
		}
	}
}

// computer creates a computer with key through REST and returns its id.
func (e *env) computer(key string) string {
	e.t.Helper()
	var c struct{ ID string }
	if code := e.restBody(key, "POST", "/v1/computers", map[string]any{}, &c); code != http.StatusCreated {
		e.t.Fatalf("create: %d", code)
	}
	return c.ID
}

// post sends one JSON-RPC message to /mcp as a client of protocol version
// would, without the SDK.
func (e *env) post(ctx context.Context, key, version, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	return http.DefaultClient.Do(req)
}
