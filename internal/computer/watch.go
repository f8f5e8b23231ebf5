package computer

import (
	"context"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// watchEvery is how often Watch looks whether its computer is still alive.
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
	go func() {
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				m.mu.Lock()
				gone := l.gone()
				m.mu.Unlock()
				if gone {
					cancel(fmt.Errorf("%w: %s was deleted while the call ran", ErrGone, id))
					return
				}
			}
		}
	}()
	return wctx, func() { cancel(context.Canceled) }, nil
}
