package computer

import (
	"context"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// deathWait bounds how long a call whose control channel broke waits for
// the driver to see its agent's death (the channel closes a little before
// the agent is reaped), so the caller learns it failed rather than that it
// cannot be reached.
const deathWait = 2 * time.Second

// watch fails l as soon as its agent dies by itself (a crash, a SIGKILL
// from the host): otherwise it would stay "ready", answering nothing,
// holding its capacity and its resources until someone deleted it.
func (m *Manager) watch(ctx context.Context, l *live) {
	done := l.sb.Done()
	if done == nil {
		return
	}
	select {
	case <-done:
		m.fail(ctx, l)
	case <-l.ended:
	}
}

// fail tears down a computer whose agent died. If a teardown was already
// started (a delete, the reaper, shutdown), that one records the single
// stop and fail does nothing; otherwise the computer is recorded failed,
// with the reason, and cleaned up as a deleted one is.
func (m *Manager) fail(ctx context.Context, l *live) {
	m.mu.Lock()
	if l.stopping || l.killed || l.reason != "" {
		m.mu.Unlock()
		return
	}
	l.stopping = true
	exit := l.sb.ExitReason()
	l.failure = fmt.Sprintf("its agent (PID 1) ended unexpectedly (%s); its processes and workspace are gone; create a new computer", exit)
	m.mu.Unlock()
	log.From(ctx).WarnContext(ctx, "computer failed: its agent died", "computer", l.rec.ID, "exit", exit)
	m.destroy(ctx, l, "failed")
}

// awaitDeath waits (at most deathWait) for l's agent to be reaped after its
// control channel broke, and fails l if it died.
func (m *Manager) awaitDeath(ctx context.Context, l *live) {
	done := l.sb.Done()
	if done == nil {
		return
	}
	select {
	case <-done:
		m.fail(context.WithoutCancel(ctx), l)
	case <-time.After(deathWait):
	}
}

// goneError is the 409 of computer l, which is being torn down or dead.
func (m *Manager) goneError(l *live) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return goneError(l.rec.ID, l.failure)
}

// deletedError is the error of a call whose computer id was deleted while
// it ran.
func deletedError(id string) error {
	return fmt.Errorf("%w: %s was deleted while the call ran", ErrGone, id)
}

// goneError is the 409 of a computer that ended; a failed one says why.
func goneError(id, failure string) error {
	if failure != "" {
		return fmt.Errorf("%w: %s failed: %s", ErrGone, id, failure)
	}
	return fmt.Errorf("%w: %s", ErrGone, id)
}
