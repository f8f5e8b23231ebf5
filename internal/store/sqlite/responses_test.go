package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// TestResponsesConversation: a response keeps its conversation (or none)
// next to its body, org-scoped, and a later Put replaces both.
func TestResponsesConversation(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "r.db"))
	rs := db.Responses()
	now := time.Now()
	if err := rs.Put(ctx, store.Response{ID: "resp_1", OrgID: "org_1", KeyID: "key_1", CreatedAt: now,
		Body: []byte(`{"id":"resp_1"}`), Conversation: []byte(`{"messages":[]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := rs.Put(ctx, store.Response{ID: "resp_2", OrgID: "org_1", KeyID: "key_1", CreatedAt: now, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	r, err := rs.Get(ctx, "org_1", "resp_1")
	if err != nil || string(r.Conversation) != `{"messages":[]}` || string(r.Body) != `{"id":"resp_1"}` {
		t.Fatalf("get: %+v %v", r, err)
	}
	if r, err := rs.Get(ctx, "org_1", "resp_2"); err != nil || r.Conversation != nil {
		t.Fatalf("without conversation: %+v %v", r, err)
	}
	if _, err := rs.Get(ctx, "org_2", "resp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	if err := rs.Put(ctx, store.Response{ID: "resp_1", OrgID: "org_1", KeyID: "key_1", CreatedAt: now, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Get(ctx, "org_1", "resp_1"); r.Conversation != nil || string(r.Body) != `{}` {
		t.Fatalf("replaced: %+v", r)
	}
}
