package responses

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// deleteTimeout bounds deleting one response's computer.
const deleteTimeout = 30 * time.Second

// pendingDeletes tracks the response computers being deleted in the
// background, so that shutdown can wait for them (Gateway.Close).
type pendingDeletes struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// add counts a new background delete; false once closing.
func (p *pendingDeletes) add() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// Close releases the response: its computer (if it made one) is deleted
// in the background, so the client does not wait for it, unless it is
// kept (a kept computer is released; one held for shell tasks is held
// from now on, shelltasks.go). Call it, deferred,
// as soon as Begin returned a Run, so that it runs after the answer (or the
// stream's last event) was sent, however the response ended (an error, the
// client leaving, a panic). It may be called more than once. Once the
// gateway is closing (Gateway.Close), it deletes before returning.
func (r *Run) Close(ctx context.Context) {
	id := r.computerID
	if id == "" || r.closed {
		return
	}
	r.closed = true
	ctx = context.WithoutCancel(ctx)
	if r.hold || r.held {
		r.holdForTasks(ctx)
	}
	if r.release != nil {
		r.release()
	}
	if r.keepComputer {
		return
	}
	if !r.g.pending.add() {
		r.deleteComputer(ctx, id)
		return
	}
	go func() {
		defer r.g.pending.wg.Done()
		r.deleteComputer(ctx, id)
	}()
}

// deleteComputer deletes the response's computer; a failure is logged
// (the computer's lifetime, or the server's shutdown, still ends it).
func (r *Run) deleteComputer(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	if err := r.g.comp.Delete(ctx, r.p, id); err != nil {
		log.From(ctx).WarnContext(ctx, "gateway: deleting the response's computer failed", "computer", id,
			"response", r.resp.ID, "err", err)
	}
}

// Close stops the background runs (Stop) and waits until they ended and
// the response computers being deleted in the background are gone, or
// ctx ends; later Run.Close calls delete before returning. Call it at
// shutdown, after the transports stopped serving (http.Server.Shutdown,
// then the WebSocket connections) and before the computer manager closes.
func (g *Gateway) Close(ctx context.Context) error {
	g.Stop()
	if err := waitFor(ctx, &g.bg.wg); err != nil {
		return fmt.Errorf("gateway: background responses still running: %w", err)
	}
	g.pending.mu.Lock()
	g.pending.closed = true
	g.pending.mu.Unlock()
	if err := waitFor(ctx, &g.pending.wg); err != nil {
		return fmt.Errorf("gateway: response computers still being deleted: %w", err)
	}
	return nil
}

// waitFor waits for wg, or until ctx ends.
func waitFor(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
