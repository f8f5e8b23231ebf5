package computer_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // a second connection to the store's file

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// TestSharedStoreLeases: on a shared store (several replicas) a starting
// server leaves the computers of live replicas alone and marks failed
// those of a replica whose lease lapsed, and the running replicas mark
// failed the computers of one whose lease lapses later — each stop, usage
// row and computer.destroyed event once, though two replicas sweep.
func TestSharedStoreLeases(t *testing.T) {
	// Three replicas beat into one SQLite file: under a loaded CI host a
	// 600 ms lease lapsed for a replica that was beating (its computer
	// marked failed), so the lease is long enough that load cannot.
	const lease = 2 * time.Second
	shared := func(c *computer.Config) { c.Fleet = computer.Fleet{Shared: true, Lease: lease} }
	ctx := context.Background()
	dir := t.TempDir()
	a := newFixture(t, dir, &fakeDriver{}, shared)
	v, err := a.mgr.Create(ctx, a.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	orphan := func(id, instance string, lastBeat time.Time) {
		ready := now.Add(-time.Minute)
		if err := a.st.Computers().Create(ctx, store.Computer{ID: id, OrgID: a.p.Org.ID, KeyID: a.p.Key.ID, Status: store.StatusReady,
			CreatedAt: ready, ReadyAt: &ready, ExpiresAt: now.Add(time.Hour), Instance: instance}); err != nil {
			t.Fatal(err)
		}
		if err := a.st.Instances().Beat(ctx, instance, lastBeat); err != nil {
			t.Fatal(err)
		}
	}
	orphan("cmp_dead", "srv_dead", now.Add(-time.Minute))
	orphan("cmp_late", "srv_late", now.Add(time.Hour)) // beats "until" an hour from now

	// B and C start: the dead replica's computer is marked failed once; A's
	// and the late one's (their leases hold) are left.
	b := newFixture(t, dir, &fakeDriver{}, shared)
	newFixture(t, dir, &fakeDriver{}, shared)
	// Each is charged from its start up to its replica's last beat (and
	// a beat's interval): cmp_dead about a second, cmp_late a minute.
	check := func(id string, charged int64) {
		t.Helper()
		got, err := b.mgr.Get(ctx, b.p, id)
		if err != nil || got.Status != store.StatusFailed || got.Failure != computer.FailureServerStopped {
			t.Fatalf("%s: %+v %v", id, got, err)
		}
		if rows := b.usage(id); len(rows) != 1 || rows[0].Quantity < charged || rows[0].Quantity > charged+2 {
			t.Fatalf("usage of %s: %+v", id, rows)
		}
		if evs := b.events(id, "computer.destroyed"); len(evs) != 1 {
			t.Fatalf("computer.destroyed of %s: %+v", id, evs)
		}
	}
	check("cmp_dead", 1)
	for _, id := range []string{v.ID, "cmp_late"} {
		if got, err := b.mgr.Get(ctx, b.p, id); err != nil || got.Status != store.StatusReady {
			t.Fatalf("%s of a live replica after B started: %+v %v", id, got, err)
		}
	}

	// The late replica stops beating: its lease lapses and B or C (both
	// sweep) marks its computer failed, once.
	if err := a.st.Instances().Beat(ctx, "srv_late", time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * lease)
	for {
		got, err := b.mgr.Get(ctx, b.p, "cmp_late")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.StatusReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cmp_late still ready %v after its replica's last beat", 10*lease)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * lease) // more sweeps of B and C write nothing more
	check("cmp_late", 60)
	if got, err := b.mgr.Get(ctx, b.p, v.ID); err != nil || got.Status != store.StatusReady {
		t.Fatalf("A's computer (A beats): %+v %v", got, err)
	}
}

// TestFenceOnLostLease: a replica whose heartbeats fail for longer than
// its lease (here: its instances table is gone) ends its own computers,
// as the others are marking them failed; once the database answers again
// the stop is recorded, once, with why.
func TestFenceOnLostLease(t *testing.T) {
	const lease = 600 * time.Millisecond
	ctx := context.Background()
	dir := t.TempDir()
	drv := &fakeDriver{}
	f := newFixture(t, dir, drv, func(c *computer.Config) { c.Fleet = computer.Fleet{Shared: true, Lease: lease} })
	v, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dir)
	if _, err := db.Exec(`ALTER TABLE instances RENAME TO instances_away`); err != nil {
		t.Fatal(err)
	}
	sb := drv.Sandboxes()[0]
	time.Sleep(lease / 2)
	if sb.Kills.Load() != 0 {
		t.Fatal("killed before its lease lapsed")
	}
	waitFor(t, "the computer killed once the lease lapsed", func() bool { return sb.Kills.Load() == 1 })
	if _, err := db.Exec(`ALTER TABLE instances_away RENAME TO instances`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "its stop recorded", func() bool {
		got, err := f.mgr.Get(ctx, f.p, v.ID)
		return err == nil && got.Status == store.StatusFailed && got.Failure == computer.FailureLeaseLost
	})
	if rows := f.usage(v.ID); len(rows) != 1 {
		t.Fatalf("usage: %+v", rows)
	}
	if evs := f.events(v.ID, "computer.destroyed"); len(evs) != 1 {
		t.Fatalf("computer.destroyed: %+v", evs)
	}
}

// TestFenceOnLateBeat: a replica whose heartbeat succeeds only after its
// lease lapsed (the database held by a long write transaction, in which
// "another replica" marks one of its computers failed) ends that
// computer, without writing a second stop, and keeps the other running.
func TestFenceOnLateBeat(t *testing.T) {
	const lease = 600 * time.Millisecond
	ctx := context.Background()
	dir := t.TempDir()
	drv := &fakeDriver{}
	f := newFixture(t, dir, drv, func(c *computer.Config) { c.Fleet = computer.Fleet{Shared: true, Lease: lease} })
	gone, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dir)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `UPDATE computers SET status = 'failed', failure = ? WHERE id = ?`,
		computer.FailureServerStopped, gone.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * lease)
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	sbs := drv.Sandboxes() // in creation order: gone's, kept's
	waitFor(t, "the computer marked failed killed after the late beat", func() bool { return sbs[0].Kills.Load() == 1 })
	time.Sleep(lease)
	if n := sbs[1].Kills.Load(); n != 0 {
		t.Fatalf("the computer nobody marked was killed %d times", n)
	}
	if got, err := f.mgr.Get(ctx, f.p, gone.ID); err != nil || got.Failure != computer.FailureServerStopped {
		t.Fatalf("the marked computer's record: %+v %v", got, err)
	}
	if rows := f.usage(gone.ID); len(rows) != 0 {
		t.Fatalf("a second stop written: %+v", rows)
	}
	if got, err := f.mgr.Get(ctx, f.p, kept.ID); err != nil || got.Status != store.StatusReady {
		t.Fatalf("the kept computer: %+v %v", got, err)
	}
}

// rawDB is a connection of its own to the fixture's database in dir, as
// another replica (or an operator) would have; closed at the test's end.
func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "c.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
