package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// SandboxUID and SandboxGID are the identity of all code in a computer.
const (
	SandboxUID = 1000
	SandboxGID = 1000
)

// outputGrace is how long output pipes are still drained after the main
// process exits, for descendants that hold them; then they are cut so a
// background process cannot hold a command open.
const outputGrace = 200 * time.Millisecond

const stdinWindow = 8 // stdin chunks in flight; the host sends at most this many unacknowledged

type process struct {
	id uint32

	mu       sync.Mutex
	pid      int
	leaf     string
	stdin    chan []byte // nil when stdin is /dev/null or was closed
	in       chan []byte // the same queue, never reset: feedStdin drains it
	timedOut bool
	killed   bool // a kill was asked for, possibly before the process existed

	// tty is set for a process on a terminal (pty.go): pty is its master
	// once it runs, ptySize the newest size asked while it starts, exited
	// set once its main process was reaped.
	tty     bool
	pty     *os.File
	ptySize *protocol.PtySize
	exited  bool

	// bg is set for a background process (process_bg.go): its output goes
	// to bg's ring instead of frames, its stdin is bg's, it has no default
	// timeout, and its start is told to bg.
	bg *bgProc
}

func (p *process) getPid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

func (p *process) setPid(pid int) {
	p.mu.Lock()
	p.pid = pid
	p.mu.Unlock()
}

func (p *process) getLeaf() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaf
}

// register makes a process known before its Exec frame's successors are
// dispatched, so stdin frames that arrive while it starts are queued, not lost.
func (s *Server) register(id uint32, stdin bool) (*process, error) {
	p := &process{id: id}
	if stdin {
		p.in = make(chan []byte, stdinWindow)
		p.stdin = p.in
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.procs[id]; dup {
		return nil, fmt.Errorf("%w: stream %d already in use", protocol.ErrInvalid, id)
	}
	s.procs[id] = p
	return p, nil
}

func (s *Server) runProcess(ctx context.Context, p *process, req protocol.ExecStart) {
	id := p.id
	defer func() {
		s.mu.Lock()
		delete(s.procs, id)
		s.mu.Unlock()
	}()

	st, err := s.execute(ctx, p, req)
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.sendJSON(protocol.KindExit, id, st)
}

func (s *Server) execute(ctx context.Context, p *process, req protocol.ExecStart) (protocol.ExitStatus, error) {
	argv, err := s.argv(req)
	if err != nil {
		return protocol.ExitStatus{}, err
	}
	cwd, err := s.resolveCwd(req.Cwd)
	if err != nil {
		return protocol.ExitStatus{}, err
	}
	if req.Pty != nil {
		return s.executePty(ctx, p, req, argv, cwd)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return protocol.ExitStatus{}, fmt.Errorf("%w: pipe: %v", protocol.ErrInternal, err)
	}
	defer stdoutR.Close()
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutW.Close()
		return protocol.ExitStatus{}, fmt.Errorf("%w: pipe: %v", protocol.ErrInternal, err)
	}
	defer stderrR.Close()
	stdin, stdinW, err := s.stdinFor(req.Stdin || p.bg != nil)
	if err != nil {
		stdoutW.Close()
		stderrW.Close()
		return protocol.ExitStatus{}, err
	}

	oomBefore := s.oomKills()
	start := time.Now()
	w, err := s.spawn(p, argv, s.env(req.Env, cwd), cwd, []*os.File{stdin, stdoutW, stderrW})
	stdin.Close()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		if stdinW != nil {
			stdinW.Close()
		}
		return protocol.ExitStatus{}, err
	}
	if p.bg != nil {
		p.bg.started(p.getPid(), cwd, stdinW)
	} else {
		if stdinW != nil {
			go s.feedStdin(p, stdinW)
		}
		s.sendJSON(protocol.KindStarted, p.id, protocol.Started{Pid: p.getPid()})
	}

	outs := []*outPipe{newOutPipe(stdoutR, true), newOutPipe(stderrR, true)}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go s.pump(&pumps, s.outputTo(p, protocol.KindStdout), outs[0])
	go s.pump(&pumps, s.outputTo(p, protocol.KindStderr), outs[1])

	timeout := req.Timeout.D()
	if timeout <= 0 && p.bg == nil {
		timeout = s.init.Timeout.D()
	}
	ws := s.waitProcess(ctx, p, w, timeout)
	elapsed := time.Since(start)
	timedOut := s.afterExit(p)
	awaitPumps(&pumps, outs...)
	s.releaseLeaf(p.leaf)
	return s.exitStatus(ws, timedOut, elapsed, oomBefore), nil
}

// exitStatus describes how a process ended.
func (s *Server) exitStatus(ws syscall.WaitStatus, timedOut bool, elapsed time.Duration, oomBefore uint64) protocol.ExitStatus {
	st := protocol.ExitStatus{ExitCode: -1, TimedOut: timedOut, Duration: protocol.Millis(elapsed)}
	switch {
	case ws.Exited():
		st.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		st.Signal = int(ws.Signal())
	}
	st.OOMKilled = s.oomKills() > oomBefore
	return st
}

