package computer

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// reap destroys computers whose lifetime is over, and beats.
func (m *Manager) reap(ctx context.Context) {
	defer m.bg.Done()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var lastBeat, lastRecheck, lastSweep time.Time
	recheck := m.cfg.Internet.Recheck
	if recheck <= 0 {
		recheck = DefaultRecheck
	}
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.retryStops(ctx)
		m.gov.RetryAudit(ctx)
		now := m.now()
		if now.Sub(lastBeat) >= m.beatEvery() {
			m.renew(ctx, now)
			lastBeat = now
		}
		if m.cfg.Internet.Enabled && now.Sub(lastRecheck) >= recheck {
			m.recheckInternet(ctx)
			lastRecheck = now
		}
		if now.Sub(lastSweep) >= pausedSweepEvery {
			m.sweepPaused(ctx)
			lastSweep = now
		}
		var expired []*live
		m.mu.Lock()
		for _, l := range m.live {
			retry := !l.retryAt.IsZero() && now.After(l.retryAt)
			if !l.stopping && (retry || now.After(l.rec.ExpiresAt) || l.idleOut(now)) {
				l.stopping = true
				if l.reason == "" && !retry && !now.After(l.rec.ExpiresAt) {
					l.reason = cmp.Or(l.idleReason, ReasonIdle)
				}
				expired = append(expired, l)
			}
		}
		m.mu.Unlock()
		for _, l := range expired {
			reason := "expired"
			if l.reason != "" {
				reason = l.reason
			}
			if l.pauseAtEnd && (reason == "expired" || reason == ReasonIdle) && m.pausable(l) && len(l.sb.Spec().Mounts) == 0 {
				m.pause(ctx, l, reason)
				continue
			}
			m.destroy(ctx, l, reason)
		}
	}
}

// goneAt estimates when a crashed instance's computers died: with it (the
// agents die with their owner), shortly after its last heartbeat.
func (m *Manager) goneAt(ctx context.Context, instance string) time.Time {
	now := m.now()
	last, err := m.st.Instances().LastSeen(ctx, instance)
	if err != nil {
		return now
	}
	if gone := last.Add(m.beatEvery()); gone.Before(now) {
		return gone
	}
	return now
}

// recover stops every computer a previous server left behind: the driver
// removes their processes and resources (of this data directory), and
// each gets its stop recorded exactly once. On a shared store only the
// computers of servers whose lease lapsed are (the others' are theirs).
func (m *Manager) recover(ctx context.Context) error {
	if _, err := m.driver.GC(ctx); err != nil {
		log.From(ctx).WarnContext(ctx, "recovery: cleanup incomplete", "err", err)
	}
	if m.cfg.Fleet.Shared {
		m.sweepLapsed(ctx)
		return nil
	}
	orphans, err := m.st.Computers().Alive(ctx)
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	n := 0
	for _, rec := range orphans {
		if rec.Status == store.StatusPaused {
			continue // nothing of it ran; it waits for a resume
		}
		m.recordStop(ctx, rec, store.Stop{At: m.goneAt(ctx, rec.Instance), Reason: "server_restarted"})
		n++
	}
	if n > 0 {
		log.From(ctx).InfoContext(ctx, "recovery: stopped computers of a previous server", "count", n)
	}
	return nil
}
