package agent

import (
	"fmt"
	"runtime"
)

// Spawner is the one OS thread that starts every user process. A child
// inherits the credentials of the thread that forks it, so per-thread
// attributes meant for user processes (the capability bounding set) need
// only be set here; ptrace requests for a new process also come from here,
// the tracer thread.
type Spawner struct {
	jobs chan func()
}

// NewSpawner starts the spawner thread and runs setup on it first; setup's
// error is returned and the thread is then discarded.
func NewSpawner(setup func() error) (*Spawner, error) {
	s := &Spawner{jobs: make(chan func())}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread carries the setup for life
		if err := setup(); err != nil {
			errc <- err
			return // exiting while locked destroys the thread
		}
		errc <- nil
		for job := range s.jobs {
			job()
		}
	}()
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("spawner thread: %w", err)
	}
	return s, nil
}

// run executes fn on the spawner thread and waits for it.
func (s *Spawner) run(fn func()) {
	done := make(chan struct{})
	s.jobs <- func() { fn(); close(done) }
	<-done
}
