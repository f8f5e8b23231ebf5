package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Terminals (protocol.ExecStart.Pty): the agent opens /dev/pts/ptmx of the
// computer's own devpts instance (mounted newinstance at bootstrap) on a
// thread with the sandbox user's filesystem identity, so the slave's node
// belongs to the user as grantpt would make it; the master stays in the
// agent and its output is the process's one output stream.

const (
	defaultCols = 80
	defaultRows = 24
)

// openPty allocates a terminal of size and returns its master
// (non-blocking, so closing it ends a pending read) and its slave.
func (s *Server) openPty(size protocol.PtySize) (master, slave *os.File, err error) {
	var mfd, sfd int = -1, -1
	err = s.ws.as(func() error {
		fd, err := unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open /dev/pts/ptmx: %w", err)
		}
		mfd = fd
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlock the terminal: %w", err)
		}
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if errno != 0 {
			return fmt.Errorf("open the terminal's slave: %w", errno)
		}
		sfd = int(r)
		return nil
	})
	if err != nil {
		if mfd >= 0 {
			unix.Close(mfd)
		}
		return nil, nil, fmt.Errorf("%w: %v", protocol.ErrInternal, err)
	}
	master, slave = os.NewFile(uintptr(mfd), "ptmx"), os.NewFile(uintptr(sfd), "pts")
	if err := setPtySize(master, size); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// checkPtySize refuses sizes out of bounds.
func checkPtySize(size protocol.PtySize) error {
	if size.Cols < 0 || size.Rows < 0 || size.Cols > protocol.MaxPtySize || size.Rows > protocol.MaxPtySize {
		return fmt.Errorf("%w: terminal size %dx%d: columns and rows must be between 1 and %d",
			protocol.ErrInvalid, size.Cols, size.Rows, protocol.MaxPtySize)
	}
	return nil
}

// setPtySize sets a terminal's size on its master (the kernel signals
// SIGWINCH to its foreground process group when it changes).
func setPtySize(master *os.File, size protocol.PtySize) error {
	if err := checkPtySize(size); err != nil {
		return err
	}
	ws := &unix.Winsize{Col: defaultCols, Row: defaultRows}
	if size.Cols > 0 {
		ws.Col = uint16(size.Cols)
	}
	if size.Rows > 0 {
		ws.Row = uint16(size.Rows)
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return fmt.Errorf("%w: %v", protocol.ErrInternal, err)
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) }); err != nil {
		return fmt.Errorf("%w: %v", protocol.ErrInternal, err)
	}
	if ierr != nil {
		return fmt.Errorf("%w: set the terminal size: %v", protocol.ErrInternal, ierr)
	}
	return nil
}

// ptyStdin is a second descriptor of the master for feedStdin, which
// closes it when stdin ends; the master itself stays for the output.
func ptyStdin(master *os.File) (*os.File, error) {
	rc, err := master.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", protocol.ErrInternal, err)
	}
	fd, derr := -1, error(nil)
	rc.Control(func(m uintptr) { fd, derr = unix.FcntlInt(m, unix.F_DUPFD_CLOEXEC, 0) })
	if derr != nil {
		return nil, fmt.Errorf("%w: dup the terminal: %v", protocol.ErrInternal, derr)
	}
	return os.NewFile(uintptr(fd), "ptmx"), nil
}

// ptyEnv adds TERM when the request and the computer give none.
func ptyEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "TERM=") {
			return env
		}
	}
	return append(env, "TERM=xterm-256color")
}

// acquirePty counts a new terminal, refusing one past protocol.MaxPtys.
func (s *Server) acquirePty() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptys >= protocol.MaxPtys {
		return fmt.Errorf("%w: this computer already runs %d terminals, the most it may; close one first",
			protocol.ErrTooManyProcs, protocol.MaxPtys)
	}
	s.ptys++
	return nil
}

func (s *Server) releasePty() {
	s.mu.Lock()
	s.ptys--
	s.mu.Unlock()
}

// resizePty sets p's terminal size, now or, while it starts, once it runs.
func (s *Server) resizePty(p *process, f protocol.Frame) {
	var size protocol.PtySize
	if !s.decode(f, &size) {
		return
	}
	if err := checkPtySize(size); err != nil {
		return // a resize has no answer; a bad one is ignored
	}
	p.mu.Lock()
	p.ptySize = &size
	master := p.pty
	p.mu.Unlock()
	if master != nil {
		setPtySize(master, size)
	}
}

// hangup hangs p's terminal up as the kernel does when a modem line
// drops: SIGHUP then SIGCONT to the foreground process group and the
// session leader's group; what is still running after
// protocol.PtyHangupGrace is killed, the whole tree.
func (s *Server) hangup(p *process) {
	p.mu.Lock()
	master, pid, exited := p.pty, p.pid, p.exited
	p.mu.Unlock()
	if exited {
		return
	}
	if master == nil || pid <= 0 { // still starting: there is nothing to hang up gently
		s.killTree(p)
		return
	}
	groups := []int{pid}
	if rc, err := master.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			if fg, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil && fg > 0 && fg != pid {
				groups = append(groups, fg)
			}
		})
	}
	for _, g := range groups {
		unix.Kill(-g, unix.SIGHUP)
		unix.Kill(-g, unix.SIGCONT)
	}
	time.AfterFunc(protocol.PtyHangupGrace, func() {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if !exited {
			s.killTree(p)
		}
	})
}

// executePty is execute for a process on a terminal: the same spawn,
// placement, seccomp and limits, the slave as its stdio and controlling
// terminal, the master's output as its stdout, its stdin (when asked)
// written to the master. It has no default timeout.
func (s *Server) executePty(ctx context.Context, p *process, req protocol.ExecStart, argv []string, cwd string) (protocol.ExitStatus, error) {
	if err := checkPtySize(*req.Pty); err != nil {
		return protocol.ExitStatus{}, err
	}
	if err := s.acquirePty(); err != nil {
		return protocol.ExitStatus{}, err
	}
	defer s.releasePty()
	master, slave, err := s.openPty(*req.Pty)
	if err != nil {
		return protocol.ExitStatus{}, err
	}
	defer master.Close()
	var stdinW *os.File
	if req.Stdin {
		if stdinW, err = ptyStdin(master); err != nil {
			slave.Close()
			return protocol.ExitStatus{}, err
		}
	}

	oomBefore := s.oomKills()
	start := time.Now()
	w, err := s.spawn(p, argv, ptyEnv(s.env(req.Env, cwd)), cwd, []*os.File{slave, slave, slave})
	slave.Close()
	if err != nil {
		if stdinW != nil {
			stdinW.Close()
		}
		return protocol.ExitStatus{}, err
	}
	p.mu.Lock()
	p.pty = master
	size := p.ptySize
	p.mu.Unlock()
	if size != nil { // resized while it started
		setPtySize(master, *size)
	}
	if stdinW != nil {
		go s.feedStdin(p, stdinW)
	}
	s.sendJSON(protocol.KindStarted, p.id, protocol.Started{Pid: p.getPid()})

	var pumps sync.WaitGroup
	pumps.Add(1)
	out := newOutPipe(master, false)
	go s.pump(&pumps, s.outputTo(p, protocol.KindStdout), out)

	ws := s.waitProcess(ctx, p, w, req.Timeout.D())
	elapsed := time.Since(start)
	timedOut := s.afterExit(p) // kills what it left on the terminal
	awaitPumps(&pumps, out)
	s.releaseLeaf(p.leaf)
	return s.exitStatus(ws, timedOut, elapsed, oomBefore), nil
}
