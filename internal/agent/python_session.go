package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

// The session kernel: one per computer, held in turns (python_turnstile.go),
// started, replaced and evicted here.
//
// Crashes: a session kernel that dies without the agent killing it (a
// segfault, os.kill(os.getpid(), 9), the OOM killer) is restarted by the next
// call, once; the second crash fails the session for good, until a restart
// control. Kernels the agent kills (timeout escalation, protocol violation,
// reset, restart, idle eviction) are not crashes.

// describeLoss explains why a kernel's session ended under a cell (err is
// Run's error, possibly nil) and whether it was a crash (a death the agent
// did not cause).
func (m *pythonManager) describeLoss(k *pyKernel, err error) (msg string, crashed bool) {
	if errors.Is(err, kernel.ErrProtocol) {
		k.kill(killProtocol)
		return fmt.Sprintf("the Python kernel broke the wire protocol (%v), so it was stopped and its state is lost.", err), false
	}
	if !k.waitExit(time.Second) {
		// The connection ended but the process lives: it closed its own
		// sockets, or stopped answering. Its session is unusable.
		k.kill(killProtocol)
		return fmt.Sprintf("the Python kernel's connection failed (%v), so it was stopped and its state is lost.", err), false
	}
	if r := k.killedBy(); r != "" {
		return "the Python kernel " + lossPhrase(r) + "; its state is lost.", false
	}
	return "the Python kernel died (" + k.death() + ") and its state is lost.", true
}

// lossPhrase says what happened to a kernel the agent killed for reason.
func lossPhrase(reason string) string {
	switch reason {
	case killUnresponsive:
		return "did not yield to an interrupt and was killed"
	case killRestart:
		return "was restarted on request"
	case killProtocol:
		return "broke the wire protocol and was stopped"
	}
	return "was stopped"
}

// replacedNote is the note of the next call after its session kernel was
// stopped for reason (killRestart, killProtocol...) and replaced.
func replacedNote(reason string) string {
	return "The Python kernel was replaced: it " + lossPhrase(reason) + "; earlier state is lost."
}

// runSession runs the cells in the session kernel, starting or restarting
// it as needed.
func (m *pythonManager) runSession(ctx context.Context, id uint32, req protocol.PythonRequest, tk *ticket) (res protocol.PythonResult, err error) {
	res = newResult(req)
	if err := m.turn.wait(ctx, tk); err != nil {
		cancelResult(ctx, &res, req, "before it started")
		return res, nil
	}
	defer m.release(len(req.Cells) > 0) // a warm-up (no cells) does not start the idle clock
	defer func() {
		if r := recover(); r != nil { // keep the session consistent, then let serve report it
			if k := m.current(); k != nil {
				m.drop(k, killStop, "The Python kernel was stopped after an internal error of the agent; earlier state is lost.")
			}
			panic(r)
		}
	}()

	k, note, done, err := m.prepareKernel(ctx, req, &res)
	if done || err != nil {
		return res, err
	}
	out := m.runCells(ctx, k, id, req, &res)
	m.afterCells(ctx, k, out, &res)
	if note != "" && res.Status != "ok" {
		res.Message = withNote(res.Message, note)
	} else if note != "" {
		res.Message = note
	}
	return res, nil
}

// prepareKernel returns the session kernel for req, in the call's cwd: the
// current one (reset if asked), or a new one, with a note saying why earlier
// state is gone. done means res already holds the call's outcome.
func (m *pythonManager) prepareKernel(ctx context.Context, req protocol.PythonRequest, res *protocol.PythonResult) (k *pyKernel, note string, done bool, err error) {
	if m.failed {
		failResult(res, msgPermanentFailure)
		return nil, "", true, nil
	}
	k = m.current()
	if k != nil && k.dead() { // died between calls
		m.lostKernel(k, k.killedBy() == "", "the Python kernel died ("+k.death()+") between calls")
		k = nil
		if m.failed {
			failResult(res, msgPermanentFailure)
			return nil, "", true, nil
		}
	}
	cwd, err := m.s.resolveCwd(req.Cwd)
	if err != nil {
		return nil, "", false, err
	}
	if req.Prelude != "" {
		m.prelude = req.Prelude
	}
	if k != nil && req.Reset {
		m.drop(k, killStop, "")
		k = nil
		res.KernelRestarted = true
	}
	if k == nil {
		return m.startSessionKernel(ctx, cwd, req, res)
	}
	if req.Cwd != "" {
		if msg := m.chdir(k, cwd); msg != "" {
			failResult(res, msg)
			return nil, "", true, nil
		}
	}
	return k, "", false, nil
}

