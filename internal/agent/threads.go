package agent

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Go runtime never ends an OS thread it made: after a burst of work
// (blocking system calls, the spawner thread handing the P back and forth)
// an agent would keep every thread it ever needed at once. Once the agent
// has been quiet for trimAfter (no frame from the host, no process ended),
// threadTrim ends the threads beyond idleThreads: a goroutine that exits
// while locked to its thread ends that thread (runtime.LockOSThread), and
// the runtime gives its P to a thread that is left or, if none is, starts
// one. The main thread is locked to the spawner for the agent's life, so
// it is never one of them. An idle computer's agent so keeps four: its
// main thread (the spawner), one that runs goroutines and waits in the
// netpoller, sysmon and the runtime's template thread (docs/ARCHITECTURE.md,
// "Threads"). The trim counts threads with raw system calls: a blocking
// one would let the runtime hand the one P to another thread, which it
// may start for that.
type threadTrim struct {
	kick chan struct{}
}

const (
	idleThreads = 4
	trimAfter   = time.Second
)

func newThreadTrim() *threadTrim { return &threadTrim{kick: make(chan struct{}, 1)} }

// touch records activity: the trim waits for trimAfter without any.
func (t *threadTrim) touch() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// run trims once the agent is quiet after each activity, until ctx ends;
// with no activity it sleeps (an idle agent is never woken).
func (t *threadTrim) run(ctx context.Context) {
	timer := time.NewTimer(trimAfter)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		}
		timer.Reset(trimAfter)
		for quiet := false; !quiet; {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-t.kick:
				timer.Reset(trimAfter)
			case <-timer.C:
				quiet = true
			}
		}
		trimThreads(idleThreads)
	}
}

// trimThreads ends threads of this process, one at a time, until keep
// are left or ending one no longer lowers the count (the runtime had no
// idle thread to take over and started one).
func trimThreads(keep int) {
	n := threadCount()
	for range maxTrim {
		if n <= keep {
			return
		}
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			close(done)
		}()
		<-done
		time.Sleep(time.Millisecond) // the thread's exit completes
		m := threadCount()
		if m >= n {
			return
		}
		n = m
	}
}

// maxTrim bounds the threads one trim ends.
const maxTrim = 64

// threadCount counts this process's threads, from the Threads line of
// /proc/self/status read with raw system calls (0 when it cannot say).
func threadCount() int {
	path, err := unix.BytePtrFromString("/proc/self/status")
	if err != nil {
		return 0
	}
	fd, _, errno := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(path)),
		unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return 0
	}
	var buf [4096]byte
	n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	if errno != 0 {
		return 0
	}
	_, rest, ok := bytes.Cut(buf[:n], []byte("\nThreads:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	count, err := strconv.Atoi(string(bytes.TrimSpace(line)))
	if err != nil {
		return 0
	}
	return count
}

// atFDCWD is AT_FDCWD for a raw system call's argument.
var atFDCWD = unix.AT_FDCWD
