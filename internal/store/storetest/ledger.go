package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// testNotFound: every lookup of something absent (or another
// organisation's) is store.ErrNotFound, a NotFound kind (a 404), never
// another error.
func testNotFound(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db)
	ctx := context.Background()
	now := time.Now()
	_, errOrg := db.Orgs().Get(ctx, "org_x")
	_, errKey := db.Keys().Get(ctx, "key_x")
	_, errHash := db.Keys().ByHash(ctx, "hx")
	_, errFile := db.Files().Get(ctx, "org_1", "file_x")
	_, errArt := db.Artifacts().Get(ctx, "org_1", "art_x")
	_, errResp := db.Responses().Get(ctx, "org_1", "resp_x")
	_, errItem := db.Responses().Item(ctx, "org_1", "item_x")
	_, errInst := db.Instances().LastSeen(ctx, "inst_x")
	_, errVol := db.Volumes().Get(ctx, "org_1", "vol")
	_, errVolDel := db.Volumes().Delete(ctx, "org_1", "vol", now)
	_, errList := db.Responses().List(ctx, "org_1", "resp_x", 10, false)
	for name, err := range map[string]error{
		"org": errOrg, "key": errKey, "key by hash": errHash, "file": errFile, "artifact": errArt, "response": errResp,
		"item": errItem, "instance": errInst, "volume": errVol, "volume delete": errVolDel, "responses after": errList,
		"org update":        db.Orgs().Update(ctx, store.Org{ID: "org_x"}),
		"key policy":        db.Keys().SetPolicy(ctx, "key_x", nil),
		"key revoke":        db.Keys().Revoke(ctx, "key_x", now),
		"file delete":       db.Files().Delete(ctx, "org_1", "file_x", now),
		"response delete":   db.Responses().Delete(ctx, "org_1", "resp_x"),
		"secret delete":     db.OrgSecrets().Delete(ctx, "org_1", "a.example.com", "X"),
		"expiry of missing": db.Computers().SetExpiry(ctx, "cmp_x", now),
	} {
		if !errors.Is(err, store.ErrNotFound) || !errdefs.IsNotFound(err) {
			t.Errorf("%s: %v, want store.ErrNotFound", name, err)
		}
	}
	if err := db.Files().Create(ctx, store.File{ID: "file_1", OrgID: "org_1", KeyID: "key_1", Filename: "a.txt", Bytes: 3, SHA256: "x", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Files().Get(ctx, "org_2", "file_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another organisation's file: %v", err)
	}
	if err := db.Files().Delete(ctx, "org_1", "file_1", now); err != nil {
		t.Fatal(err)
	}
	if err := db.Files().Delete(ctx, "org_1", "file_1", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if list, err := db.Files().List(ctx, "org_1"); err != nil || list == nil || len(list) != 0 {
		t.Errorf("files after the delete: %#v %v, want an empty list", list, err)
	}
}

// testPaging: usage and audit rows come back by id, in pages (After,
// Limit), within a time window, of one organisation only.
func testPaging(t *testing.T, b Backend) {
	db, _ := b.open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		org := "org_1"
		if i == 2 {
			org = "org_2"
		}
		e := store.Event{OrgID: org, KeyID: "key_1", Type: fmt.Sprintf("t.%d", i%2), ComputerID: "cmp", CreatedAt: t0.Add(time.Duration(i) * time.Minute)}
		if i == 0 {
			e.Data = []byte(`{"a": 1}`) // kept byte for byte
		}
		if err := db.Audit().Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	all, err := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1"})
	if err != nil || len(all) != 4 || string(all[0].Data) != `{"a": 1}` || string(all[1].Data) != "{}" || !all[3].CreatedAt.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("events %+v %v", all, err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Fatalf("events not by id: %+v", all)
		}
	}
	page, _ := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", Limit: 2})
	next, _ := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", Limit: 2, After: page[1].ID})
	if len(page) != 2 || len(next) != 2 || next[0].ID != all[2].ID || next[1].ID != all[3].ID {
		t.Fatalf("pages %+v then %+v", page, next)
	}
	win, _ := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", Since: t0.Add(time.Minute), Until: t0.Add(4 * time.Minute)})
	if len(win) != 2 || win[0].ID != all[1].ID || win[1].ID != all[2].ID {
		t.Fatalf("window [1m, 4m): %+v", win)
	}
	typed, _ := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", Type: "t.1"})
	if len(typed) != 2 {
		t.Fatalf("type t.1: %+v", typed)
	}
	if u, err := db.Usage().List(ctx, store.UsageFilter{OrgID: "org_1"}); err != nil || u == nil || len(u) != 0 {
		t.Fatalf("no usage: %#v %v, want an empty list", u, err)
	}
}

