package agent

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// registry owns every wait in the agent, and holds no thread for it
// (docs/ARCHITECTURE.md, "Threads"): no os/signal, whose SIGCHLD receiver
// keeps a thread parked for the agent's life. As PID 1 the agent must reap
// all its children, including orphans re-parented to it:
//
//   - Each process it starts is watched through its pidfd, in the
//     netpoller; when one ends, a drain (wait4(-1, WNOHANG)) reaps it and
//     every other child that has ended, and hands each registered one's
//     status to its waiter.
//   - Orphans have no pidfd: the drains above reap them, and while the
//     agent has children a timer drains too (reap), every pollMin to
//     pollMax, so an orphan that ends when nothing else does is reaped
//     within pollMax. With no children the timer is off: an idle agent is
//     never woken.
//   - The post-exec ptrace stop of a new process (forkTraced) is the
//     spawner's own to wait for: it holds waitMu from the fork to the
//     detach, and every drain takes waitMu, so no drain can take that stop.
type registry struct {
	waitMu sync.Mutex // held by a drain, and by a spawn from its fork to its detach

	mu    sync.Mutex
	procs map[int]*waiter
	blind int // registered processes whose end no pidfd announces (under mu)

	orphans atomic.Bool   // a drain reaped a child nobody registered
	poke    chan struct{} // wakes reap: a process started, or an orphan was reaped
	onEnd   func()        // called after a drain handed out a status (the thread trim)
}

type waiter struct {
	exited chan syscall.WaitStatus // receives the final status once
	blind  bool                    // its end is seen by the timer's drains only
}

// The timer's drain periods (reap): pollMin after an orphan was reaped,
// pollStart once a process started, doubling to pollMax while drains find
// nothing; pollBlind while a registered process has no pidfd watch.
const (
	pollMin   = 100 * time.Millisecond
	pollStart = time.Second
	pollMax   = 5 * time.Second
	pollBlind = 10 * time.Millisecond
)

// startTimeout bounds the wait for a new process's post-exec stop.
const startTimeout = 10 * time.Second

func newRegistry() *registry {
	return &registry{procs: make(map[int]*waiter), poke: make(chan struct{}, 1), onEnd: func() {}}
}

// add registers pid, a started process, and watches pidfd (-1 if there is
// none; add owns it). The caller holds waitMu, so pid was not reaped yet.
func (r *registry) add(pid, pidfd int) *waiter {
	w := &waiter{exited: make(chan syscall.WaitStatus, 1)}
	f := r.watchable(pidfd)
	r.mu.Lock()
	r.procs[pid] = w
	if f == nil {
		w.blind = true
		r.blind++
	}
	r.mu.Unlock()
	if f != nil {
		go r.watch(pid, f)
	}
	r.wake()
	return w
}

// watchable makes pidfd a file in the netpoller, or returns nil (and
// closes it) when it cannot be one.
func (r *registry) watchable(pidfd int) *os.File {
	if pidfd < 0 {
		return nil
	}
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return nil
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	// A file outside the netpoller takes no deadline.
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return nil
	}
	return f
}

// watch waits, in the netpoller, until process pid of pidfd f has ended
// (a pidfd becomes readable then, and only then), then drains.
func (r *registry) watch(pid int, f *os.File) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err == nil {
		// Asked first, then waited for: an end between the two is an event.
		err = rc.Read(func(fd uintptr) bool { return ended(int(fd)) })
	}
	if err != nil { // not for a pollable pidfd: the timer's drains reap it
		r.mu.Lock()
		if w := r.procs[pid]; w != nil && !w.blind {
			w.blind = true
			r.blind++
		}
		r.mu.Unlock()
		r.wake()
	}
	r.drain()
}

// ended reports whether the process of pidfd fd has ended (its pidfd is
// readable).
func ended(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err == nil && n > 0
		}
	}
}

// killed says that processes were just killed that may have no pidfd
// (the rest of a process tree): reap drains soon, as after an orphan.
func (r *registry) killed() {
	r.orphans.Store(true)
	r.wake()
}

