package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// testStopExactlyOnce: concurrent stops of one computer write one usage
// row and one computer.destroyed event; the others get ErrConflict.
func testStopExactlyOnce(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, conflict := 0, 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := db.Computers().Stop(ctx, store.Stop{ComputerID: "cmp_1", At: time.Now(), Seconds: 3, Reason: "deleted"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrConflict):
				conflict++
			default:
				t.Errorf("stop: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 1 || conflict != 15 {
		t.Fatalf("ok=%d conflict=%d, want 1 and 15", ok, conflict)
	}
	rows, err := db.Usage().List(ctx, store.UsageFilter{OrgID: "org_1"})
	if err != nil || len(rows) != 1 || rows[0].Quantity != 3 || rows[0].KeyID != "key_1" || rows[0].Kind != "sandbox_seconds" {
		t.Fatalf("usage rows %+v, err %v", rows, err)
	}
	evs, err := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", Type: "computer.destroyed"})
	if err != nil || len(evs) != 1 || evs[0].ComputerID != "cmp_1" || string(evs[0].Data) != `{"reason":"deleted","seconds":3}` {
		t.Fatalf("events %+v, err %v", evs, err)
	}
	c, err := db.Computers().Get(ctx, "org_1", "cmp_1")
	if err != nil || c.Status != store.StatusDestroyed || c.DestroyedAt == nil {
		t.Fatalf("computer %+v err %v", c, err)
	}
	if _, err := db.Computers().Get(ctx, "org_2", "cmp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cross-org get: %v, want ErrNotFound", err)
	}
	if alive, err := db.Computers().Alive(ctx); err != nil || len(alive) != 0 {
		t.Fatalf("alive after the stop: %+v %v", alive, err)
	}
}

// testReopenKeepsData: migrations run once; data survives a reopen.
func testReopenKeepsData(t *testing.T, b Backend) {
	ctx := context.Background()
	db, dir := b.open(t)
	seed(t, db)
	db.Close()
	db2 := b.Open(t, dir)
	n, err := db2.Orgs().Count(ctx)
	if err != nil || n != 1 {
		t.Fatalf("orgs after reopen: %d %v", n, err)
	}
	k, err := db2.Keys().ByHash(ctx, "h1")
	if err != nil || k.ID != "key_1" || string(k.Capabilities) != "{}" || string(k.Policy) != `{"settings":{}}` || k.Admin {
		t.Fatalf("key by hash: %+v %v", k, err)
	}
	if err := db2.Keys().Revoke(ctx, "key_1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := db2.Keys().Revoke(ctx, "key_1", time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second revoke: %v, want ErrNotFound", err)
	}
	if k, err := db2.Keys().Get(ctx, "key_1"); err != nil || k.RevokedAt == nil {
		t.Fatalf("revoked key: %+v %v", k, err)
	}
	org := store.Org{ID: "org_1", AllowComputer: false, ComputerInternet: true, ComputerInternetBulkRows: true, Policy: []byte(`{"settings":{"redact_pii":true}}`)}
	if err := db2.Orgs().Update(ctx, org); err != nil {
		t.Fatal(err)
	}
	got, err := db2.Orgs().Get(ctx, "org_1")
	if err != nil || got.AllowComputer || !got.ComputerInternet || !got.ComputerInternetBulkRows || string(got.Policy) != string(org.Policy) || got.Name != "one" {
		t.Fatalf("updated org: %+v %v", got, err)
	}
}

// testPauseResumeUsage: each running period of a computer is charged once
// (its own usage row), a pause only from ready and a resume only from
// paused, and the final stop of a paused computer charges nothing more.
func testPauseResumeUsage(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db)
	ctx := context.Background()
	cs := db.Computers()
	now := time.Now()
	if err := cs.Pause(ctx, store.Stop{ComputerID: "cmp_1", At: now, Seconds: 1}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("pause of a starting computer: %v, want ErrConflict", err)
	}
	if err := cs.MarkReady(ctx, "cmp_1", now); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := cs.Pause(ctx, store.Stop{ComputerID: "cmp_1", At: now, Seconds: int64(10 + i), Reason: "requested"}); err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
		if err := cs.Pause(ctx, store.Stop{ComputerID: "cmp_1", At: now, Seconds: 99}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second pause: %v, want ErrConflict", err)
		}
		c, err := cs.Get(ctx, "org_1", "cmp_1")
		if err != nil || c.Status != store.StatusPaused || c.Pauses != i+1 || c.PausedAt == nil {
			t.Fatalf("paused computer %+v, %v", c, err)
		}
		if alive, _ := cs.Alive(ctx); len(alive) != 1 {
			t.Fatalf("a paused computer is alive (not stopped): %+v", alive)
		}
		if i < 2 {
			if err := cs.Resume(ctx, "cmp_1", now, "i2", now.Add(time.Hour)); err != nil {
				t.Fatalf("resume %d: %v", i, err)
			}
			if err := cs.Resume(ctx, "cmp_1", now, "i2", now.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("resume of a ready computer: %v, want ErrConflict", err)
			}
			if c, _ := cs.Get(ctx, "org_1", "cmp_1"); c.Instance != "i2" || c.PausedAt != nil || c.Status != store.StatusReady {
				t.Fatalf("resumed computer %+v", c)
			}
		}
	}
	if err := cs.Stop(ctx, store.Stop{ComputerID: "cmp_1", At: now, Seconds: 50, Reason: "deleted"}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Usage().List(ctx, store.UsageFilter{OrgID: "org_1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range rows {
		got = append(got, r.Quantity)
	}
	if len(got) != 3 || got[0] != 10 || got[1] != 11 || got[2] != 12 {
		t.Fatalf("usage %v, want one row per running period: [10 11 12]", got)
	}
	evs, _ := db.Audit().List(ctx, store.EventFilter{OrgID: "org_1", Type: "computer.paused"})
	if len(evs) != 3 {
		t.Fatalf("%d computer.paused events, want 3", len(evs))
	}
	if c, _ := cs.Get(ctx, "org_1", "cmp_1"); c.Status != store.StatusDestroyed {
		t.Fatalf("after the stop: %s", c.Status)
	}
	if err := cs.SetExpiry(ctx, "cmp_1", now.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("extending a stopped computer: %v, want ErrNotFound", err)
	}
}