// waitProcess waits for p's main process to exit, killing its tree when
// timeout (if any) passes, marking it timed out, or when ctx ends.
func (s *Server) waitProcess(ctx context.Context, p *process, w *waiter, timeout time.Duration) syscall.WaitStatus {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case ws := <-w.exited:
		return ws
	case <-timer:
		p.mu.Lock()
		p.timedOut = true
		p.mu.Unlock()
		s.killTree(p)
		return <-w.exited
	case <-ctx.Done():
		s.killTree(p)
		return <-w.exited
	}
}

// afterExit closes p's stdin once its main process has exited and, if it
// timed out, kills the descendants that outlived it. It reports whether p
// timed out.
func (s *Server) afterExit(p *process) (timedOut bool) {
	p.mu.Lock()
	p.exited = true
	timedOut = p.timedOut
	if p.stdin != nil {
		close(p.stdin)
		p.stdin = nil
	}
	p.mu.Unlock()
	if timedOut || p.tty { // a terminal's processes end with it
		p.mu.Lock()
		p.pid = 0 // reaped: its pid may be reused; only the leaf is swept
		p.mu.Unlock()
		s.killTree(p) // descendants that outlived the main process
	}
	return timedOut
}

// argv resolves the program the way a shell would, inside the computer.
func (s *Server) argv(req protocol.ExecStart) ([]string, error) {
	switch {
	case req.Command != "" && len(req.Argv) > 0:
		return nil, fmt.Errorf("%w: give argv or command, not both", protocol.ErrInvalid)
	case req.Command != "":
		return []string{"/bin/sh", "-c", req.Command}, nil
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return nil, fmt.Errorf("%w: empty command", protocol.ErrInvalid)
	}
	for _, a := range req.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("%w: argument contains a NUL byte", protocol.ErrInvalid)
		}
	}
	return req.Argv, nil
}

// env is a process's environment: the computer's defaults, its own
// (Init.Env: a template's, the network's), then extra. The home is the
// workspace, the computer's one writable disk, so what users install for
// themselves at run time lands there, within its quota: pip's user site
// (PIP_BREAK_SYSTEM_PACKAGES: the system's packages are read-only, so a
// user install cannot break them, and Debian's "externally managed"
// refusal would only stop it), npm's and cargo's homes.
func (s *Server) env(extra []string, cwd string) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/workspace", "USER=user", "LOGNAME=user", "LANG=C.UTF-8",
		"PIP_BREAK_SYSTEM_PACKAGES=1", "PWD=" + cwd,
	}
	env = append(env, s.init.Env...)
	return dedupEnv(append(env, extra...))
}

// dedupEnv keeps the last value of each variable, in first-seen order, and
// drops entries that are not NAME=value.
func dedupEnv(env []string) []string {
	idx := make(map[string]int, len(env))
	out := env[:0:0]
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			continue
		}
		if i, seen := idx[k]; seen {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func lookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			dir = "."
		}
		p := path.Join(dir, argv0)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s: command not found", protocol.ErrNotFound, argv0)
}

// spawn starts argv as the sandbox user. The child is created with
// PTRACE_TRACEME, so it stops right after execve, before running a single
// instruction of the new program; the agent then moves it into the computer's
// cgroups and detaches. Nothing the user runs ever executes outside its
// limits, on cgroup v1 and v2 alike. All of it runs on the spawner thread:
// the tracer, and the thread whose credentials the child inherits.
func (s *Server) spawn(p *process, argv, env []string, cwd string, files []*os.File) (w *waiter, err error) {
	prog, err := lookPath(argv[0], env)
	if err != nil {
		return nil, err
	}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	attr := &syscall.ProcAttr{
		Dir: cwd, Env: env, Files: fds,
		Sys: &syscall.SysProcAttr{
			Setpgid:    !p.tty,
			Ptrace:     true,
			Credential: s.credential(),
		},
	}
	if p.tty { // a session of its own, the terminal (its fd 0) its controlling terminal
		attr.Sys.Setsid, attr.Sys.Setctty, attr.Sys.Ctty = true, true, 0
	}
	s.spawner.run(func() { w, err = s.forkTraced(p, prog, argv, attr) })
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	killed := p.killed
	p.mu.Unlock()
	if killed { // cancelled while starting
		s.killTree(p)
	}
	return w, nil
}

