package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Python calls. The session kernel (one per computer) is started lazily, or
// by a call without cells (a warm-up that runs the prelude). Session calls
// hold the session in arrival order (a turnstile), so concurrent calls queue;
// per_call calls get a kernel of their own and do not touch the session.
// The session kernel's lifecycle and crash policy are in python_session.go.

const (
	// idleEviction shuts an unused session kernel down.
	idleEviction = 5 * time.Minute
	// maxCells bounds a call so its result always fits in one frame.
	maxCells = 256
	// maxPerCall bounds per_call kernels running at once (each costs the
	// agent, which is outside the memory cgroup, up to a message's bound);
	// more calls wait.
	maxPerCall = 4
)

var (
	errTimedOut  = errors.New("python call timed out")
	errCancelled = errors.New("python call cancelled")
)

type pythonManager struct {
	s         *Server
	idleAfter time.Duration
	turn      turnstile

	perCall chan struct{} // semaphore of per_call kernels

	mu     sync.Mutex
	calls  map[uint32]context.CancelCauseFunc
	kernel *pyKernel // the session kernel; changed only by the turnstile holder, under mu

	// Held by the turnstile.
	prelude string    // the last prelude given: every new session kernel runs it
	cwd     string    // where the session kernel was last started
	crashes int       // since the last restart control
	failed  bool      // crashed twice: refuse until a restart control
	lost    string    // why the previous session kernel is gone (told to the next call)
	lastUse time.Time // end of the last session call
	idle    *time.Timer
}

func newPythonManager(s *Server) *pythonManager {
	return &pythonManager{
		s: s, idleAfter: idleEviction, cwd: WorkspacePath,
		perCall: make(chan struct{}, maxPerCall),
		calls:   make(map[uint32]context.CancelCauseFunc),
	}
}

func (m *pythonManager) current() *pyKernel {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kernel
}

func (m *pythonManager) setKernel(k *pyKernel) {
	m.mu.Lock()
	m.kernel = k
	m.mu.Unlock()
}

// start begins a call. It runs on the dispatch goroutine, so session calls
// take their place in the queue in the order their frames arrived.
func (m *pythonManager) start(ctx context.Context, id uint32, req protocol.PythonRequest) {
	if err := validatePython(&req); err != nil {
		m.s.sendError(id, err)
		return
	}
	cctx, cancel := context.WithCancelCause(ctx)
	m.mu.Lock()
	if _, dup := m.calls[id]; dup {
		m.mu.Unlock()
		cancel(nil)
		m.s.sendError(id, fmt.Errorf("%w: stream %d already in use", protocol.ErrInvalid, id))
		return
	}
	m.calls[id] = cancel
	m.mu.Unlock()
	var tk *ticket
	if req.Mode == protocol.ModeSession {
		tk = m.turn.enqueue()
	}
	go m.serve(cctx, cancel, id, req, tk)
}

// cancel cancels a call (KindPythonCancel); unknown streams are ignored:
// the call may have just ended.
func (m *pythonManager) cancel(id uint32) {
	m.mu.Lock()
	cancel := m.calls[id]
	m.mu.Unlock()
	if cancel != nil {
		cancel(errCancelled)
	}
}

func validatePython(req *protocol.PythonRequest) error {
	switch req.Mode {
	case "":
		req.Mode = protocol.ModeSession
	case protocol.ModeSession, protocol.ModePerCall:
	default:
		return fmt.Errorf("%w: python mode %q (want %q or %q)", protocol.ErrInvalid, req.Mode, protocol.ModeSession, protocol.ModePerCall)
	}
	if len(req.Cells) > maxCells {
		return fmt.Errorf("%w: %d cells; at most %d per call", protocol.ErrInvalid, len(req.Cells), maxCells)
	}
	switch {
	case req.Timeout <= 0:
		req.Timeout = protocol.Millis(sandbox.DefaultPythonTimeout)
	case req.Timeout.D() > sandbox.MaxPythonTimeout:
		req.Timeout = protocol.Millis(sandbox.MaxPythonTimeout)
	}
	switch {
	case req.MaxOutput <= 0:
		req.MaxOutput = defaultMaxOutput
	case req.MaxOutput > maxOutputLimit:
		req.MaxOutput = maxOutputLimit
	}
	return nil
}

