package computer

import (
	"context"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// cleanupSlots bounds how many killed computers have their resources freed
// at once (waiting for the kernel to finish their exits, removing cgroups,
// the workspace disk and directories).
const cleanupSlots = 4

// cleaner runs the background part of computer teardown, a few at a time,
// and lets Close wait for what is pending.
type cleaner struct {
	slots   chan struct{}
	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed when pending drops to 0; nil if nobody waits
}

func newCleaner() *cleaner {
	return &cleaner{slots: make(chan struct{}, cleanupSlots)}
}

// run starts fn in the background once a slot is free.
func (c *cleaner) run(fn func()) {
	c.mu.Lock()
	c.pending++
	c.mu.Unlock()
	go func() {
		c.slots <- struct{}{}
		defer c.finish()
		defer func() { <-c.slots }()
		fn()
	}()
}

func (c *cleaner) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending--
	if c.pending == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// wait returns when nothing is pending, or ctx's error (with the number
// still pending) when ctx ends first.
func (c *cleaner) wait(ctx context.Context) (int, error) {
	c.mu.Lock()
	if c.pending == 0 {
		c.mu.Unlock()
		return 0, nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return 0, nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.pending, ctx.Err()
	}
}

// destroy tears a computer down once and records its stop exactly once.
// The caller has claimed l. It returns once the computer's processes are
// dead and its stop is recorded; its resources are freed in the background
// (cleanup), and its capacity stays taken until they are. A failed kill or
// cleanup leaves l live, to be retried by the reaper.
func (m *Manager) destroy(ctx context.Context, l *live, reason string) error {
	m.mu.Lock()
	killed := l.killed
	m.mu.Unlock()
	if !killed {
		if err := l.sb.Kill(ctx); err != nil {
			log.From(ctx).ErrorContext(ctx, "kill computer", "computer", l.rec.ID, "err", err)
			m.retryLater(l, reason)
			return err
		}
		m.mu.Lock()
		l.killed = true
		failure := l.failure
		m.mu.Unlock()
		m.adm.freeingStarted(l.memory)
		m.recordStop(ctx, l.rec, store.Stop{At: m.now(), Reason: reason, Failure: failure})
	}
	ctx = context.WithoutCancel(ctx)
	m.cleaner.run(func() { m.cleanup(ctx, l, reason) })
	return nil
}

// cleanup frees a killed computer's resources, then its capacity.
func (m *Manager) cleanup(ctx context.Context, l *live, reason string) {
	if err := l.sb.Destroy(ctx); err != nil {
		log.From(ctx).ErrorContext(ctx, "destroy computer", "computer", l.rec.ID, "err", err)
		m.retryLater(l, reason)
		return
	}
	m.forget(l, true)
}

// forget removes l, whose resources are freed, from the live computers
// and gives back its capacity (freeing: admission.freeingStarted was
// called for it) and volumes.
func (m *Manager) forget(l *live, freeing bool) {
	m.mu.Lock()
	if m.live[l.rec.ID] == l {
		delete(m.live, l.rec.ID)
		close(l.ended)
	}
	m.mu.Unlock()
	m.adm.release(l.memory, freeing)
	m.releaseVolumes(l.vols)
}

// retryLater hands a failed teardown back to the reaper.
func (m *Manager) retryLater(l *live, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l.stopping, l.retryAt, l.reason = false, m.now().Add(time.Second), reason
}
