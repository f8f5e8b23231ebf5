package agent

// Spawner is the one OS thread that starts every user process. A child
// inherits the credentials of the thread that forks it, so per-thread
// attributes meant for user processes (the capability bounding set) need
// only be set there; ptrace requests for a new process also come from
// there, the tracer thread.
//
// The thread is the caller's of NewSpawner, locked to its goroutine
// (runtime.LockOSThread) for the agent's life, and Run serves the jobs on
// it: the agent's main thread, so that the spawner costs no thread of its
// own (an idle computer's agent keeps as few threads as it can,
// docs/ARCHITECTURE.md "Threads").
type Spawner struct {
	jobs chan func()
}

// NewSpawner makes the calling thread's spawner. The caller must hold
// its thread locked and call Run on it.
func NewSpawner() *Spawner {
	return &Spawner{jobs: make(chan func())}
}

// Run executes the jobs on the calling thread until stop is closed.
func (s *Spawner) Run(stop <-chan struct{}) {
	for {
		select {
		case job := <-s.jobs:
			job()
		case <-stop:
			return
		}
	}
}

// run executes fn on the spawner thread and waits for it.
func (s *Spawner) run(fn func()) {
	done := make(chan struct{})
	s.jobs <- func() { fn(); close(done) }
	<-done
}
