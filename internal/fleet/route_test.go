package fleet

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type kernelOwners struct{ kernels map[string]string }

func (kernelOwners) Owner(context.Context, string) (store.Instance, error) {
	return store.Instance{}, store.ErrNotFound
}

func (kernelOwners) OwnerOfKept(_ context.Context, id, key string) (string, store.Instance, error) {
	if id == "resp_kept" && key == "computer_id" {
		return "cmp_kept", store.Instance{ID: "srv_d"}, nil
	}
	return "", store.Instance{}, store.ErrNotFound
}

func (kernelOwners) OwnerOfResponse(_ context.Context, id string) (store.Instance, error) {
	if id == "resp_bg" {
		return store.Instance{ID: "srv_c"}, nil
	}
	return store.Instance{}, store.ErrNotFound
}

func (o kernelOwners) OwnerByMetadata(_ context.Context, key, value string) (string, store.Instance, error) {
	if id, ok := o.kernels[value]; ok && key == "jupyter_kernel_id" {
		return id, store.Instance{ID: "srv_b"}, nil
	}
	return "", store.Instance{}, store.ErrNotFound
}

// TestRouteOf: each protocol's request names its computer — REST paths,
// E2B sandbox headers and paths, Kernel Gateway kernels by their
// computer's metadata, MCP tool calls by their computer_id argument —
// and an MCP body read to find it is served whole.
func TestRouteOf(t *testing.T) {
	f := New(Config{Secret: []byte(strings.Repeat("s", MinSecret)), KernelMetadata: "jupyter_kernel_id", MCPBodyLimit: 1 << 20,
		KeptComputer: "computer_id", ResponsesBodyLimit: 1 << 20,
		Owners: kernelOwners{map[string]string{"k-1": "cmp_k"}}}, nil)
	long := strings.Repeat("x", 100<<10)
	for _, c := range []struct {
		method, path, header, body string
		want                       string
		record                     bool
	}{
		{"GET", "/v1/computers/cmp_1", "", "", "cmp_1", true},
		{"POST", "/v1/computers/cmp_1/exec", "", "", "cmp_1", false},
		{"GET", "/v1/computers", "", "", "", false},
		{"POST", "/e2b/files", "cmp_2", "", "cmp_2", false},
		{"GET", "/e2b/sandboxes/cmp_3", "", "", "cmp_3", false},
		{"POST", "/e2b/v2/sandboxes/cmp_3/connect", "", "", "cmp_3", false},
		{"GET", "/e2b/v2/sandboxes", "", "", "", false},
		{"GET", "/api/kernels/k-1/channels", "", "", "cmp_k", false},
		{"GET", "/api/kernels/k-9", "", "", "", false},
		{"GET", "/api/kernels", "", "", "", false},
		{"POST", "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"content":"` + long + `","computer_id":"cmp_4"}}}`, "cmp_4", false},
		{"POST", "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", false},
		{"POST", "/mcp", "", `{"params":{"arguments":{"computer_id":7}}}`, "", false},
		{"POST", "/mcp", "", `not json`, "", false},
		{"GET", "/v1/responses/resp_bg", "", "", "", false},
		{"POST", "/v1/responses/resp_bg/cancel", "", "", "", false},
		{"GET", "/v1/responses/resp_done", "", "", "", false},
		{"POST", "/v1/responses", "", `{"input":"` + long + `","previous_response_id":"resp_kept"}`, "cmp_kept", false},
		{"POST", "/v1/responses", "", `{"input":"hi","previous_response_id":"resp_done"}`, "", false},
		{"POST", "/v1/responses", "", `{"input":"hi"}`, "", false},
	} {
		r, _ := http.NewRequest(c.method, "http://h"+c.path, strings.NewReader(c.body))
		if c.header != "" {
			r.Header.Set("E2b-Sandbox-Id", c.header)
		}
		rt, err := f.routeOf(r)
		if (err != nil) != (c.want == "" && strings.HasPrefix(c.path, "/api/kernels/") || strings.Contains(c.path+c.body, "resp_done")) {
			t.Errorf("%s %s: error %v", c.method, c.path, err)
		}
		if bg := strings.HasPrefix(c.path, "/v1/responses/resp_bg"); bg != (rt.owner != nil && rt.owner.ID == "srv_c") {
			t.Errorf("%s %s: owner %+v", c.method, c.path, rt.owner)
		}
		if rt.computer != c.want || rt.record != c.record {
			t.Errorf("%s %s: route %+v, want %q (record %v)", c.method, c.path, rt, c.want, c.record)
		}
		if body, _ := io.ReadAll(r.Body); string(body) != c.body {
			t.Errorf("%s %s: the body served is %d bytes, want the %d sent", c.method, c.path, len(body), len(c.body))
		}
	}
	// Without a cluster secret nothing is looked up or peeked.
	f.cfg.Secret = nil
	r, _ := http.NewRequest("GET", "http://h/api/kernels/k-1", nil)
	if rt, err := f.routeOf(r); err != nil || rt.computer != "" {
		t.Errorf("a kernel without a cluster: %+v %v", rt, err)
	}
}
