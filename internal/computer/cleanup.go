package computer

import (
	"context"
	"sync"
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
