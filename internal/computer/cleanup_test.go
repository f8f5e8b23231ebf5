package computer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// createAndDelete makes a computer and deletes it: where the tests of the
// cleanup that follows a DELETE start.
func (f *fixture) createAndDelete(ctx context.Context) computer.View {
	f.t.Helper()
	v, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.mgr.Delete(ctx, f.p, v.ID); err != nil {
		f.t.Fatalf("delete: %v", err)
	}
	return v
}

// TestDeleteAnswersAfterKillBeforeCleanup: DELETE returns once the
// computer is killed, with its stop, usage and audit event recorded once,
// while its resources are still being freed in the background.
func TestDeleteAnswersAfterKillBeforeCleanup(t *testing.T) {
	drv := &fakeDriver{}
	started, release := blockingDestroy(drv)
	f := newFixture(t, "", drv, nil)
	ctx := context.Background()
	v := f.createAndDelete(ctx)
	sb := drv.Sandboxes()[0]
	if n := sb.Kills.Load(); n != 1 {
		t.Fatalf("delete answered with the computer killed %d times, want 1", n)
	}
	<-started // the cleanup runs, and is held
	if got, err := f.mgr.Get(ctx, f.p, v.ID); err != nil || got.Status != store.StatusDestroyed {
		t.Fatalf("status while cleaning up: %+v %v", got, err)
	}
	if rows, evs := f.usage(v.ID), f.events(v.ID, "computer.destroyed"); len(rows) != 1 || len(evs) != 1 {
		t.Fatalf("while cleaning up: usage %+v, computer.destroyed %+v", rows, evs)
	}
	if s := f.mgr.Snapshot(); s.ByState["ready"] != 0 || s.ByState["stopping"] != 1 {
		t.Fatalf("metrics while cleaning up: %v", s.ByState)
	}
	if _, err := f.mgr.Exec(ctx, f.p, v.ID, computer.ExecRequest{Command: "true"}, nil); !errors.Is(err, computer.ErrGone) {
		t.Fatalf("exec while cleaning up: %v, want ErrGone", err)
	}
	if err := f.mgr.Delete(ctx, f.p, v.ID); !errors.Is(err, computer.ErrGone) {
		t.Fatalf("second delete while cleaning up: %v, want ErrGone", err)
	}
	close(release)
	waitFor(t, "cleanup finished", func() bool { return f.mgr.Snapshot().ByState["stopping"] == 0 })
	if n := sb.Destroys.Load(); n != 1 {
		t.Fatalf("destroyed %d times", n)
	}
	if rows, evs := f.usage(v.ID), f.events(v.ID, "computer.destroyed"); len(rows) != 1 || len(evs) != 1 {
		t.Fatalf("after cleanup: usage %+v, computer.destroyed %+v", rows, evs)
	}
}

// TestCapacityHeldUntilCleanup: a deleted computer counts against capacity
// until its resources are freed; a create that only those stand in the way
// of waits for them instead of being refused.
func TestCapacityHeldUntilCleanup(t *testing.T) {
	drv := &fakeDriver{}
	started, release := blockingDestroy(drv)
	f := newFixture(t, "", drv, func(c *computer.Config) { c.MaxConcurrent = 1 })
	ctx := context.Background()
	f.createAndDelete(ctx)
	<-started
	created := make(chan error, 1)
	go func() {
		_, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
		created <- err
	}()
	select {
	case err := <-created:
		t.Fatalf("create while the only slot is still being freed returned %v before the cleanup ended", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("create after the cleanup: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("create still waiting 5 s after the cleanup ended")
	}
	if _, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{}); !errors.Is(err, computer.ErrCapacity) {
		t.Fatalf("create beyond a live computer: %v, want ErrCapacity at once", err)
	}
}

// TestFailedCleanupIsRetried: a cleanup that fails after the kill is
// retried by the reaper; the answer was 204, the stop is recorded once, and
// capacity comes back only when the retry succeeds.
func TestFailedCleanupIsRetried(t *testing.T) {
	drv := &fakeDriver{destroyErr: func(n int32) error {
		if n == 1 {
			return errors.New("cgroup busy")
		}
		return nil
	}}
	f := newFixture(t, "", drv, func(c *computer.Config) { c.MaxConcurrent = 1 })
	ctx := context.Background()
	v, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.mgr.Delete(ctx, f.p, v.ID); err != nil {
		t.Fatalf("delete with a failing cleanup: %v, want success (the computer is dead)", err)
	}
	sb := drv.Sandboxes()[0]
	waitFor(t, "cleanup retried", func() bool { return sb.Destroys.Load() >= 2 })
	if _, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{}); err != nil {
		t.Fatalf("create after the retried cleanup: %v", err)
	}
	if n := sb.Kills.Load(); n != 1 {
		t.Fatalf("killed %d times, want 1", n)
	}
	if rows, evs := f.usage(v.ID), f.events(v.ID, "computer.destroyed"); len(rows) != 1 || len(evs) != 1 {
		t.Fatalf("usage %+v, computer.destroyed %+v", rows, evs)
	}
}

// TestCloseWaitsForCleanups: Close returns only after the pending cleanups
// ended, or when its context ends.
func TestCloseWaitsForCleanups(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		drv := &fakeDriver{}
		started, release := blockingDestroy(drv)
		f := newFixture(t, "", drv, nil)
		ctx := context.Background()
		f.createAndDelete(ctx)
		<-started
		closeCtx, cancel := context.WithCancel(ctx)
		closed := make(chan struct{})
		go func() { f.mgr.Close(closeCtx); close(closed) }()
		select {
		case <-closed:
			t.Fatal("Close returned with a cleanup pending")
		case <-time.After(100 * time.Millisecond):
		}
		if bounded {
			cancel()
		} else {
			close(release)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("bounded=%v: Close still waiting 5 s later", bounded)
		}
		if !bounded && drv.Sandboxes()[0].Destroys.Load() != 1 {
			t.Fatal("Close returned before the cleanup ended")
		}
		if bounded {
			close(release)
		}
		cancel()
	}
}

// TestCrashDuringCleanupIsRecovered: a server that dies after a computer
// was killed and its stop recorded, but before its resources were freed,
// leaves them to the next start's driver GC; the stop is not recorded twice.
func TestCrashDuringCleanupIsRecovered(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	drv := &fakeDriver{}
	started, release := blockingDestroy(drv)
	defer close(release)
	f := newFixture(t, dir, drv, nil)
	v := f.createAndDelete(ctx)
	<-started // the "crash" happens while the cleanup runs
	drv2 := &fakeDriver{}
	g := newFixture(t, dir, drv2, nil)
	if n := drv2.gcCalls.Load(); n != 1 {
		t.Fatalf("driver GC ran %d times on start", n)
	}
	if got, err := g.mgr.Get(ctx, g.p, v.ID); err != nil || got.Status != store.StatusDestroyed {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	if rows, evs := g.usage(v.ID), g.events(v.ID, "computer.destroyed"); len(rows) != 1 || len(evs) != 1 {
		t.Fatalf("after restart: usage %+v, computer.destroyed %+v", rows, evs)
	}
}
