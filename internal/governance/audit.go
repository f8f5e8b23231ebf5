package governance

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// maxHeldEvents bounds the audit events waiting in memory to be written.
const maxHeldEvents = 10000

// auditQueue writes audit events behind the call that records them: a
// request answers without waiting for its event's insert (a third of an
// exec's server time was that insert), and one writer goroutine, started
// when events arrive, writes them in order with their original time.
//
// An event whose write fails (a full disk) stays queued with everything
// after it until RetryAudit (the reaper's tick) writes them. An event is
// dropped only when more than maxHeldEvents wait, or at shutdown; each drop
// is logged and counted (cubicle_audit_dropped_total). What a SIGKILL of
// the server finds queued is lost: at most the events of the last
// milliseconds, never a lifecycle event (those are written in the store's
// transactions with the state change they describe).
type auditQueue struct {
	mu      sync.Mutex
	idle    sync.Cond // signalled when a writer stops
	held    []store.Event
	writing bool // a writer goroutine runs
	failing bool // the last write failed; RetryAudit tries again
	dropped atomic.Int64
}

// addEvent queues e and starts a writer unless one runs or writes fail.
func (s *Service) addEvent(ctx context.Context, e store.Event) {
	a := &s.audit
	a.mu.Lock()
	if len(a.held) >= maxHeldEvents {
		a.drop(ctx, e, "too many events wait for the disk", nil)
		a.mu.Unlock()
		return
	}
	a.held = append(a.held, e)
	start := !a.writing && !a.failing
	a.writing = a.writing || start
	a.mu.Unlock()
	if start {
		go s.writeEvents(context.WithoutCancel(ctx))
	}
}

// writeEvents writes the queued events, oldest first, until the queue is
// empty or a write fails (a.writing set by the caller).
func (s *Service) writeEvents(ctx context.Context) {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.held) > 0 {
		e := a.held[0]
		a.mu.Unlock()
		err := s.st.Audit().Record(ctx, e)
		a.mu.Lock()
		if err != nil {
			if !a.failing {
				log.From(ctx).WarnContext(ctx, "audit write failed; holding events to retry", "type", e.Type, "err", err)
			}
			a.failing = true
			break
		}
		a.held[0] = store.Event{}
		a.held = a.held[1:]
	}
	if len(a.held) == 0 {
		a.held = nil // let the backing array go
	}
	a.writing = false
	a.idle.Broadcast()
}

// drop counts and logs an event given up (a.mu held).
func (a *auditQueue) drop(ctx context.Context, e store.Event, why string, err error) {
	a.dropped.Add(1)
	log.From(ctx).ErrorContext(ctx, "audit event dropped: "+why, "type", e.Type, "org", e.OrgID, "computer", e.ComputerID,
		"at", e.CreatedAt, "err", err)
}

// FlushAudit waits until every event recorded before the call is written,
// or held after a failed write. Readers of the audit log call it first, so
// a client sees the events of the calls it made.
func (s *Service) FlushAudit() {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.writing {
		a.idle.Wait()
	}
}

// RetryAudit writes the held audit events, oldest first, until one fails
// again. The computers reaper calls it on every tick.
func (s *Service) RetryAudit(ctx context.Context) {
	a := &s.audit
	a.mu.Lock()
	for a.writing {
		a.idle.Wait()
	}
	if len(a.held) == 0 {
		a.mu.Unlock()
		return
	}
	a.failing, a.writing = false, true
	a.mu.Unlock()
	s.writeEvents(ctx)
}

// CloseAudit writes what is queued and drops (logs and counts) what still
// fails. Every process that records events calls it before it closes the
// store.
func (s *Service) CloseAudit(ctx context.Context) {
	s.RetryAudit(ctx)
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.held {
		a.drop(ctx, e, "the server stopped before the disk had room", nil)
	}
	a.held = nil
}

// AuditDropped is how many audit events were given up since the start.
func (s *Service) AuditDropped() int64 { return s.audit.dropped.Load() }

// AuditHeld is how many audit events wait to be written.
func (s *Service) AuditHeld() int {
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	return len(s.audit.held)
}
