package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// testResponsesConversation: a response keeps its conversation (or none)
// next to its body, org-scoped, and a later Put replaces both; its items
// are found by id, and go with it.
func testResponsesConversation(t *testing.T, b Backend) {
	ctx := context.Background()
	db, _ := b.open(t)
	rs := db.Responses()
	now := time.Now()
	if err := rs.Put(ctx, store.Response{ID: "resp_1", OrgID: "org_1", KeyID: "key_1", CreatedAt: now,
		Body: []byte(`{"id":"resp_1"}`), Conversation: []byte(`{"messages":[]}`),
		Items: map[string]json.RawMessage{"msg_1": []byte(`{"type":"message"}`)}}); err != nil {
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
	if item, err := rs.Item(ctx, "org_1", "msg_1"); err != nil || string(item) != `{"type":"message"}` {
		t.Fatalf("item: %s %v", item, err)
	}
	// Another organisation's Put of the same id changes nothing.
	if err := rs.Put(ctx, store.Response{ID: "resp_1", OrgID: "org_2", KeyID: "key_2", CreatedAt: now, Body: []byte(`{"evil":1}`)}); err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Get(ctx, "org_1", "resp_1"); string(r.Body) != `{"id":"resp_1"}` {
		t.Fatalf("another organisation replaced the body: %s", r.Body)
	}
	if err := rs.Put(ctx, store.Response{ID: "resp_1", OrgID: "org_1", KeyID: "key_1", CreatedAt: now, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Get(ctx, "org_1", "resp_1"); r.Conversation != nil || string(r.Body) != `{}` {
		t.Fatalf("replaced: %+v", r)
	}
	if _, err := rs.Item(ctx, "org_1", "msg_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replaced response's item: %v", err)
	}
	if err := rs.Delete(ctx, "org_2", "resp_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another organisation's delete: %v", err)
	}
	if err := rs.Delete(ctx, "org_1", "resp_2"); err != nil {
		t.Fatal(err)
	}
}

// testResponsesList: responses are listed by creation time, ties in the
// order they were stored, both ways, in pages after a response.
func testResponsesList(t *testing.T, b Backend) {
	ctx := context.Background()
	db, _ := b.open(t)
	rs := db.Responses()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	// Stored out of id order, three in the same second.
	for i, at := range []int{1, 0, 1, 1, 2} {
		id := fmt.Sprintf("resp_%c", 'e'-i)
		if err := rs.Put(ctx, store.Response{ID: id, OrgID: "org_1", KeyID: "key_1", CreatedAt: t0.Add(time.Duration(at) * time.Second), Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(after string, limit int, desc bool) []string {
		t.Helper()
		list, err := rs.List(ctx, "org_1", after, limit, desc)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range list {
			out = append(out, r.ID)
		}
		return out
	}
	asc := []string{"resp_d", "resp_e", "resp_c", "resp_b", "resp_a"}
	if got := ids("", 10, false); !slices.Equal(got, asc) {
		t.Fatalf("ascending %v, want %v", got, asc)
	}
	if got := ids("resp_e", 2, false); !slices.Equal(got, asc[2:4]) {
		t.Fatalf("after resp_e %v, want %v", got, asc[2:4])
	}
	if got := ids("resp_b", 10, true); !slices.Equal(got, []string{"resp_c", "resp_e", "resp_d"}) {
		t.Fatalf("descending after resp_b %v", got)
	}
	if got, err := rs.List(ctx, "org_2", "", 10, false); err != nil || len(got) != 0 {
		t.Fatalf("another organisation's list: %v %v", got, err)
	}
}

// testResponsesUnfinished: the responses still queued or in progress (in
// any organisation) are found, as stored; the others are not.
func testResponsesUnfinished(t *testing.T, b Backend) {
	ctx := context.Background()
	db, _ := b.open(t)
	rs := db.Responses()
	bodies := map[string]string{
		"resp_q": `{"id":"resp_q","status":"queued","background":true,"error":null}`,
		"resp_p": `{"id":"resp_p","status":"in_progress","background":true,"error":null}`,
		"resp_c": `{"id":"resp_c","status":"completed","background":true,"error":null}`,
		"resp_x": `{"id":"resp_x","status":"cancelled","background":true,"error":null}`,
	}
	for id, body := range bodies {
		org := "org_1"
		if id == "resp_p" {
			org = "org_2"
		}
		if err := rs.Put(ctx, store.Response{ID: id, OrgID: org, KeyID: "key_1", CreatedAt: time.Now(), Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := rs.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range list {
		got[r.OrgID+"/"+r.ID] = string(r.Body)
	}
	want := map[string]string{"org_1/resp_q": bodies["resp_q"], "org_2/resp_p": bodies["resp_p"]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("unfinished %v, want %v", got, want)
	}
}

// testResponsesRunning: a response stored with the instance running it
// names its owner until it is stored again without one; Orphaned finds
// it once that instance's last beat is older than asked (or it never
// beat), and never a response without an instance.
func testResponsesRunning(t *testing.T, b Backend) {
	ctx := context.Background()
	db, _ := b.open(t)
	rs := db.Responses()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	if err := db.Instances().Advertise(ctx, "srv_a", "http://10.0.0.1:8080", t0); err != nil {
		t.Fatal(err)
	}
	put := func(id, instance string) {
		t.Helper()
		if err := rs.Put(ctx, store.Response{ID: id, OrgID: "org_1", KeyID: "key_1", CreatedAt: t0,
			Body: []byte(`{"id":"` + id + `","status":"in_progress"}`), Instance: instance}); err != nil {
			t.Fatal(err)
		}
	}
	put("resp_a", "srv_a")
	put("resp_gone", "srv_never")
	put("resp_sync", "")
	if in, err := db.Instances().OwnerOfResponse(ctx, "resp_a"); err != nil || in.ID != "srv_a" || in.URL != "http://10.0.0.1:8080" {
		t.Fatalf("owner of resp_a: %+v, %v", in, err)
	}
	for _, id := range []string{"resp_sync", "resp_gone", "resp_x"} {
		if _, err := db.Instances().OwnerOfResponse(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("owner of %s: %v, want not found", id, err)
		}
	}
	ids := func(before time.Time) string {
		t.Helper()
		list, err := rs.Orphaned(ctx, before)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range list {
			out = append(out, r.ID+"@"+r.Instance)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := ids(t0); got != "resp_gone@srv_never" {
		t.Fatalf("orphaned while srv_a beats: %q", got)
	}
	if got := ids(t0.Add(time.Second)); got != "resp_a@srv_a resp_gone@srv_never" {
		t.Fatalf("orphaned after srv_a's lease: %q", got)
	}
	// A computer kept for the conversation names its owner.
	seed(t, db)
	if err := db.Computers().Create(ctx, store.Computer{ID: "cmp_kept", OrgID: "org_1", KeyID: "key_1", Status: store.StatusReady,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Instance: "srv_a"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, conv string }{{"resp_kept", `{"computer_id":"cmp_kept","shell_tasks":true}`}, {"resp_other", `{"computer_id":"cmp_none"}`}} {
		if err := rs.Put(ctx, store.Response{ID: c.id, OrgID: "org_1", KeyID: "key_1", CreatedAt: t0, Body: []byte(`{}`), Conversation: json.RawMessage(c.conv)}); err != nil {
			t.Fatal(err)
		}
	}
	if id, in, err := db.Instances().OwnerOfKept(ctx, "resp_kept", "computer_id"); err != nil || id != "cmp_kept" || in.ID != "srv_a" {
		t.Fatalf("owner of the kept computer: %q %+v, %v", id, in, err)
	}
	for _, c := range [][2]string{{"resp_other", "computer_id"}, {"resp_kept", "shell_tasks"}, {"resp_sync", "computer_id"}, {"resp_x", "computer_id"}} {
		if _, _, err := db.Instances().OwnerOfKept(ctx, c[0], c[1]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("owner kept for %v: %v, want not found", c, err)
		}
	}
	put("resp_a", "") // it ended
	if _, err := db.Instances().OwnerOfResponse(ctx, "resp_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("owner of an ended response: %v", err)
	}
	if got := ids(t0.Add(time.Second)); got != "resp_gone@srv_never" {
		t.Fatalf("orphaned once resp_a ended: %q", got)
	}
}
