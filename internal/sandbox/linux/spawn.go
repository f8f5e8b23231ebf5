package linux

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// namespaces of a computer. No user namespace: the agent is real root
// until it drops everything but a few capabilities, and user code runs as
// an unprivileged uid.
const namespaces = unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

func socketpair() (host, agentEnd *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control channel: %w", err)
	}
	// Non-blocking on the host side so reads and writes take deadlines.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control"), nil
}

// startAgent re-executes cubicle as PID 1 of the computer's namespaces.
// extra become descriptors 3, 4, ... in the agent. The agent dies with the
// thread that started it (Pdeathsig), so a killed owner leaves no running
// computer behind, only files and cgroups for GC.
func startAgent(path string, extra []*os.File, stderr *boundedBuffer) (*exec.Cmd, error) {
	cmd := &exec.Cmd{
		Path:       path,
		Args:       []string{"cubicle", AgentArg},
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: extra,
		Stderr:     stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: namespaces,
			Pdeathsig:  syscall.SIGKILL,
			Setsid:     true, // a terminal's Ctrl-C must reach cubicle, not the agent
		},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	return cmd, nil
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
