package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	respgw "github.com/cubicle-sandbox/cubicle/internal/responses"
)

type idPage struct {
	Data    []struct{ ID string } `json:"data"`
	HasMore bool                  `json:"has_more"`
	FirstID *string               `json:"first_id"`
	LastID  *string               `json:"last_id"`
}

// TestListPages: Cubicle's own lists page with limit and after in a
// stable order (computers oldest first, order=desc reverses it), say
// has_more, and refuse bad parameters with 400 naming them.
func TestListPages(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	var ids []string
	for range 3 {
		ids = append(ids, e.create(key, nil).ID)
	}
	var p idPage
	e.do(key, "GET", "/v1/computers?limit=2", nil).json(t, &p)
	if len(p.Data) != 2 || !p.HasMore || p.Data[0].ID != ids[0] || p.Data[1].ID != ids[1] || *p.LastID != ids[1] {
		t.Fatalf("first page %+v, want %v", p, ids[:2])
	}
	e.do(key, "GET", "/v1/computers?limit=2&after="+*p.LastID, nil).json(t, &p)
	if len(p.Data) != 1 || p.HasMore || p.Data[0].ID != ids[2] {
		t.Fatalf("second page %+v, want %v", p, ids[2:])
	}
	e.do(key, "GET", "/v1/computers?order=desc&limit=1", nil).json(t, &p)
	if len(p.Data) != 1 || p.Data[0].ID != ids[2] || !p.HasMore {
		t.Fatalf("newest first: %+v", p)
	}
	// Usage and audit page by row id: the three created events, two by two.
	type rowPage struct {
		Data []struct {
			ID   int64  `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
		HasMore bool   `json:"has_more"`
		LastID  *int64 `json:"last_id"`
	}
	var a, b rowPage
	e.do(key, "GET", "/v1/audit?type=computer.created&limit=2", nil).json(t, &a)
	if len(a.Data) != 2 || !a.HasMore || *a.LastID != a.Data[1].ID {
		t.Fatalf("audit page 1: %+v", a)
	}
	e.do(key, "GET", fmt.Sprintf("/v1/audit?type=computer.created&limit=2&after=%d", *a.LastID), nil).json(t, &b)
	if len(b.Data) != 1 || b.HasMore || b.Data[0].ID <= a.Data[1].ID {
		t.Fatalf("audit page 2: %+v after %+v", b, a)
	}
	for _, id := range ids {
		e.do(key, "DELETE", "/v1/computers/"+id, nil)
	}
	e.do(key, "GET", "/v1/usage?limit=1", nil).json(t, &a)
	if len(a.Data) != 1 || !a.HasMore {
		t.Fatalf("usage page: %+v", a)
	}
	e.do(key, "GET", "/v1/usage?after=x", nil).wantError(t, http.StatusBadRequest, "invalid_request")
	for q, param := range map[string]string{"limit=0": "limit", "limit=1001": "limit", "order=up": "order", "after=cmp_nope": "after"} {
		er := e.do(key, "GET", "/v1/computers?"+q, nil).wantError(t, http.StatusBadRequest, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != param {
			t.Errorf("%s: param %v, want %s", q, er.Error.Param, param)
		}
	}
	// The admin lists page too (issue 17 item 5): organisations and keys,
	// oldest first.
	for _, name := range []string{"second", "third"} {
		if r := e.do(e.admin, "POST", "/v1/admin/orgs", map[string]any{"name": name}); r.code != http.StatusCreated {
			t.Fatalf("create org: %s", r)
		}
	}
	var orgs idPage
	e.do(e.admin, "GET", "/v1/admin/orgs?limit=1", nil).json(t, &orgs)
	first := *orgs.LastID
	if len(orgs.Data) != 1 || !orgs.HasMore {
		t.Fatalf("organisations page 1: %+v", orgs)
	}
	e.do(e.admin, "GET", "/v1/admin/orgs?limit=1000&after="+first, nil).json(t, &orgs)
	if len(orgs.Data) != 2 || orgs.HasMore || orgs.Data[0].ID == first {
		t.Fatalf("organisations after %s: %+v", first, orgs)
	}
	var keys idPage
	e.do(e.admin, "GET", "/v1/admin/keys?limit=1&order=desc", nil).json(t, &keys)
	if len(keys.Data) != 1 || !keys.HasMore {
		t.Fatalf("keys page: %+v", keys)
	}
	e.do(e.admin, "GET", "/v1/admin/keys?limit=0", nil).wantError(t, http.StatusBadRequest, "invalid_request")
}

// TestListStoredResponses: GET /v1/responses (no Upgrade) pages the
// organisation's stored responses, newest first (OpenAI's parameters);
// another organisation sees none of them.
func TestListStoredResponses(t *testing.T) {
	e := newEnv(t, nil)
	e.withGatewayConfig(respgw.Config{UpstreamURL: newScripted(t, func(int, map[string]any) (int, any) {
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "hi"})
	}).srv.URL + "/v1", Model: "m"})
	_, key := e.newKey("", computerCaps)
	var ids []string
	for range 3 {
		var out struct{ ID string }
		e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "hello"}).json(t, &out)
		ids = append(ids, out.ID)
	}
	var p idPage
	e.do(key, "GET", "/v1/responses?limit=2", nil).json(t, &p)
	if len(p.Data) != 2 || !p.HasMore || p.Data[0].ID != ids[2] || p.Data[1].ID != ids[1] {
		t.Fatalf("newest first: %+v, created %v", p, ids)
	}
	e.do(key, "GET", "/v1/responses?limit=2&after="+*p.LastID, nil).json(t, &p)
	if len(p.Data) != 1 || p.HasMore || p.Data[0].ID != ids[0] {
		t.Fatalf("second page: %+v", p)
	}
	e.do(key, "GET", "/v1/responses?order=asc&limit=1", nil).json(t, &p)
	if len(p.Data) != 1 || p.Data[0].ID != ids[0] {
		t.Fatalf("oldest first: %+v", p)
	}
	e.do(key, "GET", "/v1/responses?after=resp_nope", nil).wantError(t, http.StatusBadRequest, "invalid_request")
	_, other := e.newKey(e.newOrg("other", true), computerCaps)
	e.do(other, "GET", "/v1/responses", nil).json(t, &p)
	if len(p.Data) != 0 || p.HasMore {
		t.Fatalf("another organisation's list: %+v", p)
	}
}