func (m *pythonManager) serve(ctx context.Context, cancel context.CancelCauseFunc, id uint32, req protocol.PythonRequest, tk *ticket) {
	defer func() {
		m.mu.Lock()
		delete(m.calls, id)
		m.mu.Unlock()
		cancel(nil)
	}()
	defer func() {
		if r := recover(); r != nil {
			m.s.log.Error("python call panicked", "panic", r, "stack", string(debug.Stack()))
			m.s.sendError(id, fmt.Errorf("%w: python call: %v", protocol.ErrInternal, r))
		}
	}()
	var res protocol.PythonResult
	var err error
	if req.Mode == protocol.ModePerCall {
		res, err = m.runPerCall(ctx, id, req)
	} else {
		res, err = m.runSession(ctx, id, req, tk)
	}
	if err != nil {
		m.s.sendError(id, err)
		return
	}
	b, err := json.Marshal(res)
	if err == nil && len(b) > protocol.MaxPayload {
		err = fmt.Errorf("%w: python result of %d bytes does not fit in a frame", protocol.ErrInternal, len(b))
	}
	if err != nil {
		m.s.sendError(id, err)
		return
	}
	m.s.send(protocol.KindOK, id, b)
}

// newResult is a result with every cell skipped, to be filled in.
func newResult(req protocol.PythonRequest) protocol.PythonResult {
	res := protocol.PythonResult{Status: "ok", FailedCell: -1, Cells: make([]protocol.CellResult, len(req.Cells))}
	for i, c := range req.Cells {
		res.Cells[i] = protocol.CellResult{Index: i, Title: clipString(c.Title, 256), Status: protocol.CellSkipped}
	}
	return res
}

// failResult ends r as failed with msg.
func failResult(r *protocol.PythonResult, msg string) {
	r.Status = "error"
	r.Message = msg
}

// cancelResult ends r as cancelled (by a timeout or the caller) at what.
func cancelResult(ctx context.Context, r *protocol.PythonResult, req protocol.PythonRequest, what string) {
	r.Status = "cancelled"
	r.Cancelled = true
	if errors.Is(context.Cause(ctx), errTimedOut) {
		r.TimedOut = true
		r.Message = msgTimedOut(timeoutSecs(req))
		return
	}
	r.Message = "The call was cancelled " + what + "."
}

func timeoutSecs(req protocol.PythonRequest) int {
	return int(math.Ceil(req.Timeout.D().Seconds()))
}

// newKernel starts a kernel and runs the prelude in it; lazy defers the
// imports at the prelude's top until a cell needs them, a warm-up (not
// lazy) all but matplotlib's (python_prelude.go).
// A kernel that cannot start for its own reasons, or a failing prelude,
// gives a message for the result (failure); an agent problem gives err.
// died reports a kernel that died by itself while starting.
func (m *pythonManager) newKernel(ctx context.Context, cwd, prelude string, lazy bool) (k *pyKernel, failure string, died bool, err error) {
	spec := sessionKernel(cwd)
	spec.warmUp = !lazy && prelude != ""
	k, err = m.s.startKernel(ctx, spec)
	if err != nil {
		var se *kernelStartError
		switch {
		case errors.As(err, &se):
			return nil, "The Python kernel could not start: " + se.msg + ".", se.died, nil
		case ctx.Err() != nil:
			return nil, "", false, ctx.Err()
		}
		return nil, "", false, err
	}
	pctx, cancel := context.WithTimeoutCause(ctx, preludeTimeout, errTimedOut)
	defer cancel()
	cells := []string{prelude}
	if items, rest := splitPrelude(prelude); len(items) > 0 {
		if !lazy {
			items = warmUpItems(items)
		}
		cells = []string{lazyPreludeCell(items), rest}
	}
	for _, code := range cells {
		if code == "" {
			continue
		}
		failure, stopped, died, err := m.runPrelude(ctx, pctx, k, code)
		if stopped {
			k = nil
		}
		if failure != "" || err != nil {
			return k, failure, died, err
		}
	}
	return k, "", false, nil
}

// runPrelude runs one cell of a prelude in k (pctx bounds it, ctx is the
// call's). stopped: k did not survive it (it was stopped); failure or err
// say why the prelude failed.
func (m *pythonManager) runPrelude(ctx, pctx context.Context, k *pyKernel, code string) (failure string, stopped, died bool, err error) {
	run := k.runCell(pctx, code, defaultMaxOutput, nil)
	switch {
	case ctx.Err() != nil:
		k.stop(killStop)
		return "", true, false, ctx.Err()
	case run.interrupted:
		k.stop(killStop)
		return fmt.Sprintf("The prelude did not finish within %d seconds.", int(preludeTimeout.Seconds())), true, false, nil
	case run.err != nil:
		msg, crashed := m.describeLoss(k, run.err)
		k.stop(killStop)
		return "The prelude failed: " + msg, true, crashed, nil
	case run.res.Failed():
		// The kernel stays: the prelude only prepares it, and the cells may
		// not need what failed.
		return "The prelude failed: " + failureText(&run.res) + ".", false, false, nil
	}
	return "", false, false, nil
}