// wake has reap look at its timer again.
func (r *registry) wake() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// reap drains on a timer while the agent has children (see registry),
// until ctx ends.
func (r *registry) reap(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var period time.Duration // 0: the timer is off
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.poke:
			p := r.nextPeriod(period, true)
			if p != period {
				period = p
				t.Reset(period)
			}
			continue
		case <-t.C:
		}
		if !r.drain() {
			period = 0
			continue
		}
		period = r.nextPeriod(period, false)
		t.Reset(period)
	}
}

// nextPeriod is the timer's period after a poke (a start, an orphan
// reaped) or, with poked false, after a drain that left children.
func (r *registry) nextPeriod(period time.Duration, poked bool) time.Duration {
	r.mu.Lock()
	blind := r.blind > 0
	r.mu.Unlock()
	switch {
	case blind:
		return pollBlind
	case r.orphans.Swap(false):
		return pollMin
	case poked && period == 0:
		return pollStart
	case poked:
		return period
	}
	return min(2*period, pollMax)
}

// drain reaps every child that has ended, handing each registered one's
// status to its waiter, and reports whether the agent still has children.
// Its wait4 calls never block: they are made raw, so that the Go runtime
// never hands the agent's one P to another thread for them (which would
// start a thread: docs/ARCHITECTURE.md, "Threads").
func (r *registry) drain() (children bool) {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	return r.drainHeld()
}

// drainHeld is drain for a caller that holds waitMu (a spawn, before its
// fork: what ended since the last drain, such as the rest of a tree just
// killed, is reaped before the next process runs).
func (r *registry) drainHeld() (children bool) {
	handed, orphan := false, false
	defer func() {
		if orphan {
			r.orphans.Store(true)
			r.wake()
		}
		if handed {
			r.onEnd()
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, errno := wait4NoHang(&ws)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return false // ECHILD: no children left
		}
		if pid == 0 {
			return true
		}
		if ws.Stopped() {
			continue // not a registered process's end
		}
		r.mu.Lock()
		w := r.procs[pid]
		delete(r.procs, pid)
		if w != nil && w.blind {
			r.blind--
		}
		r.mu.Unlock()
		if w == nil {
			orphan = true // reaping it is all PID 1 owes it
			continue
		}
		handed = true
		w.exited <- ws
	}
}

// wait4NoHang is wait4(-1, ws, WNOHANG|__WALL) as a raw system call (it
// never blocks).
func wait4NoHang(ws *syscall.WaitStatus) (int, syscall.Errno) {
	anyChild := -1
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_WAIT4, uintptr(anyChild), uintptr(unsafe.Pointer(ws)),
		syscall.WNOHANG|unix.WALL, 0, 0, 0)
	return int(pid), errno
}

// awaitStop waits for pid's first stop (the post-exec ptrace stop) or its
// end, and takes it (taken false if it could not: it is still there): the
// caller holds waitMu, so no drain can. A process that neither stops nor
// ends within startTimeout is killed, and timedOut set.
func (r *registry) awaitStop(pid int) (ws syscall.WaitStatus, taken, timedOut bool) {
	var mu sync.Mutex
	waited := false
	t := time.AfterFunc(startTimeout, func() {
		mu.Lock()
		defer mu.Unlock()
		if !waited { // pid is not reaped yet: it is this process
			timedOut = true
			unix.Kill(pid, unix.SIGKILL)
		}
	})
	// Look without taking (WNOWAIT) until the timer can no longer kill,
	// then take what was seen.
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil) == unix.EINTR {
	}
	mu.Lock()
	waited = true
	mu.Unlock()
	t.Stop()
	for {
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG|unix.WALL, nil)
		if err != syscall.EINTR {
			return ws, got == pid, timedOut
		}
	}
}

// reapStarted kills pid, a process being started that is still there
// (stopped, or not yet), waits for its end and reaps it. The caller holds
// waitMu.
func (r *registry) reapStarted(pid int) {
	unix.Kill(pid, unix.SIGKILL)
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, unix.WALL, nil)
		if err == syscall.EINTR || (err == nil && (got != pid || ws.Stopped())) {
			continue
		}
		return
	}
}
