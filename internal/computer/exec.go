package computer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// ExecRequest is a process to run: a shell command or an argv.
type ExecRequest struct {
	Command string
	Argv    []string
	Cwd     string
	Env     map[string]string
	Stdin   string
	// Timeout counts in whole seconds (a fraction is dropped); 0 or more
	// than the computer's limit: the limit.
	Timeout time.Duration
}

// ExecResult is how a process ended and what it wrote (each stream
// bounded by the deployment's MaxOutputBytes).
type ExecResult struct {
	ExitCode        int
	Signal          int
	Stdout          string
	Stderr          string
	TimedOut        bool
	OOMKilled       bool
	Duration        time.Duration
	StdoutTruncated bool
	StderrTruncated bool
}

// Stream receives output as it happens ("stdout" or "stderr"); it is called
// from one goroutine at a time.
type Stream func(kind string, data []byte)

// Validate checks an exec request.
func (r ExecRequest) Validate() error {
	if (r.Command == "") == (len(r.Argv) == 0) {
		return fmt.Errorf("%w: give exactly one of command and argv", ErrInvalid)
	}
	if seconds(r.Timeout) < 0 {
		return fmt.Errorf("%w: timeout_seconds must not be negative", ErrInvalid)
	}
	if len(r.Stdin) > 8<<20 {
		return fmt.Errorf("%w: stdin is limited to 8 MiB", ErrTooLarge)
	}
	for k := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: env name %q", ErrInvalid, k)
		}
	}
	return nil
}

// capture keeps the first max bytes of a stream.
type capture struct {
	buf       []byte
	max       int64
	truncated bool
}

func (c *capture) Write(p []byte) (int, error) {
	room := c.max - int64(len(c.buf))
	if int64(len(p)) > room {
		c.truncated = true
		p = p[:max(room, 0)]
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

type streamWriter struct {
	kind   string
	cap    *capture
	stream Stream
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.cap.Write(p)
	if w.stream != nil {
		w.stream(w.kind, p)
	}
	return len(p), nil
}

// Exec runs a process in a computer of p's organisation. Cancelling ctx
// (a client that went away) kills the process tree; Exec returns only after
// it was reaped.
func (m *Manager) Exec(ctx context.Context, p governance.Principal, id string, req ExecRequest, stream Stream) (ExecResult, error) {
	if err := req.Validate(); err != nil {
		return ExecResult{}, err
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return ExecResult{}, err
	}
	defer m.busy(l)()
	timeout := tools.CapSeconds(l.execLimit, seconds(req.Timeout))
	wire := sandbox.ExecRequest{Argv: req.Argv, Command: req.Command, Cwd: req.Cwd, Timeout: timeout}
	for k, v := range req.Env {
		wire.Env = append(wire.Env, k+"="+v)
	}
	out := &capture{max: m.cfg.MaxOutputBytes}
	errb := &capture{max: m.cfg.MaxOutputBytes}
	sio := sandbox.ExecIO{Stdout: streamWriter{"stdout", out, stream}, Stderr: streamWriter{"stderr", errb, stream}}
	if req.Stdin != "" {
		sio.Stdin = strings.NewReader(req.Stdin)
	}
	start := time.Now()
	st, err := l.sb.Exec(ctx, wire, sio)
	elapsed := time.Since(start)
	m.metrics.exec.observe(elapsed)
	if err != nil {
		m.gov.Record(ctx, p, "computer.executed", id, map[string]any{"kind": "exec",
			"duration_ms": elapsed.Milliseconds(), "exit_code": -1, "cancelled": true})
		return ExecResult{}, m.callError(ctx, id, err)
	}
	res := ExecResult{ExitCode: st.ExitCode, Signal: st.Signal, Stdout: string(out.buf), Stderr: string(errb.buf),
		TimedOut: st.TimedOut, OOMKilled: st.OOMKilled, Duration: elapsed,
		StdoutTruncated: out.truncated, StderrTruncated: errb.truncated}
	if st.TimedOut {
		line := sandbox.ExecTimedOut(seconds(timeout)) + "\n"
		if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
			line = "\n" + line
		}
		res.Stderr += line
		if stream != nil {
			stream("stderr", []byte(line))
		}
	}
	m.gov.Record(ctx, p, "computer.executed", id, map[string]any{"kind": "exec",
		"duration_ms": elapsed.Milliseconds(), "exit_code": res.ExitCode})
	return res, nil
}

// callError is execError, except that a computer deleted or expired while
// the call ran is "gone" (409), not "unreachable" (503).
// A computer whose agent died during the call is failed on the spot (409
// with the reason).
func (m *Manager) callError(ctx context.Context, id string, err error) error {
	if !isAny(err, sandbox.ErrGone) {
		return execError(err)
	}
	l := m.lookup(id)
	if l == nil {
		return fmt.Errorf("%w: %s ended while the call ran", ErrGone, id)
	}
	m.mu.Lock()
	gone := l.gone()
	m.mu.Unlock()
	if !gone {
		m.awaitDeath(ctx, l)
	}
	m.mu.Lock()
	gone, failure := l.gone(), l.failure
	m.mu.Unlock()
	switch {
	case failure != "":
		return goneError(id, failure)
	case gone:
		return deletedError(id)
	}
	return execError(err)
}

// execError maps sandbox errors to the service's kinds.
func execError(err error) error {
	switch {
	case isAny(err, sandbox.ErrNotFound, sandbox.ErrInvalid, sandbox.ErrPermission, sandbox.ErrNotDir):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	case isAny(err, sandbox.ErrProcLimit):
		return fmt.Errorf("%w: %v", ErrCapacity, err)
	case isAny(err, sandbox.ErrGone):
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}
