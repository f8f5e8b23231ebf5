package computer

import (
	"context"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// watchEvery is how often Watch looks whether its computer is being torn
// down (its agent's end, Sandbox.Done, is seen at once).
const watchEvery = 50 * time.Millisecond

// Watch returns a context of ctx that is also cancelled, with a
// computer_gone cause (context.Cause), as soon as computer id is deleted,
// expires or dies, so a transport blocked on its client (a slow upload
// body) can stop at once, as exec does. Call cancel when done.
func (m *Manager) Watch(ctx context.Context, p governance.Principal, id string) (context.Context, context.CancelFunc, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	agentDone := l.sb.Done() // nil: the driver cannot tell; the ticker sees it
	go func() {
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-agentDone:
				cancel(fmt.Errorf("%w: %s was deleted or stopped while the call ran", ErrGone, id))
				return
			case <-t.C:
				m.mu.Lock()
				gone := l.gone()
				m.mu.Unlock()
				if gone {
					cancel(deletedError(id))
					return
				}
			}
		}
	}()
	return wctx, func() { cancel(context.Canceled) }, nil
}