// startSessionKernel starts the session kernel in cwd with the last
// prelude; a kernel that dies while starting counts as a crash.
func (m *pythonManager) startSessionKernel(ctx context.Context, cwd string, req protocol.PythonRequest, res *protocol.PythonResult) (k *pyKernel, note string, done bool, err error) {
	if m.lost != "" {
		res.KernelRestarted = true
		note = m.lost
	}
	nk, failure, died, err := m.newKernel(ctx, cwd, m.prelude, len(req.Cells) > 0) // a warm-up imports all now
	if err != nil {
		if ctx.Err() != nil {
			cancelResult(ctx, res, req, "while the Python kernel was starting")
			return nil, note, true, nil
		}
		return nil, note, false, err
	}
	m.cwd = cwd
	if nk != nil {
		m.setKernel(nk)
		m.lost = ""
	} else if died {
		m.crashes++
		if m.crashes >= 2 {
			m.failed = true
			failure += " " + msgPermanentFailure
		}
	}
	if failure != "" {
		failResult(res, withNote(failure, note))
		return nil, note, true, nil
	}
	return nk, note, false, nil
}

// afterCells applies the crash policy to how the cells ended: a kernel
// that ignored SIGINT is replaced at once, a crash counts toward the
// permanent failure, a kernel lost otherwise is replaced by the next call.
func (m *pythonManager) afterCells(ctx context.Context, k *pyKernel, out outcome, res *protocol.PythonResult) {
	switch {
	case out.escalated:
		// The kernel ignored SIGINT: a new one keeps the session usable.
		m.drop(k, killUnresponsive, "")
		res.KernelRestarted = true
		nk, failure, _, err := m.newKernel(context.WithoutCancel(ctx), m.cwd, m.prelude, true)
		if err == nil && nk != nil {
			m.setKernel(nk)
			if failure != "" {
				m.s.log.Warn("python prelude failed in the restarted kernel", "failure", failure)
			}
		} else {
			m.lost = "The Python kernel was restarted after it ignored an interrupt; earlier state is lost."
			m.s.log.Warn("python kernel restart after an interrupt failed", "failure", failure, "err", err)
		}
	case out.crashed:
		m.lostKernel(k, true, "")
		if m.failed {
			res.Message += " " + msgPermanentFailure
		} else {
			res.Message += " It will be restarted by the next call."
		}
	case out.lost:
		if k.killedBy() == killRestart {
			break // the restart control owns the session now
		}
		m.drop(k, killProtocol, replacedNote(k.killedBy()))
	}
}

func withNote(msg, note string) string {
	if note == "" {
		return msg
	}
	return msg + " (" + note + ")"
}

// chdir moves an existing session kernel to cwd before the cells.
func (m *pythonManager) chdir(k *pyKernel, cwd string) string {
	q, _ := json.Marshal(cwd) // a JSON string is a valid Python string literal
	code := "import os as _cubicle_os\n_cubicle_os.chdir(" + string(q) + ")\ndel _cubicle_os"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := k.runCell(ctx, code, defaultMaxOutput, nil)
	switch {
	case run.err != nil || run.interrupted:
		if run.err == nil {
			k.kill(killUnresponsive)
		}
		msg, crashed := m.describeLoss(k, run.err)
		m.lostKernel(k, crashed, "")
		return "Changing the working directory failed: " + msg
	case run.res.Failed():
		return "Changing the working directory to " + cwd + " failed: " + failureText(&run.res) + "."
	}
	return ""
}

