package computer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Background processes: started by one call, held by the computer (its
// agent) until they exit and are forgotten, or the computer ends. The
// computer keeps each one's newest output (sandbox.Background).

// ProcessRequest starts a background process: an ExecRequest whose
// Timeout 0 means none (it runs until it exits or the computer ends),
// whose Stdin (at most sandbox.MaxStdinWrite bytes) is written first to
// a stdin that stays open unless CloseStdin.
type ProcessRequest struct {
	ExecRequest
	CloseStdin bool
}

// killWait is how long a kill (and signalWait a signal) waits for the
// process to exit before answering.
const (
	killWait   = 5 * time.Second
	signalWait = 2 * time.Second
)

// Validate checks a background process's request.
func (r ProcessRequest) Validate() error {
	if len(r.Stdin) > sandbox.MaxStdinWrite {
		return &FieldError{Field: "stdin", Err: fmt.Errorf("%w: stdin of a background process is limited to %d bytes at its start; write more with its stdin endpoint",
			ErrTooLarge, sandbox.MaxStdinWrite)}
	}
	return r.ExecRequest.Validate()
}

// processError maps the errors of background processes to the service's
// kinds; the rest as any call's.
func (m *Manager) processError(ctx context.Context, id string, err error) error {
	switch {
	case isAny(err, sandbox.ErrNoProcess):
		return errdefs.Wrap(errdefs.NotFound, "", err) // "no such process: proc_9"
	case isAny(err, sandbox.ErrTooManyProcesses):
		return errdefs.Wrap(errdefs.ResourceExhausted, "too_many_processes", err)
	case isAny(err, sandbox.ErrStdinClosed):
		return errdefs.Wrap(errdefs.Conflict, "stdin_closed", err)
	case isAny(err, sandbox.ErrTooLarge):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return m.callError(ctx, id, err)
}

// StartProcess starts a background process in a computer of p's
// organisation and answers once it runs.
func (m *Manager) StartProcess(ctx context.Context, p governance.Principal, id string, req ProcessRequest) (sandbox.ProcessInfo, error) {
	if err := req.Validate(); err != nil {
		return sandbox.ProcessInfo{}, err
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.ProcessInfo{}, err
	}
	defer m.busy(l)()
	start := sandbox.ProcessStart{Argv: req.Argv, Command: req.Command, Cwd: req.Cwd,
		Timeout: time.Duration(seconds(req.Timeout)) * time.Second, Stdin: []byte(req.Stdin), CloseStdin: req.CloseStdin}
	names := make([]string, 0, len(req.Env))
	for k := range req.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		start.Env = append(start.Env, k+"="+req.Env[k])
	}
	info, err := l.sb.StartProcess(ctx, start)
	if err != nil {
		return sandbox.ProcessInfo{}, m.processError(ctx, id, err)
	}
	m.gov.Record(ctx, p, "computer.process_started", id, map[string]any{"process_id": info.ID})
	return info, nil
}

// ListProcesses lists a computer's background processes, oldest first.
func (m *Manager) ListProcesses(ctx context.Context, p governance.Principal, id string) ([]sandbox.ProcessInfo, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return nil, err
	}
	defer m.busy(l)()
	list, err := l.sb.ListProcesses(ctx)
	if err != nil {
		return nil, m.processError(ctx, id, err)
	}
	return list, nil
}

// GetProcess describes one background process.
func (m *Manager) GetProcess(ctx context.Context, p governance.Principal, id, pid string) (sandbox.ProcessInfo, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.ProcessInfo{}, err
	}
	defer m.busy(l)()
	info, err := l.sb.GetProcess(ctx, pid)
	if err != nil {
		return sandbox.ProcessInfo{}, m.processError(ctx, id, err)
	}
	return info, nil
}

// ProcessOutput reads a background process's output from req.Offset
// (stream gets it as it comes, mark where it starts and what was lost
// before); with req.Follow until the process exited or ctx ends (then
// ctx's error). A follow counts as a call for as long as it runs.
func (m *Manager) ProcessOutput(ctx context.Context, p governance.Principal, id string, req sandbox.OutputRequest, stream Stream, mark func(offset, dropped int64)) (sandbox.OutputEnd, error) {
	if req.Offset < 0 {
		return sandbox.OutputEnd{}, fieldError("offset", "must not be negative")
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.OutputEnd{}, err
	}
	defer m.busy(l)()
	out := sandbox.OutputIO{Mark: mark}
	if stream != nil {
		out.Stdout, out.Stderr = streamFunc{"stdout", stream}, streamFunc{"stderr", stream}
	}
	end, err := l.sb.ProcessOutput(ctx, req, out)
	if err != nil {
		if isAny(err, sandbox.ErrInvalid) && strings.Contains(err.Error(), "offset") {
			return sandbox.OutputEnd{}, &FieldError{Field: "offset", Err: fmt.Errorf("%w: %w", ErrInvalid, err)}
		}
		return end, m.processError(ctx, id, err)
	}
	return end, nil
}

// streamFunc is a Stream as an io.Writer.
type streamFunc struct {
	kind   string
	stream Stream
}

func (w streamFunc) Write(b []byte) (int, error) { w.stream(w.kind, b); return len(b), nil }

// WriteStdin writes to a background process's stdin (and closes it with
// req.Close).
func (m *Manager) WriteStdin(ctx context.Context, p governance.Principal, id string, req sandbox.StdinWrite) (sandbox.StdinResult, error) {
	if len(req.Data) > sandbox.MaxStdinWrite {
		return sandbox.StdinResult{}, &FieldError{Field: "data", Err: fmt.Errorf("%w: one stdin write is limited to %d bytes", ErrTooLarge, sandbox.MaxStdinWrite)}
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.StdinResult{}, err
	}
	defer m.busy(l)()
	res, err := l.sb.WriteStdin(ctx, req)
	if err != nil {
		return res, m.processError(ctx, id, err)
	}
	return res, nil
}

// SignalProcess sends the signal named signal (one of sandbox.Signals) to
// a background process and answers it as it is after up to 2 s (5 s for
// SIGKILL) waiting for it to exit.
func (m *Manager) SignalProcess(ctx context.Context, p governance.Principal, id, pid, signal string) (sandbox.ProcessInfo, error) {
	sig, ok := sandbox.Signals[signal]
	if !ok {
		names := make([]string, 0, len(sandbox.Signals))
		for n := range sandbox.Signals {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { return sandbox.Signals[a] - sandbox.Signals[b] })
		return sandbox.ProcessInfo{}, fieldError("signal", "%q is not a signal that can be sent; one of %s", signal, strings.Join(names, ", "))
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return sandbox.ProcessInfo{}, err
	}
	defer m.busy(l)()
	wait := signalWait
	if sig == sandbox.SIGKILL {
		wait = killWait
	}
	info, err := l.sb.SignalProcess(ctx, pid, sig, wait)
	if err != nil {
		return sandbox.ProcessInfo{}, m.processError(ctx, id, err)
	}
	return info, nil
}
