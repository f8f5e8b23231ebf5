package agent

import (
	"context"
	"sync"
)

// turnstile hands a resource to its users one at a time, in the order they
// queued (sync.Mutex makes no such promise).
type turnstile struct {
	mu    sync.Mutex
	busy  bool
	queue []*ticket
}

type ticket struct{ ready chan struct{} }

func (t *turnstile) enqueue() *ticket { return t.add(false) }

// enqueueFront queues ahead of everyone waiting.
func (t *turnstile) enqueueFront() *ticket { return t.add(true) }

func (t *turnstile) add(front bool) *ticket {
	tk := &ticket{ready: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !t.busy:
		t.busy = true
		close(tk.ready)
	case front:
		t.queue = append([]*ticket{tk}, t.queue...)
	default:
		t.queue = append(t.queue, tk)
	}
	return tk
}

// wait returns nil once tk's turn came; if ctx ends first, tk leaves the
// queue (passing the turn on if it had just arrived) and ctx's error returns.
func (t *turnstile) wait(ctx context.Context, tk *ticket) error {
	select {
	case <-tk.ready:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	select {
	case <-tk.ready:
		t.mu.Unlock()
		t.release()
		return ctx.Err()
	default:
	}
	for i, q := range t.queue {
		if q == tk {
			t.queue = append(t.queue[:i], t.queue[i+1:]...)
			break
		}
	}
	t.mu.Unlock()
	return ctx.Err()
}

func (t *turnstile) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		t.busy = false
		return
	}
	next := t.queue[0]
	t.queue = t.queue[1:]
	close(next.ready)
}
