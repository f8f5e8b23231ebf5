package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Computers' agents are forked by the launcher, a small long-lived process
// of the agent executable (LauncherArg), not by this process: a fork with
// CLONE_NEWUSER cannot be a vfork, and a fork of the server copies its page
// tables and marks all its memory copy-on-write, which the server then pays
// for in page faults on the requests after every start (docs/benchmarks.md).
// The launcher is started with a plain vfork, once per process (at the
// first computer, again after it died), from a thread that never ends, so
// its parent-death signal means this process's death.
//
// There is no in-process fallback: when the launcher cannot be started or
// dies during a start, that computer's Create fails with the reason, and
// the next one starts a new launcher.

// errLauncherGone is a start that the launcher's death interrupted.
var errLauncherGone = errors.New("the agent launcher ended")

// launcherStartTimeout bounds the wait for a new launcher's ready message.
const launcherStartTimeout = 30 * time.Second

// theLauncher is this process's launcher.
var theLauncher launcherSlot

// launcherSlot holds the current launcher, starting one when there is none.
type launcherSlot struct {
	mu       sync.Mutex
	cur      *launcher     // nil before the first start, or after a failed one
	starting chan struct{} // non-nil while a start is under way; closed at its end
	err      error         // the last start's error
}

// prepare starts a launcher in the background if there is none (path: the
// agent executable, which is also the launcher's).
func (s *launcherSlot) prepare(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.cur == nil || s.cur.isGone()) && s.starting == nil {
		s.startLocked(path)
	}
}

// get returns a live launcher, starting one if needed.
func (s *launcherSlot) get(path string) (*launcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tries := 0; ; tries++ {
		if s.cur != nil && !s.cur.isGone() {
			return s.cur, nil
		}
		if s.starting == nil {
			if tries > 1 {
				return nil, fmt.Errorf("start the agent launcher: %w", errLauncherGone)
			}
			s.startLocked(path)
		}
		wait := s.starting
		s.mu.Unlock()
		<-wait
		s.mu.Lock()
		if s.cur == nil && s.starting == nil {
			return nil, s.err
		}
	}
}

func (s *launcherSlot) startLocked(path string) {
	done := make(chan struct{})
	s.starting, s.cur = done, nil
	go func() {
		l, err := startLauncher(path)
		s.mu.Lock()
		s.cur, s.err, s.starting = l, err, nil
		s.mu.Unlock()
		close(done)
	}()
}

// current returns the launcher last started, or nil.
func (s *launcherSlot) current() *launcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// launcher is the driver's end of a launcher process.
type launcher struct {
	proc *os.Process
	conn *net.UnixConn

	mu      sync.Mutex
	next    uint64
	starts  map[uint64]*pendingStart // sent, not answered
	agents  map[uint64]*agentProc    // started, not reaped
	gone    bool
	goneErr error
}

// pendingStart is a request waiting for its answer.
type pendingStart struct {
	done  chan struct{} // the agent's (agentProc.done)
	reply chan startResult
}

type startResult struct {
	agent *agentProc
	err   error
}

// startLauncher starts a launcher from path and waits for it to be ready.
func startLauncher(path string) (*launcher, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start the agent launcher: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "launcher"), os.NewFile(uintptr(fds[1]), "launcher")
	defer theirs.Close()
	defer ours.Close()
	exe, err := sealedCopy(path)
	if err != nil {
		return nil, fmt.Errorf("start the agent launcher: %w", err)
	}
	defer exe.Close()
	cmd := &exec.Cmd{
		// The launcher runs a sealed in-memory copy of the agent
		// executable, not the file in a state directory: it lives as long
		// as this process, and would keep that directory's filesystem
		// busy (unmountable) after its driver is gone.
		Path:       "/proc/self/fd/" + strconv.Itoa(int(exe.Fd())),
		Args:       []string{"cubicle", LauncherArg},
		Env:        []string{},
		Dir:        "/",
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{theirs}, // launcherFD
		SysProcAttr: &syscall.SysProcAttr{
			Pdeathsig: syscall.SIGKILL,
			Setsid:    true, // a terminal's Ctrl-C must reach cubicle, not the launcher
		},
	}
	onKeeperThread(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("start the agent launcher: %w", err)
	}
	theirs.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaped whenever it ends
	c, err := net.FileConn(ours)
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("start the agent launcher: %w", err)
	}
	l := &launcher{proc: cmd.Process, conn: c.(*net.UnixConn),
		starts: map[uint64]*pendingStart{}, agents: map[uint64]*agentProc{}}
	if err := l.awaitReady(); err != nil {
		cmd.Process.Kill()
		c.Close()
		select {
		case werr := <-exited:
			err = fmt.Errorf("%w (%s)", err, exitText(werr))
		case <-time.After(time.Second):
		}
		return nil, fmt.Errorf("start the agent launcher %s: %w", path, err)
	}
	go l.read(exited)
	return l, nil
}

