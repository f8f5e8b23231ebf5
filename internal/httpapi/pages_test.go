package httpapi_test

import (
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
	for q, param := range map[string]string{"limit=0": "limit", "limit=1001": "limit", "order=up": "order", "after=cmp_nope": "after"} {
		er := e.do(key, "GET", "/v1/computers?"+q, nil).wantError(t, http.StatusBadRequest, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != param {
			t.Errorf("%s: param %v, want %s", q, er.Error.Param, param)
		}
	}
}
