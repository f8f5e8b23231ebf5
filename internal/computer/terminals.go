package computer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// TerminalRequest starts a process on a terminal: an ExecRequest (its
// Stdin and Timeout unused: a terminal's input is typed, and it runs until
// it exits, is hung up or the computer ends) of Cols×Rows characters.
type TerminalRequest struct {
	ExecRequest
	Cols, Rows int
}

// Validate checks a terminal's request.
func (r TerminalRequest) Validate() error {
	if r.Cols < 1 || r.Rows < 1 || r.Cols > sandbox.MaxTerminalSize || r.Rows > sandbox.MaxTerminalSize {
		return &FieldError{Field: "cols", Err: fmt.Errorf("%w: a terminal has 1 to %d columns and rows, not %dx%d",
			ErrInvalid, sandbox.MaxTerminalSize, r.Cols, r.Rows)}
	}
	if r.Stdin != "" {
		return fieldError("stdin", "a terminal's input is sent on it, not with its start")
	}
	return r.ExecRequest.Validate()
}

// OpenTerminal starts a process on a new terminal of a running computer
// of p's organisation, as a session (termsessions.go) with no client yet:
// its output waits in the scrollback for the first Attach. The terminal
// counts as a call until it ended (the computer is not idle while a
// terminal is open).
func (m *Manager) OpenTerminal(ctx context.Context, p governance.Principal, id string, req TerminalRequest) (*TerminalSession, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return nil, err
	}
	release := m.busy(l)
	wire := sandbox.TerminalRequest{ExecRequest: sandbox.ExecRequest{Argv: req.Argv, Command: req.Command, Cwd: req.Cwd},
		Cols: req.Cols, Rows: req.Rows}
	names := make([]string, 0, len(req.Env))
	for k := range req.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		wire.Env = append(wire.Env, k+"="+req.Env[k])
	}
	start := time.Now()
	s := m.newTerminalSession(id, req)
	t, err := l.sb.OpenTerminal(context.WithoutCancel(ctx), wire, s)
	if err != nil {
		release()
		return nil, m.processError(ctx, id, err)
	}
	s.t = t
	m.terms.add(s)
	m.gov.Record(ctx, p, "computer.terminal_opened", id, map[string]any{"pid": t.Pid(), "terminal": s.id})
	rec := context.WithoutCancel(ctx)
	go func() {
		st, err := t.Wait()
		s.end(st, err)
		release()
		fields := map[string]any{"duration_ms": time.Since(start).Milliseconds(), "exit_code": st.ExitCode, "terminal": s.id}
		if err != nil {
			fields["exit_code"] = -1
		}
		m.gov.Record(rec, p, "computer.terminal_closed", id, fields)
	}()
	return s, nil
}