// awaitReady reads the launcher's first message.
func (l *launcher) awaitReady() error {
	l.conn.SetReadDeadline(time.Now().Add(launcherStartTimeout))
	defer l.conn.SetReadDeadline(time.Time{})
	buf := make([]byte, maxLaunchMsg)
	n, err := l.conn.Read(buf)
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	var r launchReport
	if json.Unmarshal(buf[:n], &r) != nil || !r.Ready {
		return fmt.Errorf("not a launcher")
	}
	return nil
}

func (l *launcher) isGone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone
}

// start asks the launcher for an agent running path, in the namespaces of
// a computer with host uid hostUID; stderr becomes its stderr and extra
// its descriptors 3, 4, .... done is closed once the agent has ended.
func (l *launcher) start(path string, hostUID uint32, stderr *os.File, extra []*os.File, done chan struct{}) (*agentProc, error) {
	fds := []int{int(stderr.Fd())}
	for _, f := range extra {
		fds = append(fds, int(f.Fd()))
	}
	p := &pendingStart{done: done, reply: make(chan startResult, 1)}
	l.mu.Lock()
	if l.gone {
		l.mu.Unlock()
		return nil, l.goneErr
	}
	l.next++
	id := l.next
	l.starts[id] = p
	l.mu.Unlock()
	msg, oob, err := encodeLaunch(launchRequest{ID: id, Path: path, HostUID: hostUID}, fds)
	if err == nil {
		_, _, err = l.conn.WriteMsgUnix(msg, oob, nil)
	}
	runtime.KeepAlive(extra)
	runtime.KeepAlive(stderr)
	if err != nil {
		l.mu.Lock()
		delete(l.starts, id)
		l.mu.Unlock()
		return nil, fmt.Errorf("start agent: ask the launcher: %w", err)
	}
	r := <-p.reply
	return r.agent, r.err
}

// read handles the launcher's reports until it is gone.
func (l *launcher) read(exited <-chan error) {
	buf := make([]byte, maxLaunchMsg)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, flags, _, err := l.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			break
		}
		fds, err := receivedFDs(oob[:oobn], flags)
		var r launchReport
		if err == nil {
			err = json.Unmarshal(buf[:n], &r)
		}
		if err != nil {
			closeFDs(fds)
			break // a launcher that says what it should not is not used again
		}
		l.handle(r, fds)
	}
	l.conn.Close()
	l.proc.Kill() // it may be alive only if it misbehaved
	reason := errLauncherGone
	select {
	case werr := <-exited:
		reason = fmt.Errorf("%w (%s)", errLauncherGone, exitText(werr))
	case <-time.After(100 * time.Millisecond):
	}
	l.die(reason)
}

// handle applies one report.
func (l *launcher) handle(r launchReport, fds []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.Exited:
		if a := l.agents[r.ID]; a != nil {
			delete(l.agents, r.ID)
			a.end(exitReason(unix.WaitStatus(r.Status)))
		}
	case l.starts[r.ID] != nil:
		p := l.starts[r.ID]
		delete(l.starts, r.ID)
		if r.Err != "" || r.Pid <= 0 || len(fds) != 1 {
			closeFDs(fds)
			if r.Err == "" {
				r.Err = "start agent: the launcher's answer names no agent"
			}
			p.reply <- startResult{err: errors.New(r.Err)}
			return
		}
		a := &agentProc{pid: r.Pid, pidfd: fds[0], done: p.done}
		l.agents[r.ID] = a
		p.reply <- startResult{agent: a}
	default:
		closeFDs(fds)
	}
}

// die fails the starts in flight and ends the agents still running: they
// die with the launcher (their parent-death signal), and are killed here
// too, so that none outlives it whatever it did to that signal; their
// pidfds say when they are gone, as the launcher can no longer.
func (l *launcher) die(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone, l.goneErr = true, reason
	for id, p := range l.starts {
		p.reply <- startResult{err: fmt.Errorf("start agent: %w", reason)}
		delete(l.starts, id)
	}
	for id, a := range l.agents {
		a.kill()
		go a.awaitExit()
		delete(l.agents, id)
	}
}

// exitText says how the launcher process ended, from its Wait.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// keeper is a thread that never ends: what it forks with a parent-death
// signal dies only with this process. (A Go thread ends when a goroutine
// locked to it returns; any thread can have run one.)
var keeper struct {
	once sync.Once
	jobs chan func()
}

// onKeeperThread runs f on the keeper thread.
func onKeeperThread(f func()) {
	keeper.once.Do(func() {
		keeper.jobs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked
			for job := range keeper.jobs {
				job()
			}
		}()
	})
	done := make(chan struct{})
	keeper.jobs <- func() { f(); close(done) }
	<-done
}

// sealedCopy copies the executable at path into a sealed memfd (it cannot
// change once copied); exec it through /proc/self/fd/N.
func sealedCopy(path string) (*os.File, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	fd, err := unix.MemfdCreate("cubicle-launcher", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("copy %s to memory: %w", path, err)
	}
	dst := os.NewFile(uintptr(fd), "cubicle-launcher")
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return nil, fmt.Errorf("copy %s to memory: %w", path, err)
	}
	const seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(dst.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		dst.Close()
		return nil, fmt.Errorf("seal the copy of %s: %w", path, err)
	}
	return dst, nil
}
