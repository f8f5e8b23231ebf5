package computer_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// waitStatus waits up to within for computer id's status, and answers how
// long that took.
func (f *fixture) waitStatus(id, status string, within time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	for {
		v, err := f.mgr.Get(context.Background(), f.p, id)
		if err != nil {
			f.t.Fatal(err)
		}
		if v.Status == status {
			return time.Since(start)
		}
		if time.Since(start) > within {
			f.t.Fatalf("%s: status %s, want %s within %v", id, v.Status, status, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopReason is the reason of id's computer.destroyed event.
func (f *fixture) stopReason(id string) string {
	f.t.Helper()
	evs := f.events(id, "computer.destroyed")
	if len(evs) != 1 {
		f.t.Fatalf("%s: %d computer.destroyed events", id, len(evs))
	}
	var d struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(evs[0].Data, &d)
	return d.Reason
}

// TestHoldForTasks: a computer held for its shell tasks stands while one
// of its background processes runs, however long past the grace, and ends
// the grace after the last one ended (reason shell_tasks_ended); Use keeps
// a computer with an idle timeout from idling out until it is released.
func TestHoldForTasks(t *testing.T) {
	var running atomic.Bool
	running.Store(true)
	drv := &fakeDriver{listProcs: func() ([]sandbox.ProcessInfo, error) {
		return []sandbox.ProcessInfo{{ID: "proc_1", Running: running.Load()}, {ID: "proc_2"}}, nil
	}}
	f := newFixture(t, "", drv, nil)
	ctx := context.Background()
	v, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	grace := time.Second
	for range 2 { // a second hold is harmless
		if err := f.mgr.HoldForTasks(ctx, f.p, v.ID, grace); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * grace)
	if got, _ := f.mgr.Get(ctx, f.p, v.ID); got.Status != "ready" {
		t.Fatalf("a held computer whose task runs: %s", got.Status)
	}
	running.Store(false)
	if took := f.waitStatus(v.ID, "destroyed", 10*time.Second); took < grace {
		t.Fatalf("ended %v after its last task, before its grace of %v", took, grace)
	}
	if r := f.stopReason(v.ID); r != computer.ReasonTasksEnded {
		t.Fatalf("stop reason %q, want %q", r, computer.ReasonTasksEnded)
	}
	if err := f.mgr.HoldForTasks(ctx, f.p, v.ID, grace); !errors.Is(err, computer.ErrGone) {
		t.Fatalf("holding a computer that ended: %v", err)
	}

	w, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{IdleTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	release, err := f.mgr.Use(ctx, f.p, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if got, _ := f.mgr.Get(ctx, f.p, w.ID); got.Status != "ready" {
		t.Fatalf("a computer in use idled out: %s", got.Status)
	}
	release()
	release() // once only
	f.waitStatus(w.ID, "destroyed", 10*time.Second)
	if r := f.stopReason(w.ID); r != computer.ReasonIdle {
		t.Fatalf("stop reason %q, want %q", r, computer.ReasonIdle)
	}
}
