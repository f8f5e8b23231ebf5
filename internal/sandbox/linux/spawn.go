package linux

import (
	"fmt"
	"os"
	"os/exec"
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
func startAgent(path string, extra []*os.File, hostUID uint32, stderr *boundedBuffer) (*exec.Cmd, error) {
	cmd := &exec.Cmd{
		Path:       path,
		Args:       []string{"cubicle", AgentArg},
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: extra,
		Stderr:     stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 namespaces,
			UidMappings:                userMap(hostUID),
			GidMappings:                userMap(hostUID),
			GidMappingsEnableSetgroups: true,
			Pdeathsig:                  syscall.SIGKILL,
			Setsid:                     true, // a terminal's Ctrl-C must reach cubicle, not the agent
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
