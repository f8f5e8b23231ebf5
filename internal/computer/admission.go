package computer

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// admission bounds concurrent computers and their summed memory. It never
// waits: a request beyond capacity is refused at once.
type admission struct {
	mu        sync.Mutex
	count     int
	memory    int64
	maxCount  int
	maxMemory int64
	refused   atomic.Int64
}

func (a *admission) admit(memory int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.count+1 > a.maxCount || a.memory+memory > a.maxMemory {
		a.refused.Add(1)
		return fmt.Errorf("%w: %d of %d computers running, %d MiB of %d MiB memory in use; retry later",
			ErrCapacity, a.count, a.maxCount, a.memory>>20, a.maxMemory>>20)
	}
	a.count++
	a.memory += memory
	return nil
}

func (a *admission) release(memory int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.count--
	a.memory -= memory
}
