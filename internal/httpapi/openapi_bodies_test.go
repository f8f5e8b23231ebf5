package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
)

// TestOpenAPIBodies validates answers that testdata/golden does not pin
// (lists and pages, deletes, containers, files, admin, health, a tool's
// 422) against the document the server itself serves at /openapi.json,
// on the golden fake computer.
func TestOpenAPIBodies(t *testing.T) {
	drv := &sandboxtest.Driver{New: goldenSandbox}
	e := newEnvOn(t, t.TempDir(), drv, nil, withFiles)
	var doc map[string]any
	r := e.do("", "GET", "/openapi.json", nil)
	if r.code != http.StatusOK {
		t.Fatalf("GET /openapi.json without a key: %s", r)
	}
	r.json(t, &doc)
	keyID, key := e.newKey("", computerCaps)
	org := e.newOrg("acme", true)

	check := func(operation string, status int, r resp) resp {
		t.Helper()
		if r.code != status {
			t.Fatalf("%s: %s, want %d", operation, r, status)
		}
		var body any
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("%s: %v: %s", operation, err, r.body)
		}
		for _, e := range httpapi.CheckOpenAPIAnswer(doc, operation, status, body) {
			t.Errorf("%s: %s", r.body, e)
		}
		return r
	}
	idOf := func(r resp) string {
		var v struct{ ID string }
		r.json(t, &v)
		return v.ID
	}

	check("GET /healthz", 200, e.do("", "GET", "/healthz", nil))
	check("GET /readyz", 200, e.do("", "GET", "/readyz", nil))
	check("GET /v1/tools", 200, e.do(key, "GET", "/v1/tools", nil))
	check("POST /v1/tools/{name}/call", 422, e.do(key, "POST", "/v1/tools/builtin__computer_exec/call", map[string]any{"arguments": map[string]any{}}))
	check("GET /v1/templates", 200, e.do(key, "GET", "/v1/templates", nil))
	check("GET /v1/templates/{name}", 200, e.do(key, "GET", "/v1/templates/host", nil))
	check("GET /v1/computer-egress", 200, e.do(key, "GET", "/v1/computer-egress", nil))

	c := idOf(check("POST /v1/containers", 200, e.do(key, "POST", "/v1/containers", map[string]any{"name": "box"})))
	check("GET /v1/containers", 200, e.do(key, "GET", "/v1/containers", nil))
	check("GET /v1/containers/{id}", 200, e.do(key, "GET", "/v1/containers/"+c, nil))
	check("GET /v1/containers/{id}/files", 200, e.do(key, "GET", "/v1/containers/"+c+"/files", nil))
	check("POST /v1/computers/{id}/lifetime", 200, e.do(key, "POST", "/v1/computers/"+c+"/lifetime", map[string]any{"lifetime_seconds": 60}))
	check("GET /v1/computers/{id}/egress", 200, e.do(key, "GET", "/v1/computers/"+c+"/egress", nil))
	check("DELETE /v1/containers/{id}", 200, e.do(key, "DELETE", "/v1/containers/"+c, nil))

	f := idOf(check("POST /v1/files", 200, e.do(key, "POST", "/v1/files?filename=a.txt", "abc")))
	check("GET /v1/files", 200, e.do(key, "GET", "/v1/files", nil))
	check("GET /v1/files/{id}", 200, e.do(key, "GET", "/v1/files/"+f, nil))
	check("GET /v1/artifacts", 200, e.do(key, "GET", "/v1/artifacts", nil))
	check("GET /v1/volumes", 200, e.do(key, "GET", "/v1/volumes", nil))

	sc := map[string]any{"name": "report", "description": "d", "input_schema": map[string]any{"type": "object"}, "source": "echo hi\n",
		"timeout_seconds": 5}
	check("POST /v1/scripts", 201, e.do(e.admin, "POST", "/v1/scripts", sc))
	check("GET /v1/scripts", 200, e.do(e.admin, "GET", "/v1/scripts", nil))
	check("GET /v1/scripts/{name}", 200, e.do(e.admin, "GET", "/v1/scripts/report", nil))
	check("PUT /v1/scripts/{name}", 200, e.do(e.admin, "PUT", "/v1/scripts/report", sc))
	check("GET /v1/tools", 200, e.do(key, "GET", "/v1/tools", nil))

	check("PATCH /v1/admin/orgs/{id}", 200, e.do(e.admin, "PATCH", "/v1/admin/orgs/"+org, map[string]any{"computer_internet": false}))
	check("GET /v1/admin/orgs/{id}/domain_secrets", 200, e.do(e.admin, "GET", "/v1/admin/orgs/"+org+"/domain_secrets", nil))
	// The smallest bodies the server takes are valid by the document
	// (it required what the handlers default: org_id, capabilities, an
	// org's switches, a link's expiry).
	for _, c := range []struct {
		operation, path string
		body            map[string]any
	}{
		{"POST /v1/admin/keys", "/v1/admin/keys", map[string]any{}},
		{"POST /v1/admin/orgs", "/v1/admin/orgs", map[string]any{"name": "small"}},
		{"PATCH /v1/admin/orgs/{id}", "/v1/admin/orgs/" + org, map[string]any{}},
	} {
		for _, err := range httpapi.CheckOpenAPIRequest(doc, c.operation, c.body) {
			t.Errorf("%s %v: %s", c.operation, c.body, err)
		}
		method, _, _ := strings.Cut(c.operation, " ")
		if r := e.do(e.admin, method, c.path, c.body); r.code >= 300 {
			t.Errorf("%s %v: %s", c.operation, c.body, r)
		}
	}
	for _, err := range httpapi.CheckOpenAPIRequest(doc, "POST /v1/computers/{id}/links", map[string]any{"port": 80}) {
		t.Errorf("a link without expires_in_seconds: %s", err)
	}
	check("PATCH /v1/admin/keys/{id}", 200, e.do(e.admin, "PATCH", "/v1/admin/keys/"+keyID, map[string]any{"policy": map[string]any{"settings": map[string]any{}}}))
	check("GET /v1/admin/keys", 200, e.do(e.admin, "GET", fmt.Sprintf("/v1/admin/keys?org_id=%s", org), nil))
	check("DELETE /v1/responses/{id}", 404, e.do(key, "DELETE", "/v1/responses/resp_missing", nil))
	check("POST /v1/responses/{id}/cancel", 503, e.do(key, "POST", "/v1/responses/resp_missing/cancel", nil))
}
