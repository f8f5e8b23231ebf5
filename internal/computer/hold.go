package computer

import (
	"context"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// Holding a computer for its shell tasks (the gateway's: a response that
// leaves a background process running keeps its computer for the
// conversation's next responses). While any background process of a held
// computer runs, a watcher counts as a call on it (busy), so it does not
// idle out; once none runs, its idle time (the hold's grace) counts from
// then, or from a later call. Its lifetime bounds it as always. A restarted
// server holds nothing: the computers of its predecessor are stopped at
// start (recover), held or not.

// ReasonTasksEnded is the stop reason of a computer its shell tasks held
// (HoldForTasks) once the grace after the last one, and after the last call
// on it, ran out.
const ReasonTasksEnded = "shell_tasks_ended"

// Bounds of the watcher of a held computer's background processes.
const (
	tasksPoll    = time.Second
	tasksTimeout = 10 * time.Second // one listing
)

// Use marks a running computer of p's organisation in use until release is
// called (once; more calls do nothing): it does not idle out meanwhile, as
// while a call runs, and its idle time counts from release. The gateway
// holds a kept computer so for the whole response that runs in it, between
// its calls too.
func (m *Manager) Use(ctx context.Context, p governance.Principal, id string) (release func(), err error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return sync.OnceFunc(m.busy(l)), nil
}

// HoldForTasks keeps a running computer of p's organisation standing while
// any of its background processes runs, and ends it grace after the last
// one ended or the last call on it, whichever is later, with the stop
// reason ReasonTasksEnded; an idle timeout of its own that is longer stays
// (with its reason). Never beyond its lifetime. Calling it again (a later
// response, a new task) is harmless: one watcher per computer.
func (m *Manager) HoldForTasks(ctx context.Context, p governance.Principal, id string, grace time.Duration) error {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return err
	}
	grace = max(grace, time.Second)
	m.mu.Lock()
	if grace >= l.idle {
		l.idle, l.idleReason = grace, ReasonTasksEnded
	}
	start := !l.tasksWatched
	l.tasksWatched, l.tasksRecheck = true, true
	m.mu.Unlock()
	if start {
		go m.watchTasks(context.WithoutCancel(ctx), l, m.busy(l))
	}
	return nil
}

// watchTasks holds l busy (release ends that) until none of its background
// processes runs, checking every tasksPoll, or until it ends.
func (m *Manager) watchTasks(ctx context.Context, l *live, release func()) {
	defer release()
	t := time.NewTicker(tasksPoll)
	defer t.Stop()
	for {
		m.mu.Lock()
		l.tasksRecheck = false
		m.mu.Unlock()
		if !m.tasksRunning(ctx, l) {
			m.mu.Lock()
			again := l.tasksRecheck // a hold came in while listing: its task may be missing
			l.tasksWatched = again
			m.mu.Unlock()
			if !again {
				return
			}
			continue
		}
		select {
		case <-t.C:
		case <-l.ended:
			return
		case <-m.stop:
			return
		}
	}
}

// tasksRunning reports whether any background process of l runs; a
// computer that does not answer has none (it is ending).
func (m *Manager) tasksRunning(ctx context.Context, l *live) bool {
	ctx, cancel := context.WithTimeout(ctx, tasksTimeout)
	defer cancel()
	list, err := l.sb.ListProcesses(ctx)
	if err != nil {
		log.From(ctx).DebugContext(ctx, "held computer: listing its tasks failed", "computer", l.rec.ID, "err", err)
		return false
	}
	for _, pi := range list {
		if pi.Running {
			return true
		}
	}
	return false
}
