package linux

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// serverStage is the agent's server process as PID 1 sees it.
type serverStage struct {
	cmd    *exec.Cmd
	shared []*os.File // the control channel and cgroup descriptors, the server's now
	initW  *os.File   // the Init goes here once the computer is complete
	userns *os.File   // the server's user namespace, for idmapped mounts
}

// userMap maps root to root (the agent keeps the host's root identity for
// cgroup v1 migrations, which want the global root or the target's own
// uid) and the sandbox user to the computer's host uid; nothing else is
// mapped, so every other host identity is nobody inside.
func userMap(hostID uint32) []syscall.SysProcIDMap {
	return []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1},
		{ContainerID: agent.SandboxUID, HostID: int(hostID), Size: 1}}
}

// startServer starts the server stage in a new user namespace. Go writes
// the id maps through /proc/<pid>, so a proc of the computer's PID
// namespace is mounted over the host's /proc first (in PID 1's own mount
// namespace; it goes with the old root at pivot_root, which also moves the
// server's root and working directory to the new root). The server
// inherits the control channel and the cgroup descriptors under the same
// numbers, and waits for its Init on a pipe.
func startServer(conn *os.File, init protocol.Init) (*serverStage, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mount the computer's proc: %w", err)
	}
	fds := []int{init.Cgroup.Track, init.Cgroup.OOM}
	fds = append(fds, init.Cgroup.Place...)
	top := controlFD
	for _, fd := range fds {
		top = max(top, fd)
	}
	files := make([]*os.File, top-controlFD+1) // files[i] becomes descriptor 3+i; nil ones are closed
	files[0] = conn
	for _, fd := range fds {
		if fd > controlFD && files[fd-controlFD] == nil {
			files[fd-controlFD] = os.NewFile(uintptr(fd), "cgroup")
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	files = append(files, r)
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"cubicle", AgentArg, serveArg, strconv.Itoa(controlFD + len(files) - 1)},
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: files,
		Stderr:     os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 unix.CLONE_NEWUSER,
			UidMappings:                userMap(init.HostUID),
			GidMappings:                userMap(init.HostUID),
			GidMappingsEnableSetgroups: true,
			Pdeathsig:                  syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the agent's server in its user namespace: %w", err)
	}
	s := &serverStage{cmd: cmd, shared: files[:len(files)-1], initW: w}
	if s.userns, err = os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid)); err != nil {
		s.kill()
		return nil, fmt.Errorf("open the server's user namespace: %w", err)
	}
	return s, nil
}

// handOver finishes the computer (extra mounts, idmapped to the server's
// user namespace; / read-only), gives the server its Init, and seals PID 1:
// no capabilities, no descriptors, seccomp.
func (s *serverStage) handOver(init protocol.Init) error {
	if err := bindExtra("", init, s.userns); err != nil {
		return err
	}
	s.userns.Close()
	if err := rootReadOnly(); err != nil {
		return err
	}
	b, err := json.Marshal(init)
	if err != nil {
		return err
	}
	if _, err := s.initW.Write(b); err != nil {
		return fmt.Errorf("hand the init to the server: %w", err)
	}
	s.initW.Close()
	for _, f := range s.shared {
		if f != nil {
			f.Close()
		}
	}
	return dropPrivileges(nil)
}

// wait waits for the server and returns its exit code: PID 1's.
func (s *serverStage) wait() int {
	s.cmd.Wait()
	if code := s.cmd.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	return 1
}

func (s *serverStage) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.initW.Close()
	if s.userns != nil {
		s.userns.Close()
	}
}

// receiveInit reads the Init PID 1 writes once the computer is complete;
// end of file without one means PID 1 failed (and reported it).
func receiveInit(f *os.File) (protocol.Init, error) {
	defer f.Close()
	var init protocol.Init
	b, err := io.ReadAll(io.LimitReader(f, protocol.MaxPayload+1))
	if err != nil || len(b) == 0 {
		return init, fmt.Errorf("no init from PID 1: %v", err)
	}
	return init, json.Unmarshal(b, &init)
}
