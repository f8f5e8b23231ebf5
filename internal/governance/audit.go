package governance

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// maxHeldEvents bounds the audit events held in memory for a retry.
const maxHeldEvents = 10000

// auditRetry holds audit events whose write failed (a full disk) and
// writes them later, in order, with their original time. An event is
// dropped only when more than maxHeldEvents wait, or at shutdown; each drop
// is logged and counted (cubicle_audit_dropped_total).
type auditRetry struct {
	mu      sync.Mutex
	held    []store.Event
	dropped atomic.Int64
}

func (a *auditRetry) hold(ctx context.Context, e store.Event, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.held) >= maxHeldEvents {
		a.drop(ctx, e, "too many events wait for the disk", err)
		return
	}
	if len(a.held) == 0 {
		log.From(ctx).WarnContext(ctx, "audit write failed; holding events to retry", "type", e.Type, "err", err)
	}
	a.held = append(a.held, e)
}

// drop counts and logs an event given up (a.mu held).
func (a *auditRetry) drop(ctx context.Context, e store.Event, why string, err error) {
	a.dropped.Add(1)
	log.From(ctx).ErrorContext(ctx, "audit event dropped: "+why, "type", e.Type, "org", e.OrgID, "computer", e.ComputerID,
		"at", e.CreatedAt, "err", err)
}

// RetryAudit writes the held audit events, oldest first, until one fails
// again. The computers reaper calls it on every tick.
func (s *Service) RetryAudit(ctx context.Context) {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.held) > 0 {
		if err := s.st.Audit().Record(ctx, a.held[0]); err != nil {
			return
		}
		a.held = a.held[1:]
	}
}

// CloseAudit makes a last attempt to write the held events and drops
// (logs and counts) what still fails.
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

// AuditHeld is how many audit events wait for a retry.
func (s *Service) AuditHeld() int {
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	return len(s.audit.held)
}
