package agent

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// registry owns every wait4 in the agent. As PID 1 the agent must reap all
// children, including orphans re-parented to it, and it must also see the
// ptrace stop of a new process (see spawn). A single reaper dispatches both
// kinds of event to the process that registered the pid.
type registry struct {
	mu    sync.Mutex // held across fork+register so the reaper cannot miss a pid
	procs map[int]*waiter
}

type waiter struct {
	stopped chan struct{}           // closed at the post-exec ptrace stop
	exited  chan syscall.WaitStatus // receives the final status once
	once    sync.Once
}

func newRegistry() *registry { return &registry{procs: make(map[int]*waiter)} }

// add registers pid; the caller holds r.mu.
func (r *registry) add(pid int) *waiter {
	w := &waiter{stopped: make(chan struct{}), exited: make(chan syscall.WaitStatus, 1)}
	r.procs[pid] = w
	return w
}

func (r *registry) reap(ctx context.Context) {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, unix.SIGCHLD)
	defer signal.Stop(sig)
	for {
		r.drain()
		select {
		case <-ctx.Done():
			return
		case <-sig:
		}
	}
}

func (r *registry) drain() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|unix.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		w := r.procs[pid]
		if w != nil && !ws.Stopped() {
			delete(r.procs, pid)
		}
		r.mu.Unlock()
		if w == nil {
			continue // an orphan: reaping it is all PID 1 owes it
		}
		if ws.Stopped() {
			w.once.Do(func() { close(w.stopped) })
			continue
		}
		w.once.Do(func() { close(w.stopped) })
		w.exited <- ws
	}
}
