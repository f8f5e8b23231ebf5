package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
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
}
