package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Background processes: started like any process (execute, spawn: the
// sandbox user, placed in the user cgroup and a leaf of its own before its
// first instruction), but held by the agent instead of a stream. Each keeps
// its newest output in a ring (outRing, protocol.ProcRing bytes) that any
// number of requests read from an offset, and a stdin pipe that stays open
// until it is closed. The agent holds at most protocol.MaxProcs of them,
// running or exited; an exited one is forgotten after
// protocol.ProcRetention, or sooner when a new one needs its place. All of
// them die with the computer (the agent is its PID 1).

// bgTable is the agent's background processes.
type bgTable struct {
	mu        sync.Mutex
	seq       uint64
	procs     []*bgProc                // oldest first
	followers map[uint32]chan struct{} // output streams; closed at KindProcDetach
}

// bgProc is one background process.
type bgProc struct {
	id  string
	req protocol.ProcStart
	p   *process

	startc chan struct{} // closed once it runs (started)

	stdinMu sync.Mutex // one stdin write at a time

	mu      sync.Mutex
	pid     int
	cwd     string
	running bool // started and not yet exited
	begun   time.Time
	exit    *protocol.ExitStatus
	ended   time.Time
	stdin   *os.File // nil once closed
	ring    *outRing
	changed chan struct{} // closed and replaced at every output and at exit
}

func newBgTable() *bgTable { return &bgTable{followers: make(map[uint32]chan struct{})} }

// add makes room for and registers a new process (not listed until it
// runs), forgetting exited processes past their retention and, when the
// table is full, the oldest exited one.
func (t *bgTable) add(req protocol.ProcStart) (*bgProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(time.Now())
	if len(t.procs) >= protocol.MaxProcs {
		i := t.oldestExited()
		if i < 0 {
			return nil, fmt.Errorf("%w: this computer already runs %d background processes, the most it may; kill one or wait for one to exit",
				protocol.ErrTooManyProcs, protocol.MaxProcs)
		}
		t.procs = append(t.procs[:i], t.procs[i+1:]...)
	}
	t.seq++
	bp := &bgProc{id: "proc_" + strconv.FormatUint(t.seq, 10), req: req, startc: make(chan struct{}),
		ring: newOutRing(protocol.ProcRing, protocol.ProcRingSwitches), changed: make(chan struct{})}
	t.procs = append(t.procs, bp)
	return bp, nil
}

// expire forgets processes that exited more than ProcRetention before now
// (t.mu held).
func (t *bgTable) expire(now time.Time) {
	keep := t.procs[:0]
	for _, bp := range t.procs {
		bp.mu.Lock()
		old := bp.exit != nil && now.Sub(bp.ended) > protocol.ProcRetention
		bp.mu.Unlock()
		if !old {
			keep = append(keep, bp)
		}
	}
	clear(t.procs[len(keep):])
	t.procs = keep
}

// oldestExited is the index of the oldest exited process, or -1 (t.mu held).
func (t *bgTable) oldestExited() int {
	for i, bp := range t.procs {
		bp.mu.Lock()
		exited := bp.exit != nil
		bp.mu.Unlock()
		if exited {
			return i
		}
	}
	return -1
}

func (t *bgTable) remove(bp *bgProc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.procs {
		if x == bp {
			t.procs = append(t.procs[:i], t.procs[i+1:]...)
			return
		}
	}
}

// get finds a process that runs or ran.
func (t *bgTable) get(id string) (*bgProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(time.Now())
	for _, bp := range t.procs {
		if bp.id == id && bp.hasStarted() {
			return bp, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", protocol.ErrUnknownProc, id)
}

func (t *bgTable) list() []protocol.ProcInfo {
	t.mu.Lock()
	t.expire(time.Now())
	procs := append([]*bgProc(nil), t.procs...)
	t.mu.Unlock()
	out := []protocol.ProcInfo{}
	for _, bp := range procs {
		if bp.hasStarted() {
			out = append(out, bp.info())
		}
	}
	return out
}

// follow registers an output stream before its successor frames (a
// KindProcDetach) are dispatched.
func (t *bgTable) follow(stream uint32) chan struct{} {
	ch := make(chan struct{})
	t.mu.Lock()
	t.followers[stream] = ch
	t.mu.Unlock()
	return ch
}

func (t *bgTable) detach(stream uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ch, ok := t.followers[stream]; ok {
		close(ch)
		delete(t.followers, stream)
	}
}

func (bp *bgProc) hasStarted() bool {
	select {
	case <-bp.startc:
		return true
	default:
		return false
	}
}

// started is execute's report that the process runs (process.bg).
func (bp *bgProc) started(pid int, cwd string, stdin *os.File) {
	bp.mu.Lock()
	bp.pid, bp.cwd, bp.stdin, bp.running, bp.begun = pid, cwd, stdin, true, time.Now()
	bp.mu.Unlock()
	close(bp.startc)
}

// output is a pump's bytes (process.bg).
func (bp *bgProc) output(kind protocol.Kind, b []byte) {
	bp.mu.Lock()
	bp.ring.write(kind, b)
	bp.notifyLocked()
	bp.mu.Unlock()
}

func (bp *bgProc) notifyLocked() {
	close(bp.changed)
	bp.changed = make(chan struct{})
}

// finish records the exit, once every byte of output is in the ring.
func (bp *bgProc) finish(st protocol.ExitStatus) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	bp.exit, bp.ended, bp.running = &st, time.Now(), false
	if bp.stdin != nil {
		bp.stdin.Close()
		bp.stdin = nil
	}
	bp.notifyLocked()
}

func (bp *bgProc) info() protocol.ProcInfo {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return bp.infoLocked()
}

func (bp *bgProc) infoLocked() protocol.ProcInfo {
	return protocol.ProcInfo{ID: bp.id, Pid: bp.pid, Argv: bp.req.Argv, Command: bp.req.Command, Cwd: bp.cwd,
		Running: bp.running, Exit: bp.exit, StartedAt: bp.begun, EndedAt: bp.ended, StdinOpen: bp.stdin != nil,
		OutputStart: bp.ring.start, OutputEnd: bp.ring.end}
}

// writeStdin writes data to the process's stdin, waiting at most
// ProcStdinWait for it to be read, then closes stdin if asked.
func (bp *bgProc) writeStdin(data []byte, closeAfter bool) (protocol.ProcStdinResult, error) {
	bp.stdinMu.Lock()
	defer bp.stdinMu.Unlock()
	bp.mu.Lock()
	f := bp.stdin
	bp.mu.Unlock()
	if f == nil {
		return protocol.ProcStdinResult{Closed: true}, fmt.Errorf("%w: %s", protocol.ErrStdinClosed, bp.id)
	}
	var res protocol.ProcStdinResult
	if len(data) > 0 {
		f.SetWriteDeadline(time.Now().Add(protocol.ProcStdinWait))
		n, err := f.Write(data)
		res.Written = n
		switch {
		case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, syscall.EPIPE), errors.Is(err, os.ErrClosed):
			return res, fmt.Errorf("%w: %s no longer reads its stdin", protocol.ErrStdinClosed, bp.id)
		default:
			return res, fmt.Errorf("%w: write stdin: %v", protocol.ErrInternal, err)
		}
	}
	if closeAfter {
		bp.mu.Lock()
		if bp.stdin != nil {
			bp.stdin.Close()
			bp.stdin = nil
		}
		bp.mu.Unlock()
	}
	bp.mu.Lock()
	res.Closed = bp.stdin == nil
	bp.mu.Unlock()
	return res, nil
}

// startBackground starts a background process and answers its ProcInfo
// on stream once it runs.
func (s *Server) startBackground(ctx context.Context, stream uint32, req protocol.ProcStart) {
	if len(req.Stdin) > protocol.MaxProcStdin {
		s.sendError(stream, fmt.Errorf("%w: stdin is limited to %d bytes", protocol.ErrInvalid, protocol.MaxProcStdin))
		return
	}
	bp, err := s.bg.add(req)
	if err != nil {
		s.sendError(stream, err)
		return
	}
	p := &process{bg: bp}
	bp.p = p
	failed := make(chan error, 1)
	go func() {
		st, err := s.execute(ctx, p, protocol.ExecStart{Argv: req.Argv, Command: req.Command, Env: req.Env,
			Cwd: req.Cwd, Timeout: req.Timeout})
		if err != nil { // it never ran
			s.bg.remove(bp)
			failed <- err
			return
		}
		bp.finish(st)
	}()
	select {
	case <-bp.startc:
	case err := <-failed:
		s.sendError(stream, err)
		return
	}
	if len(req.Stdin) > 0 || req.CloseStdin {
		go bp.writeStdin(req.Stdin, req.CloseStdin)
	}
	s.sendJSON(protocol.KindOK, stream, bp.info())
}

// signalBackground signals a running process (SIGKILL: its whole tree,
// through its leaf) and waits up to req.Wait for it to exit.
func (s *Server) signalBackground(ctx context.Context, stream uint32, req protocol.ProcSignal) {
	bp, err := s.bg.get(req.ID)
	if err != nil {
		s.sendError(stream, err)
		return
	}
	if req.Signal <= 0 || req.Signal > 64 {
		s.sendError(stream, fmt.Errorf("%w: signal %d", protocol.ErrInvalid, req.Signal))
		return
	}
	bp.mu.Lock()
	running, pid, changed := bp.running, bp.pid, bp.changed
	bp.mu.Unlock()
	if running {
		if sig := unix.Signal(req.Signal); sig == unix.SIGKILL {
			s.killTree(bp.p)
		} else {
			unix.Kill(-pid, sig) // the process group, as a terminal would
		}
	}
	deadline := time.NewTimer(req.Wait.D())
	defer deadline.Stop()
	for running {
		select {
		case <-changed:
		case <-deadline.C:
			running = false
			continue
		case <-ctx.Done():
			running = false
			continue
		}
		bp.mu.Lock()
		running, changed = bp.running, bp.changed
		bp.mu.Unlock()
	}
	s.sendJSON(protocol.KindOK, stream, bp.info())
}

func (s *Server) stdinBackground(stream uint32, req protocol.ProcStdin) {
	bp, err := s.bg.get(req.ID)
	if err != nil {
		s.sendError(stream, err)
		return
	}
	if len(req.Data) > protocol.MaxProcStdin {
		s.sendError(stream, fmt.Errorf("%w: one stdin write is limited to %d bytes", protocol.ErrInvalid, protocol.MaxProcStdin))
		return
	}
	res, err := bp.writeStdin(req.Data, req.Close)
	if err != nil {
		s.sendError(stream, err)
		return
	}
	s.sendJSON(protocol.KindOK, stream, res)
}

// outputRound bounds the bytes one read of the ring copies.
const outputRound = 256 << 10

// outputBackground sends a process's output from req.Offset (see
// protocol.KindProcOutput); detach ends a follow.
func (s *Server) outputBackground(ctx context.Context, stream uint32, req protocol.ProcOutput, detach chan struct{}) {
	defer s.bg.detach(stream)
	bp, err := s.bg.get(req.ID)
	if err != nil {
		s.sendError(stream, err)
		return
	}
	bp.mu.Lock()
	end := bp.ring.end
	bp.mu.Unlock()
	if req.Offset < 0 || req.Offset > end {
		s.sendError(stream, fmt.Errorf("%w: offset %d is outside the output, which has %d bytes so far", protocol.ErrInvalid, req.Offset, end))
		return
	}
	limit := req.Limit
	if limit <= 0 || limit > protocol.ProcRing {
		limit = protocol.ProcRing
	}
	off, sent, first := req.Offset, int64(0), true
	for {
		want := int64(outputRound)
		if !req.Follow {
			want = min(want, limit-sent)
		}
		bp.mu.Lock()
		from, pieces := bp.ring.read(off, want)
		exited, changed := bp.exit != nil, bp.changed
		bp.mu.Unlock()
		if first || from > off {
			if s.sendJSON(protocol.KindOK, stream, protocol.ProcMark{Offset: from, Dropped: from - off}) != nil {
				return
			}
			first = false
		}
		n := int64(0)
		for _, pc := range pieces {
			for b := pc.data; len(b) > 0; {
				k := min(len(b), protocol.ChunkSize)
				if s.send(pc.kind, stream, b[:k]) != nil {
					return
				}
				b = b[k:]
			}
			n += int64(len(pc.data))
		}
		off, sent = from+n, sent+n
		if n > 0 && (req.Follow || sent < limit) {
			continue
		}
		if !req.Follow || exited {
			break
		}
		select {
		case <-changed:
			continue
		case <-detach:
		case <-ctx.Done():
		}
		break
	}
	s.sendJSON(protocol.KindDataEnd, stream, protocol.ProcOutputEnd{Next: off, Proc: bp.info()})
}

// backgroundRequest dispatches the frames of background processes.
func (s *Server) backgroundRequest(ctx context.Context, f protocol.Frame) {
	switch f.Kind {
	case protocol.KindProcStart:
		var req protocol.ProcStart
		if s.decode(f, &req) {
			go s.startBackground(ctx, f.ID, req)
		}
	case protocol.KindProcList:
		go s.sendJSON(protocol.KindOK, f.ID, protocol.ProcList{Procs: s.bg.list()})
	case protocol.KindProcGet:
		var req protocol.ProcRef
		if s.decode(f, &req) {
			if bp, err := s.bg.get(req.ID); err != nil {
				s.sendError(f.ID, err)
			} else {
				go s.sendJSON(protocol.KindOK, f.ID, bp.info())
			}
		}
	case protocol.KindProcOutput:
		var req protocol.ProcOutput
		if s.decode(f, &req) {
			var detach chan struct{}
			if req.Follow {
				detach = s.bg.follow(f.ID)
			}
			go s.outputBackground(ctx, f.ID, req, detach)
		}
	case protocol.KindProcDetach:
		s.bg.detach(f.ID)
	case protocol.KindProcStdin:
		var req protocol.ProcStdin
		if s.decode(f, &req) {
			go s.stdinBackground(f.ID, req)
		}
	case protocol.KindProcSignal:
		var req protocol.ProcSignal
		if s.decode(f, &req) {
			go s.signalBackground(ctx, f.ID, req)
		}
	}
}
