package computer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// A computer ends at its expiry (created with its lifetime, moved by
// Extend) or, with an idle timeout, once that long has passed since the
// last call on it (exec, files, python, tools: anything that goes through
// running), whichever comes first. The last call is kept in memory: a
// restarted server has no computers of its predecessor to keep.

// ReasonIdle is the stop reason of a computer whose idle timeout ran out.
const ReasonIdle = "idle"

// touch records a call on l now.
func (m *Manager) touch(l *live) {
	m.mu.Lock()
	l.lastActive = m.now()
	m.mu.Unlock()
}

// busy marks a call on l in flight until the returned func runs: a
// computer is never idle while a call runs, however long it takes, and
// its idle time counts from the end of its last call.
func (m *Manager) busy(l *live) func() {
	m.mu.Lock()
	l.calls++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		l.calls--
		l.lastActive = m.now()
		m.mu.Unlock()
	}
}

// idleOut reports whether l's idle timeout ran out at now (under m.mu).
func (l *live) idleOut(now time.Time) bool {
	return l.idle > 0 && l.calls == 0 && now.Sub(l.lastActive) >= l.idle
}

// Extend moves the expiry of a running computer of p's organisation to
// lifetime from now, clamped to the key's and the deployment's caps
// (POST /v1/computers/{id}/lifetime); it counts as a call.
func (m *Manager) Extend(ctx context.Context, p governance.Principal, id string, lifetime time.Duration) (View, error) {
	if seconds(lifetime) < 1 {
		return View{}, fieldError("lifetime_seconds", "must be at least 1")
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return View{}, err
	}
	var keyLimits governance.ComputerLimits
	if p.Caps.Computer != nil {
		keyLimits = *p.Caps.Computer
	}
	n := governance.Clamp(seconds(m.cfg.Lifetime), keyLimits.LifetimeSeconds, seconds(lifetime))
	at := m.now().Add(time.Duration(n) * time.Second)
	if err := m.st.Computers().SetExpiry(ctx, id, at); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return View{}, goneError(id, "")
		}
		return View{}, fmt.Errorf("extend %s: %w", id, err)
	}
	m.mu.Lock()
	l.rec.ExpiresAt = at
	m.mu.Unlock()
	m.gov.Record(ctx, p, "computer.extended", id, map[string]any{"lifetime_seconds": n})
	return m.liveView(ctx, p, id)
}

// liveView is a computer's view with what only this server knows of it
// (its last call).
func (m *Manager) liveView(ctx context.Context, p governance.Principal, id string) (View, error) {
	v, err := m.get(ctx, p, id)
	if err != nil {
		return v, err
	}
	return m.withLastCall(v), nil
}

// withLastCall adds the last call on v's computer when this server runs
// it.
func (m *Manager) withLastCall(v View) View {
	if l := m.lookup(v.ID); l != nil {
		m.mu.Lock()
		at := l.lastActive
		m.mu.Unlock()
		v.LastActiveAt = &at
	}
	return v
}

// OpenAIMemoryMB is the memory of OpenAI's container memory_limit ("1g",
// "4g", "16g", "64g") in MiB, false for any other value. Like memory_mb,
// it is clamped to the deployment's memory when a computer is made.
func OpenAIMemoryMB(limit string) (int64, bool) {
	mb, ok := map[string]int64{"1g": 1 << 10, "4g": 4 << 10, "16g": 16 << 10, "64g": 64 << 10}[limit]
	return mb, ok
}
