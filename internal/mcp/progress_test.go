package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

// TestMCPProgress: a tool call that asks for progress (a progressToken)
// gets a progress notification every heartbeat while it runs, with its
// token, growing progress and a sentence, over /mcp and through `cubicle
// mcp` (which passes them on); a call that does not ask gets none.
func TestMCPProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.newKey(computerCaps)
	var mu sync.Mutex
	got := map[any][]*sdk.ProgressNotificationParams{}
	opts := &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		got[r.Params.ProgressToken] = append(got[r.Params.ProgressToken], r.Params)
	}}
	impl := &sdk.Implementation{Name: "progress-test", Version: "1"}
	overHTTP, err := sdk.NewClient(impl, opts).Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: withKey{key}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer overHTTP.Close()
	overStdio, err := sdk.NewClient(impl, opts).Connect(t.Context(), &sdk.CommandTransport{Command: mcpCommand(t, e.url, key)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer overStdio.Close()

	var c struct{ ID string }
	structured(t, call(t, overHTTP, mcp.CreateComputer, nil), &c)
	for name, s := range map[string]*sdk.ClientSession{"http": overHTTP, "stdio": overStdio} {
		p := &sdk.CallToolParams{Name: mcp.Exec, Arguments: map[string]any{"computer_id": c.ID, "command": "sleep 1.5; echo done"}}
		p.SetProgressToken(name)
		r, err := s.CallTool(t.Context(), p)
		if err != nil || r.IsError || !strings.Contains(text(r), "stdout:\ndone\n") {
			t.Fatalf("%s: %v %q", name, err, text(r))
		}
		mu.Lock()
		ns := got[name]
		mu.Unlock()
		if len(ns) < 3 {
			t.Errorf("%s: %d progress notifications in 1.5 s, want one every 200 ms", name, len(ns))
		}
		for i, n := range ns {
			if !strings.HasPrefix(n.Message, "still running after ") || (i > 0 && n.Progress <= ns[i-1].Progress) {
				t.Errorf("%s: notification %d: %+v", name, i, n)
			}
		}
	}
	mu.Lock()
	before := len(got)
	mu.Unlock()
	call(t, overStdio, mcp.Exec, map[string]any{"computer_id": c.ID, "command": "sleep 0.7"})
	mu.Lock()
	after := len(got)
	mu.Unlock()
	if after != before {
		t.Errorf("a call without a progress token got notifications: %v", got)
	}
	call(t, overHTTP, mcp.DeleteComputer, map[string]any{"computer_id": c.ID})
}

// withKey sends the Cubicle key with every request.
type withKey struct{ key string }

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}