// credential is who user processes run as: the sandbox user, or root of
// the computer's user namespace in a template build's computer
// (protocol.Init.Build). A pod's agent (internal/sandbox/kube/podagent)
// runs as the sandbox user itself: its children keep its identity.
func (s *Server) credential() *syscall.Credential {
	if os.Getuid() == SandboxUID && !s.init.Build {
		return nil // a pod's agent: it already is the sandbox user, and may not call setgroups
	}
	if s.init.Build {
		return &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	return &syscall.Credential{Uid: SandboxUID, Gid: SandboxGID, Groups: []uint32{}}
}

// forkTraced forks, waits for the post-exec stop, places and detaches.
// It holds the registry's waitMu throughout, so that no drain takes the
// stop or reaps the process before it is registered (reaper.go).
func (s *Server) forkTraced(p *process, prog string, argv []string, attr *syscall.ProcAttr) (*waiter, error) {
	r := s.reg
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	r.drainHeld()
	pidfd := -1
	attr.Sys.PidFD = &pidfd
	pid, err := syscall.ForkExec(prog, argv, attr)
	if err != nil {
		return nil, spawnError(argv[0], err)
	}
	p.setPid(pid)
	fail := func(reap bool, err error) (*waiter, error) {
		if reap {
			r.reapStarted(pid)
		}
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		p.setPid(0) // reaped: the pid may be reused
		s.releaseLeaf(p.getLeaf())
		return nil, err
	}
	ws, taken, timedOut := r.awaitStop(pid)
	switch {
	case timedOut:
		return fail(!taken || ws.Stopped(), fmt.Errorf("%w: new process did not stop after exec", protocol.ErrInternal))
	case !taken:
		return fail(true, fmt.Errorf("%w: start %s: the new process could not be waited for", protocol.ErrInternal, argv[0]))
	case !ws.Stopped():
		return fail(false, fmt.Errorf("%w: %s ended before it started (%s)", protocol.ErrInternal, argv[0], endReason(ws)))
	}
	if err := s.place(p); err != nil {
		return fail(true, err)
	}
	if err := unix.PtraceDetach(pid); err != nil && !errors.Is(err, unix.ESRCH) {
		return fail(true, fmt.Errorf("%w: detach: %v", protocol.ErrInternal, err))
	}
	return r.add(pid, pidfd), nil
}

// endReason describes how a process ended.
func endReason(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("killed by signal %d", int(ws.Signal()))
	}
	return fmt.Sprintf("exited with status %d", ws.ExitStatus())
}

func spawnError(argv0 string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %s: command not found", protocol.ErrNotFound, argv0)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: %s: permission denied", protocol.ErrPermission, argv0)
	case errors.Is(err, unix.EAGAIN):
		return fmt.Errorf("%w: cannot start %s: the computer's process limit is reached", protocol.ErrProcLimit, argv0)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: %s: not a directory", protocol.ErrNotDir, argv0)
	}
	return fmt.Errorf("%w: start %s: %v", protocol.ErrInternal, argv0, err)
}

func (s *Server) stdinFor(want bool) (child, host *os.File, err error) {
	if !want {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: open %s: %v", protocol.ErrInternal, os.DevNull, err)
		}
		return f, nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: pipe: %v", protocol.ErrInternal, err)
	}
	return r, w, nil
}

// outputTo is where p's output of stream kind goes: a frame (its payload
// after protocol.HeaderRoom) on its stream, or a background process's
// ring. It reports false when the output can go nowhere any more.
func (s *Server) outputTo(p *process, kind protocol.Kind) func(frame []byte) bool {
	if p.bg != nil {
		return func(frame []byte) bool { p.bg.output(kind, frame[protocol.HeaderRoom:]); return true }
	}
	return func(frame []byte) bool { return s.sendInPlace(kind, p.id, frame) == nil }
}

func (s *Server) feedStdin(p *process, w *os.File) {
	defer w.Close()
	broken := false
	for chunk := range p.in {
		if !broken {
			if _, err := w.Write(chunk); err != nil {
				broken = true // the process closed stdin; keep acknowledging so the host never stalls
			}
		}
		s.send(protocol.KindStdinAck, p.id, nil)
	}
}

func (s *Server) processInput(f protocol.Frame) {
	s.mu.Lock()
	p := s.procs[f.ID]
	s.mu.Unlock()
	if p == nil {
		return // the process already ended; late input is dropped
	}
	switch f.Kind {
	case protocol.KindStdin:
		p.mu.Lock()
		if p.stdin != nil {
			select {
			case p.stdin <- f.Payload:
			default: // the host exceeded its window; dropping beats blocking the channel
			}
		}
		p.mu.Unlock()
	case protocol.KindStdinClose:
		p.mu.Lock()
		if p.stdin != nil {
			close(p.stdin)
			p.stdin = nil
		}
		p.mu.Unlock()
	case protocol.KindPtyResize:
		if p.tty {
			s.resizePty(p, f)
		}
	case protocol.KindSignal:
		var req protocol.SignalRequest
		if !s.decode(f, &req) {
			return
		}
		sig := unix.Signal(req.Signal)
		if sig == unix.SIGHUP && p.tty {
			s.hangup(p)
			return
		}
		if sig == unix.SIGKILL {
			s.killTree(p)
			return
		}
		if pid := p.getPid(); pid > 0 && req.Signal > 0 && req.Signal <= 64 {
			unix.Kill(-pid, sig) // the process group, as a terminal would
		}
	}
}

// oomKills reads the oom_kill counter of the user's memory cgroup.
func (s *Server) oomKills() uint64 {
	fd := s.init.Cgroup.OOM
	if fd <= 0 {
		return 0
	}
	buf := make([]byte, 1024)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			c, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return c
		}
	}
	return 0
}