// outcome is how a call's cells ended.
type outcome struct {
	escalated bool // the kernel ignored an interrupt and was killed: restart it
	crashed   bool // the kernel died by itself
	lost      bool // the kernel is unusable (crash, protocol, killed)
}

// runCells runs the cells in order until one fails, the call is cancelled
// or times out, or the kernel is lost. Outputs stream as they happen.
func (m *pythonManager) runCells(ctx context.Context, k *pyKernel, id uint32, req protocol.PythonRequest, res *protocol.PythonResult) outcome {
	tctx, cancel := context.WithTimeoutCause(ctx, req.Timeout.D(), errTimedOut)
	defer cancel()
	var out outcome
	for i, cell := range req.Cells {
		send := func(o kernel.Output) {
			for _, b := range encodeOutput(i, o) {
				m.s.send(protocol.KindPythonOutput, id, b)
			}
		}
		// The truncation marker is sent when the cell ends, with the final
		// count of what was dropped (the host sees only the stream).
		var marker *kernel.Output
		emit := func(o kernel.Output) {
			if o.Type == kernel.OutTruncated {
				if marker == nil {
					marker = &o
				}
				return
			}
			send(o)
		}
		run := k.runCell(tctx, cell.Code, req.MaxOutput, emit)
		if marker != nil {
			for _, o := range run.res.Outputs {
				if o.Type == kernel.OutTruncated {
					marker = &o
				}
			}
			send(*marker)
		}
		cr := &res.Cells[i]
		cr.ExecutionCount = run.res.ExecutionCount
		cr.InputRequested = run.res.InputRequested
		cr.Truncated = run.res.Truncated
		name := cellName(i, cell.Title)
		switch {
		case run.interrupted:
			cr.Status = protocol.CellCancelled
			if run.err == nil && run.res.Completed && !run.res.Failed() {
				cr.Status = protocol.CellOK // it finished as the time ran out
			}
			cancelResult(tctx, res, req, "while "+lower(name)+" was running")
			switch r := k.killedBy(); {
			case r == killUnresponsive:
				out.escalated, out.lost = true, true
			case r != "":
				out.lost = true
			case run.err != nil || k.dead():
				_, out.crashed = m.describeLoss(k, run.err)
				out.lost = true
			}
		case run.err != nil:
			msg, crashed := m.describeLoss(k, run.err)
			out.crashed, out.lost = crashed, true
			if k.killedBy() == killRestart {
				cr.Status = protocol.CellCancelled
				res.Status, res.Cancelled = "cancelled", true
				res.Message = "The Python kernel was restarted while " + lower(name) + " was running; its state is lost."
			} else {
				cr.Status = protocol.CellError
				res.FailedCell = i
				failResult(res, name+" did not finish: "+msg)
			}
		case run.res.Failed():
			cr.Status = protocol.CellError
			res.FailedCell = i
			failResult(res, name+" failed: "+failureText(&run.res))
		default:
			cr.Status = protocol.CellOK
			continue
		}
		return out // the remaining cells stay skipped
	}
	return out
}

func lower(name string) string { return "c" + name[1:] } // "Cell 2" -> "cell 2"

// runPerCall runs the cells in a kernel of their own, discarded after.
func (m *pythonManager) runPerCall(ctx context.Context, id uint32, req protocol.PythonRequest) (protocol.PythonResult, error) {
	res := newResult(req)
	cwd, err := m.s.resolveCwd(req.Cwd)
	if err != nil {
		return res, err
	}
	select {
	case m.perCall <- struct{}{}:
		defer func() { <-m.perCall }()
	case <-ctx.Done():
		cancelResult(ctx, &res, req, "before it started")
		return res, nil
	}
	k, failure, _, err := m.newKernel(ctx, cwd, req.Prelude, len(req.Cells) > 0)
	if err != nil {
		if ctx.Err() != nil {
			cancelResult(ctx, &res, req, "while the Python kernel was starting")
			return res, nil
		}
		return res, err
	}
	if k == nil {
		failResult(&res, failure)
		return res, nil
	}
	defer k.stop(killStop)
	if failure != "" {
		failResult(&res, failure)
		return res, nil
	}
	m.runCells(ctx, k, id, req, &res)
	return res, nil
}
