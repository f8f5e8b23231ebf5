package linux

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// LauncherArg is the hidden subcommand that runs the launcher (see
// launcher.go), which forks computers' agents for the driver.
const LauncherArg = "launcher"

// isLauncher reports whether this process was started as the launcher:
// the hidden subcommand, and the driver's socket at launcherFD.
func isLauncher() bool {
	if len(os.Args) < 2 || os.Args[1] != LauncherArg {
		return false
	}
	typ, err := unix.GetsockoptInt(launcherFD, unix.SOL_SOCKET, unix.SO_TYPE)
	return err == nil && typ == unix.SOCK_SEQPACKET
}

// launcherMain serves the driver that started it until the driver closes
// its end (it died): each request starts one agent, with the namespaces,
// the id maps and the descriptors the driver gave, and its exit is reported
// once reaped. Every agent has this process's death as its own
// (Pdeathsig); the Go runtime never ends a thread here (nothing locks one),
// so the thread that forked an agent lives as long as the process. The
// launcher dies with the driver (its own Pdeathsig), and so do the agents.
func launcherMain() int {
	// Nothing this process holds may reach an agent but what a request
	// gives it.
	unix.CloseRange(launcherFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	s := &launcherServer{reaper: newLauncherReaper()}
	go s.reaper.run(func(id uint64, status uint32) {
		s.send(launchReport{ID: id, Exited: true, Status: status}, -1)
	})
	if err := s.send(launchReport{Ready: true}, -1); err != nil {
		return 1
	}
	buf := make([]byte, maxLaunchMsg)
	oob := make([]byte, unix.CmsgSpace(maxLaunchFDs*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(launcherFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return 0 // the driver is gone; the agents end with this process
		}
		fds, err := receivedFDs(oob[:oobn], flags)
		var req launchRequest
		if err == nil {
			err = json.Unmarshal(buf[:n], &req)
		}
		if err != nil {
			closeFDs(fds)
			s.send(launchReport{ID: req.ID, Err: fmt.Sprintf("launcher: bad request: %v", err)}, -1)
			continue
		}
		go s.launch(req, fds)
	}
}

// launcherServer sends the launcher's reports, one at a time.
type launcherServer struct {
	mu     sync.Mutex
	reaper *launcherReaper
}

// send writes one report, with pidfd beside it unless it is -1.
func (s *launcherServer) send(r launchReport, pidfd int) error {
	var fds []int
	if pidfd >= 0 {
		fds = []int{pidfd}
	}
	msg, oob, err := encodeLaunch(r, fds)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		err = unix.Sendmsg(launcherFD, msg, oob, nil, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// launch starts one agent (fds: its stderr, then its descriptors 3, ...),
// reports its pid and pidfd, and then its wait status once reaped.
func (s *launcherServer) launch(req launchRequest, fds []int) {
	if len(fds) < 2 {
		closeFDs(fds)
		s.send(launchReport{ID: req.ID, Err: "launcher: a request without the agent's descriptors"}, -1)
		return
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "agent")
	}
	pidfd := -1
	cmd := &exec.Cmd{
		Path: req.Path,
		Args: []string{"cubicle", AgentArg},
		// One P from the Go runtime's start: its initialisation then
		// starts fewer threads, which the runtime keeps for good (see
		// AgentMain). Nothing of the agent's environment reaches a user
		// process.
		Env:        []string{"GOMAXPROCS=1"},
		Dir:        "/",
		Stderr:     files[0],
		ExtraFiles: files[1:],
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 namespaces,
			UidMappings:                userMap(req.HostUID),
			GidMappings:                userMap(req.HostUID),
			GidMappingsEnableSetgroups: true,
			Pdeathsig:                  syscall.SIGKILL,
			Setsid:                     true, // a terminal's Ctrl-C must reach cubicle, not the agent
			PidFD:                      &pidfd,
		},
	}
	// The reaper collects the agent (launcherreap.go); nothing here waits.
	pid := 0
	a, err := s.reaper.start(req.ID, func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		pid = cmd.Process.Pid
		cmd.Process.Release() // reaped by pid, signalled through pidfd
		if pidfd < 0 {
			unix.Kill(pid, unix.SIGKILL) // reaped, never reported
			return 0, fmt.Errorf("no pidfd (Linux 5.3 or later is needed)")
		}
		return pid, nil
	})
	closeAll(files) // the agent has them now
	if err != nil {
		s.send(launchReport{ID: req.ID, Err: fmt.Sprintf("start agent: %v", err)}, -1)
		return
	}
	if s.send(launchReport{ID: req.ID, Pid: pid}, pidfd) != nil {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) // the driver cannot manage it
	}
	unix.Close(pidfd)
	if exited, status := s.reaper.reported(a); exited {
		s.send(launchReport{ID: req.ID, Exited: true, Status: status}, -1)
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
