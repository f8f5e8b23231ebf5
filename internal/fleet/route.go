package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// route is what a request is about: the computer it names, and its
// owner once a lookup found it (or only the owner: a background
// response's server).
type route struct {
	computer string
	owner    *store.Instance
	what     string // what the request is about, in messages
	// record: the request reads the computer's record, which any replica
	// answers from the store (even while its owner is unreachable).
	record bool
}

// routeOf names the computer a request is for, "" for none (served
// here):
//   - the computers REST API: /v1/computers/{id}/…;
//   - the E2B protocols: /e2b/… with an E2b-Sandbox-Id header (envd, the
//     code interpreter), or /e2b[/v2]/sandboxes/{id}[/…] (the REST API);
//   - the Jupyter Kernel Gateway: /api/kernels/{kernel id}[/…], the
//     computer whose metadata names the kernel (Config.KernelMetadata);
//   - MCP: POST /mcp whose JSON-RPC body is a tools/call with a
//     computer_id argument (peeked; the body is served whole);
//   - a background response while it runs: /v1/responses/{id}[/…] (poll,
//     stream resumption, cancel) goes to the server running it;
//   - a response that continues one (POST /v1/responses whose body's
//     previous_response_id, peeked, names a response whose conversation
//     kept a computer: Config.KeptComputer) runs where that computer does.
//
// The last four cost a lookup or a peek, so they are made only where
// forwarding can happen (cluster.secret set).
func (f *Forwarder) routeOf(r *http.Request) (route, error) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1/computers/"):
		id := ComputerID(p)
		return route{computer: id, record: r.Method == http.MethodGet && p == "/v1/computers/"+id}, nil
	case p == "/e2b" || strings.HasPrefix(p, "/e2b/"):
		if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
			return route{computer: id}, nil
		}
		rest := strings.TrimPrefix(strings.TrimPrefix(p, "/e2b"), "/v2")
		if id, ok := strings.CutPrefix(rest, "/sandboxes/"); ok {
			id, _, _ = strings.Cut(id, "/")
			return route{computer: id}, nil
		}
	case strings.HasPrefix(p, "/api/kernels/") && f.cfg.KernelMetadata != "" && len(f.cfg.Secret) > 0:
		kernel, _, _ := strings.Cut(strings.TrimPrefix(p, "/api/kernels/"), "/")
		if kernel == "" {
			return route{}, nil
		}
		id, in, err := f.cfg.Owners.OwnerByMetadata(r.Context(), f.cfg.KernelMetadata, kernel)
		if err != nil {
			return route{}, err
		}
		return route{computer: id, owner: &in}, nil
	case p == "/mcp" && r.Method == http.MethodPost && f.cfg.MCPBodyLimit > 0 && len(f.cfg.Secret) > 0:
		return route{computer: peekJSON(r, f.cfg.MCPBodyLimit, "params", "arguments", "computer_id")}, nil
	case p == "/v1/responses" && r.Method == http.MethodPost && f.cfg.ResponsesBodyLimit > 0 && f.cfg.KeptComputer != "" && len(f.cfg.Secret) > 0:
		prev := peekJSON(r, f.cfg.ResponsesBodyLimit, "previous_response_id")
		if prev == "" {
			return route{}, nil
		}
		id, in, err := f.cfg.Owners.OwnerOfKept(r.Context(), prev, f.cfg.KeptComputer)
		if err != nil {
			return route{}, err
		}
		return route{computer: id, owner: &in}, nil
	case strings.HasPrefix(p, "/v1/responses/") && len(f.cfg.Secret) > 0:
		id, _, _ := strings.Cut(strings.TrimPrefix(p, "/v1/responses/"), "/")
		if id == "" {
			return route{}, nil
		}
		in, err := f.cfg.Owners.OwnerOfResponse(r.Context(), id)
		if err != nil {
			return route{}, err
		}
		return route{owner: &in, what: "response " + id}, nil
	}
	return route{}, nil
}

// ownerOf is the live owner of rt's computer, looked up unless routeOf
// found it.
func (f *Forwarder) ownerOf(ctx context.Context, rt route) (store.Instance, error) {
	if rt.owner != nil {
		return *rt.owner, nil
	}
	return f.cfg.Owners.Owner(ctx, rt.computer)
}

// peekJSON reads r's JSON body as far as the string member at path (at
// most limit bytes) and puts back what it read, so the body is served
// whole. "" when there is none, or the body is not what it should be
// (served here, where it is refused properly).
func peekJSON(r *http.Request, limit int64, path ...string) string {
	var seen bytes.Buffer
	dec := json.NewDecoder(io.TeeReader(io.LimitReader(r.Body, limit), &seen))
	id := findPath(dec, path...)
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(seen.Bytes()), r.Body), r.Body}
	return id
}

// findPath walks dec's object along keys to a string member, skipping
// every other value as it streams; "" when the path leads elsewhere.
func findPath(dec *json.Decoder, keys ...string) string {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		if k, _ := t.(string); k == keys[0] {
			if len(keys) == 1 {
				v, _ := dec.Token()
				s, _ := v.(string)
				return s
			}
			return findPath(dec, keys[1:]...)
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}
