package linux

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
)

// namespaces of a computer. The agent is root in its user namespace, which
// maps root to root (the agent keeps the host's root identity for cgroup v1
// migrations, which want the global root or the target's own uid) and the
// sandbox user to the computer's own host uid (userMap); it drops all but a
// few capabilities, and user code runs as the sandbox user.
const namespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// userMap maps root to root and the sandbox user to the computer's host
// uid; nothing else is mapped, so every other host identity is nobody
// inside.
func userMap(hostID uint32) []syscall.SysProcIDMap {
	return []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1},
		{ContainerID: agent.SandboxUID, HostID: int(hostID), Size: 1}}
}

// controlSendBuffer is the agent's send buffer on the control channel
// (the kernel doubles it): room for several output frames.
const controlSendBuffer = 1 << 20

func socketpair() (host, agentEnd *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control channel: %w", err)
	}
	// The agent's sends (process output, up to 1 MiB a frame) queue up
	// to controlSendBuffer without blocking it, so the host reads a frame
	// or more at a time instead of waking for each piece of one.
	// Best effort: SO_SNDBUFFORCE passes net.core.wmem_max (root only).
	if unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, controlSendBuffer) != nil {
		unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_SNDBUF, controlSendBuffer)
	}
	// Non-blocking on the host side so reads and writes take deadlines.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control"), nil
}

// startAgent has the launcher (launcher.go) start the agent as PID 1 of
// the computer's namespaces. extra become descriptors 3, 4, ... in the
// agent; what it writes to stderr is kept in stderr (bounded), for boot
// errors; done is closed once it has ended. The agent dies with the
// launcher, which dies with this process (Pdeathsig both), so a killed
// owner leaves no running computer behind, only files and cgroups for GC.
func (d *Driver) startAgent(extra []*os.File, hostUID uint32, stderr *boundedBuffer, done chan struct{}) (*agentProc, error) {
	path := d.agentExecutable()
	l, err := theLauncher.get(path)
	if err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	a, err := l.start(path, hostUID, w, extra, done)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	go func() {
		io.Copy(stderr, r)
		r.Close()
	}()
	return a, nil
}

// prepareLauncher starts the launcher in the background when there is
// none, so that the first computer's start overlaps with it.
func (d *Driver) prepareLauncher() {
	if l := theLauncher.current(); l != nil && !l.isGone() {
		return
	}
	go func() { theLauncher.prepare(d.agentExecutable()) }()
}

// agentProc is a computer's agent. The launcher, not this process, is its
// parent: it is signalled through its pidfd (never a reused pid), and its
// end is reported by the launcher, which reaps it, or, once the launcher
// is gone, seen on the pidfd.
type agentProc struct {
	pid  int
	done chan struct{} // closed once it ended

	mu     sync.Mutex
	pidfd  int    // -1 once it ended
	reason string // how it ended, set before done is closed
}

// kill sends SIGKILL to the agent, unless it has ended.
func (a *agentProc) kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pidfd >= 0 {
		unix.PidfdSendSignal(a.pidfd, unix.SIGKILL, nil, 0)
	}
}

// end records how the agent ended and closes done (once).
func (a *agentProc) end(reason string) {
	a.mu.Lock()
	if a.pidfd < 0 {
		a.mu.Unlock()
		return
	}
	unix.Close(a.pidfd)
	a.pidfd, a.reason = -1, reason
	a.mu.Unlock()
	close(a.done)
}

// exitReason returns how the agent ended, once done is closed.
func (a *agentProc) exitReason() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reason
}

// launcherGoneReason is the end of an agent whose launcher died first: its
// parent-death signal killed it, and nobody can say more.
const launcherGoneReason = "killed when the agent launcher ended (exit status unknown)"

// awaitExit waits for the agent to exit after its launcher died (then only
// this goroutine ends it).
func (a *agentProc) awaitExit() {
	a.mu.Lock()
	fd := a.pidfd
	a.mu.Unlock()
	if fd < 0 {
		return
	}
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err != unix.EINTR {
			break
		}
	}
	a.end(launcherGoneReason)
}

// exitReason describes a wait status.
func exitReason(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), unix.SignalName(ws.Signal()))
	}
	return fmt.Sprintf("exited with status %d", ws.ExitStatus())
}

// boundedBuffer keeps the first bytes the agent writes to stderr, for error
// messages; the rest is dropped.
type boundedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const boundedMax = 8 << 10

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := boundedMax - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