// testPagingWhileWriting: a reader paging by id (After) while writers add
// audit events and usage rows concurrently sees every row exactly once: a
// row never becomes visible below an id the reader has passed.
func testPagingWhileWriting(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db)
	ctx := context.Background()
	const writers, each = 6, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var err error
				if i%5 == 0 { // a computer's stop: a usage row and an event in one transaction
					id := fmt.Sprintf("cmp_%d_%d", w, i)
					err = db.Computers().Create(ctx, store.Computer{ID: id, OrgID: "org_1", KeyID: "key_1", Status: store.StatusReady,
						CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Instance: "i"})
					if err == nil {
						err = db.Computers().Stop(ctx, store.Stop{ComputerID: id, At: time.Now(), Seconds: 1, Reason: "deleted"})
					}
				} else {
					err = db.Audit().Record(ctx, store.Event{OrgID: "org_1", KeyID: "key_1", Type: "test", CreatedAt: time.Now()})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[int64]bool{}
	var after int64
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		page, err := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", After: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if seen[e.ID] || e.ID <= after {
				t.Fatalf("event %d seen twice or out of order (after %d)", e.ID, after)
			}
			seen[e.ID], after = true, e.ID
		}
		if finished && len(page) == 0 {
			break
		}
	}
	if want := writers * each; len(seen) != want {
		t.Fatalf("the reader saw %d events, want %d: one became visible below its cursor", len(seen), want)
	}
}

// testVolumes: a live volume's name is taken (ErrConflict, as a unique
// violation of either backend), its delete writes one usage row (size ×
// lifetime, rounded up) and one volume.deleted event, once, and frees the
// name.
func testVolumes(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Millisecond)
	vs := db.Volumes()
	v := store.Volume{ID: "vol_1", OrgID: "org_1", KeyID: "key_1", Name: "data", SizeMB: 64, CreatedAt: t0}
	if err := vs.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	v2 := v
	v2.ID = "vol_2"
	if err := vs.Create(ctx, v2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second live volume named data: %v, want ErrConflict", err)
	}
	if got, err := vs.Get(ctx, "org_1", "data"); err != nil || got.ID != "vol_1" || got.SizeMB != 64 || !got.CreatedAt.Equal(t0) || got.DeletedAt != nil {
		t.Fatalf("get: %+v %v", got, err)
	}
	at := t0.Add(2500 * time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	deleted := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := vs.Delete(ctx, "org_1", "data", at)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				deleted++
			} else if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("delete: %v", err)
			}
		}()
	}
	wg.Wait()
	if deleted != 1 {
		t.Fatalf("%d deletes succeeded, want 1", deleted)
	}
	u, _ := db.Usage().List(ctx, store.UsageFilter{OrgID: "org_1"})
	if len(u) != 1 || u[0].Kind != "volume_mb_seconds" || u[0].Quantity != 3*64 || u[0].ComputerID != "vol_1" {
		t.Fatalf("usage %+v, want one row of 3 s × 64 MB", u)
	}
	evs, _ := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", Type: "volume.deleted"})
	if len(evs) != 1 || string(evs[0].Data) != `{"name":"data","seconds":3,"size_mb":64}` {
		t.Fatalf("events %+v", evs)
	}
	if err := vs.Create(ctx, v2); err != nil {
		t.Fatalf("the name after the delete: %v", err)
	}
	if list, err := vs.List(ctx, "org_1"); err != nil || len(list) != 1 || list[0].ID != "vol_2" {
		t.Fatalf("list: %+v %v", list, err)
	}
}
