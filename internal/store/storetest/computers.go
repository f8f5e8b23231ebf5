package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// testComputersPage: a computer list is paged by the store (GET
// /v1/computers): at most Limit rows, by creation then id (ties broken by
// id), newest first with Desc, after a given computer of the selection
// (ErrNotFound for one outside it), filters applied before the page.
func testComputersPage(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db) // cmp_1, starting, created now
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	want := []string{}
	for i := range 30 {
		id := fmt.Sprintf("cmp_p%02d", i)
		// Three computers per millisecond: the id orders them.
		c := store.Computer{ID: id, OrgID: "org_1", KeyID: "key_1", Status: store.StatusReady,
			CreatedAt: base.Add(time.Duration(i/3) * time.Millisecond), ExpiresAt: base.Add(2 * time.Hour), Instance: "i"}
		if err := db.Computers().Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	if err := db.Computers().Stop(ctx, store.Stop{ComputerID: "cmp_p05", At: time.Now(), Reason: "deleted"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "cmp_1")
	ids := func(f store.ComputerFilter) []string {
		t.Helper()
		f.OrgID = "org_1"
		cs, err := db.Computers().List(ctx, f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		out := []string{}
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	// Every computer, four at a time (five rows asked: a page and one
	// more to tell whether there are more).
	var got []string
	after := ""
	for range 20 {
		page := ids(store.ComputerFilter{After: after, Limit: 5})
		if len(page) > 5 {
			t.Fatalf("a page of limit 5 read %d rows", len(page))
		}
		got = append(got, page[:min(4, len(page))]...)
		if len(page) < 5 {
			break
		}
		after = page[3]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	desc := slices.Clone(want)
	slices.Reverse(desc)
	if got := ids(store.ComputerFilter{Desc: true, Limit: 3}); !slices.Equal(got, desc[:3]) {
		t.Errorf("newest first %v, want %v", got, desc[:3])
	}
	if got := ids(store.ComputerFilter{Desc: true, After: "cmp_p07", Limit: 4}); !slices.Equal(got, []string{"cmp_p06", "cmp_p05", "cmp_p04", "cmp_p03"}) {
		t.Errorf("newest first after cmp_p07: %v", got)
	}
	if got := ids(store.ComputerFilter{AliveOnly: true, After: "cmp_p03", Limit: 3}); !slices.Equal(got, []string{"cmp_p04", "cmp_p06", "cmp_p07"}) {
		t.Errorf("alive after cmp_p03: %v", got)
	}
	if got := ids(store.ComputerFilter{}); !slices.Equal(got, want) {
		t.Errorf("no limit: %v", got)
	}
	for _, f := range []store.ComputerFilter{
		{OrgID: "org_1", AliveOnly: true, After: "cmp_p05"}, // stopped: not in the selection
		{OrgID: "org_1", After: "cmp_nope"},
		{OrgID: "org_2", After: "cmp_p01"},
	} {
		if _, err := db.Computers().List(ctx, f); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("list %+v: %v, want ErrNotFound", f, err)
		}
	}
}