// lostKernel forgets a session kernel that died or broke; a crash counts
// toward the permanent failure.
func (m *pythonManager) lostKernel(k *pyKernel, crashed bool, why string) {
	if !crashed {
		m.drop(k, killProtocol, replacedNote(k.killedBy()))
		return
	}
	m.drop(k, killStop, "The Python kernel had died ("+k.death()+") and was restarted; earlier state is lost.")
	m.crashes++
	if m.crashes >= 2 {
		m.failed = true
	}
	if why != "" {
		m.s.log.Info("python session kernel lost", "why", why)
	}
}

// drop stops the session kernel k and records why its state is gone (lost,
// told to the next call that starts a kernel; "" keeps what was there).
func (m *pythonManager) drop(k *pyKernel, reason, lost string) {
	if m.current() == k {
		m.setKernel(nil)
	}
	k.stop(reason)
	if lost != "" {
		m.lost = lost
	}
}

// release ends a turn; after a call it (re)arms idle eviction.
func (m *pythonManager) release(used bool) {
	if used {
		m.lastUse = time.Now()
		if m.current() != nil {
			if m.idle == nil {
				m.idle = time.AfterFunc(m.idleAfter, m.evict)
			} else {
				m.idle.Reset(m.idleAfter)
			}
		}
	}
	m.turn.release()
}

// evict shuts the session kernel down after idleAfter without calls.
func (m *pythonManager) evict() {
	defer func() {
		if r := recover(); r != nil {
			m.s.log.Error("python idle eviction panicked", "panic", r)
		}
	}()
	tk := m.turn.enqueue()
	m.turn.wait(context.Background(), tk)
	defer m.release(false)
	k := m.current()
	if k == nil || time.Since(m.lastUse) < m.idleAfter {
		return // used meanwhile: the timer was re-armed
	}
	m.drop(k, killStop, fmt.Sprintf("The Python kernel had been idle for %v and was shut down; earlier state is lost.", m.idleAfter))
}

// control interrupts or restarts the session kernel (KindPythonControl).
func (m *pythonManager) control(ctx context.Context, id uint32, req protocol.PythonControl) {
	defer func() {
		if r := recover(); r != nil {
			m.s.log.Error("python control panicked", "panic", r, "stack", string(debug.Stack()))
			m.s.sendError(id, fmt.Errorf("%w: python control: %v", protocol.ErrInternal, r))
		}
	}()
	switch req.Action {
	case "interrupt":
		if k := m.current(); k != nil {
			k.interrupt()
			k.waitCell(interruptGrace)
		}
	case "restart":
		if err := m.restart(ctx); err != nil {
			m.s.sendError(id, err)
			return
		}
	default:
		m.s.sendError(id, fmt.Errorf("%w: python control %q (want \"interrupt\" or \"restart\")", protocol.ErrInvalid, req.Action))
		return
	}
	m.s.sendJSON(protocol.KindOK, id, struct{}{})
}

// restart kills the session kernel at once (a running call ends, cancelled),
// then, ahead of any queued call, starts a new one with the last prelude and
// clears a permanent failure.
func (m *pythonManager) restart(ctx context.Context) error {
	if k := m.current(); k != nil {
		k.kill(killRestart)
	}
	tk := m.turn.enqueueFront()
	m.turn.wait(context.Background(), tk)
	defer m.release(true)
	m.failed, m.crashes, m.lost = false, 0, ""
	if k := m.current(); k != nil {
		m.drop(k, killRestart, "")
	}
	k, failure, _, err := m.newKernel(ctx, m.cwd, m.prelude, true)
	if err != nil {
		return err
	}
	if k == nil {
		return fmt.Errorf("%w: %s", protocol.ErrInternal, failure)
	}
	m.setKernel(k)
	if failure != "" {
		return fmt.Errorf("%w: %s", protocol.ErrInternal, failure)
	}
	return nil
}
