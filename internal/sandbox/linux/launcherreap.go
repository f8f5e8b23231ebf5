package linux

import (
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// launcherReaper reaps the launcher's agents. One goroutine waits for
// SIGCHLD and collects every exited child with wait4(WNOHANG), rather than
// one cmd.Wait per agent: a Wait is a blocking waitid that holds an OS
// thread for the agent's whole life, and an idle computer must cost the
// host no thread of its own (docs/ARCHITECTURE.md, "Threads").
type launcherReaper struct {
	// starting is held for reading across an agent's fork and its entry
	// in agents, and taken for writing by the reaper before it looks a
	// reaped pid up, so no pid is reaped before it is known.
	starting sync.RWMutex

	mu     sync.Mutex
	agents map[int]*launched // by pid, until reaped
}

// launched is one agent the launcher started.
type launched struct {
	id       uint64 // the request's
	reported bool   // its start was reported: its exit may be
	exited   bool   // reaped before that; status waits for the report
	status   uint32
}

func newLauncherReaper() *launcherReaper {
	return &launcherReaper{agents: map[int]*launched{}}
}

// run reaps children for as long as the launcher runs; exited is called
// with each reaped agent's request and wait status, once its start was
// reported (reported).
func (r *launcherReaper) run(exited func(id uint64, status uint32)) {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, unix.SIGCHLD)
	for {
		r.drain(exited)
		<-sig
	}
}

// drain reaps every child that has exited.
func (r *launcherReaper) drain(exited func(id uint64, status uint32)) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.starting.Lock() // the starts under way have entered their pids
		r.starting.Unlock()
		r.mu.Lock()
		a := r.agents[pid]
		delete(r.agents, pid)
		report := a != nil && a.reported
		if a != nil && !report {
			a.exited, a.status = true, uint32(ws)
		}
		r.mu.Unlock()
		if report {
			exited(a.id, uint32(ws))
		}
	}
}

// start runs fork (which starts a child and returns its pid, or an error)
// so that the reaper cannot miss the child's exit.
func (r *launcherReaper) start(id uint64, fork func() (int, error)) (*launched, error) {
	r.starting.RLock()
	defer r.starting.RUnlock()
	pid, err := fork()
	if err != nil {
		return nil, err
	}
	a := &launched{id: id}
	r.mu.Lock()
	r.agents[pid] = a
	r.mu.Unlock()
	return a, nil
}

// reported records that a's start was reported and says whether it had
// already exited (its status then to be reported by the caller).
func (r *launcherReaper) reported(a *launched) (exited bool, status uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.reported = true
	return a.exited, a.status
}
