package computer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// freeingWait bounds how long a create waits for deleted computers' cleanup
// when only their not-yet-freed resources stand in its way.
const freeingWait = 10 * time.Second

// admission bounds concurrent computers and their summed memory. A computer
// counts from its admission until its resources are freed, which finishes
// in the background after its processes were killed (see Manager.destroy).
// A request beyond capacity is refused at once, unless capacity is only
// held by such cleanups: then it waits for them (at most freeingWait), as
// it would have waited for a synchronous delete.
type admission struct {
	mu            sync.Mutex
	count         int
	memory        int64
	freeing       int   // of count: killed, resources being freed
	freeingMemory int64 // of memory: the same
	released      chan struct{}
	maxCount      int
	maxMemory     int64
	refused       atomic.Int64
}

func (a *admission) admit(ctx context.Context, memory int64) error {
	var timeout <-chan time.Time
	for {
		a.mu.Lock()
		if a.count+1 <= a.maxCount && a.memory+memory <= a.maxMemory {
			a.count++
			a.memory += memory
			a.mu.Unlock()
			return nil
		}
		fitsAfterCleanup := a.count-a.freeing+1 <= a.maxCount && a.memory-a.freeingMemory+memory <= a.maxMemory
		if a.released == nil {
			a.released = make(chan struct{})
		}
		released := a.released
		err := fmt.Errorf("%w: %d of %d computers running, %d MiB of %d MiB memory in use; retry later",
			ErrCapacity, a.count, a.maxCount, a.memory>>20, a.maxMemory>>20)
		a.mu.Unlock()
		if !fitsAfterCleanup {
			a.refused.Add(1)
			return err
		}
		if timeout == nil {
			timeout = time.After(freeingWait)
		}
		select {
		case <-released:
		case <-timeout:
			a.refused.Add(1)
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// freeingStarted marks an admitted computer as killed, its resources not
// yet freed.
func (a *admission) freeingStarted(memory int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.freeing++
	a.freeingMemory += memory
}

// release returns a computer's capacity; freeing says whether
// freeingStarted was called for it.
func (a *admission) release(memory int64, freeing bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.count--
	a.memory -= memory
	if freeing {
		a.freeing--
		a.freeingMemory -= memory
	}
	if a.released != nil {
		close(a.released)
		a.released = nil
	}
}
