package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

var (
	echoArgv = []string{"/bin/echo", "x"}
	trueArgv = []string{"/bin/true"}
)

// echoOutput is what echoArgv prints.
const echoOutput = "x\n"

// cubicleCold measures a computer's whole life: Create until /bin/echo's
// first byte of output (the headline number), Create alone, Kill (what a
// DELETE waits for) and the whole teardown (Kill then Destroy).
func cubicleCold(cfg Config) *path {
	return coldPath(cfg, cfg.Spec, "cubicle cold start", []rowDef{
		{RowColdStart, "cubicle  cold start → first byte"},
		{RowCreate, "cubicle  Create() → ready"},
		{RowKill, "cubicle  Kill() → no code runs"},
		{RowDestroy, "cubicle  Kill() + Destroy()"},
	})
}

// cubicleTemplateCold is cubicleCold for a computer made from the
// template cfg.Template, nil without one.
func cubicleTemplateCold(cfg Config) *path {
	if cfg.Template.Image == "" {
		return nil
	}
	spec := cfg.Spec
	spec.Root = cfg.Template
	return coldPath(cfg, spec, "cubicle cold start on template "+cfg.Template.Template, []rowDef{
		{RowTemplateColdStart, "cubicle  template cold start → first byte"},
		{RowTemplateCreate, "cubicle  template Create() → ready"},
		{RowTemplateKill, "cubicle  template Kill() → no code runs"},
		{RowTemplateDestroy, "cubicle  template Kill() + Destroy()"},
	})
}

// coldPath measures computers of spec from Create to their end; rows
// are the cold start, Create, Kill and Kill + Destroy rows, in that order.
func coldPath(cfg Config, spec sandbox.Spec, name string, rows []rowDef) *path {
	p := &path{name: name, required: true, rows: rows}
	p.sample = func(ctx context.Context) (map[string]time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		start := time.Now()
		sb, err := cfg.Driver.Create(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		ready := time.Now()
		destroyed := false
		defer func() {
			if !destroyed {
				destroy(sb, cfg.Timeout)
			}
		}()
		var out FirstByte
		st, err := execBounded(ctx, sb, cfg.Timeout, echoArgv, &out)
		if err := checkOutput(st, err, &out, echoOutput); err != nil {
			return nil, err
		}
		first, _ := out.Time()
		destroyStart := time.Now()
		if err := kill(sb, cfg.Timeout); err != nil {
			return nil, err
		}
		killed := time.Since(destroyStart)
		err = destroy(sb, cfg.Timeout)
		destroyed = true
		if err != nil {
			return nil, err
		}
		return map[string]time.Duration{
			rows[0].id: first.Sub(start),
			rows[1].id: ready.Sub(start),
			rows[2].id: killed,
			rows[3].id: time.Since(destroyStart),
		}, nil
	}
	return p
}

// running is one long-lived computer that execs go into.
type running struct {
	cfg Config
	sb  sandbox.Sandbox
}

func (r *running) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	var err error
	r.sb, err = r.cfg.Driver.Create(ctx, r.cfg.Spec)
	return err
}

func (r *running) close(ctx context.Context) error {
	if r.sb == nil {
		return nil
	}
	return r.sb.Destroy(ctx)
}

// execTrue times a /bin/true round trip: from the Exec call to its return.
func (r *running) execTrue(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	st, err := execBounded(ctx, r.sb, r.cfg.Timeout, trueArgv, nil)
	d := time.Since(start)
	if err := checkOutput(st, err, nil, ""); err != nil {
		return 0, fmt.Errorf("/bin/true: %w", err)
	}
	return d, nil
}

// execEcho times /bin/echo from the Exec call to its first byte of output.
func (r *running) execEcho(ctx context.Context) (time.Duration, error) {
	var out FirstByte
	start := time.Now()
	st, err := execBounded(ctx, r.sb, r.cfg.Timeout, echoArgv, &out)
	if err := checkOutput(st, err, &out, echoOutput); err != nil {
		return 0, fmt.Errorf("/bin/echo: %w", err)
	}
	first, _ := out.Time()
	return first.Sub(start), nil
}

// cubicleExec measures processes started through the agent of one running
// computer: a /bin/true round trip and /bin/echo's first byte.
func cubicleExec(cfg Config) *path {
	r := &running{cfg: cfg}
	return &path{
		name: "cubicle exec", required: true,
		rows: []rowDef{
			{RowExecTrue, "cubicle  exec /bin/true round trip"},
			{RowExecEcho, "cubicle  exec /bin/echo → first byte"},
		},
		setup: r.setup,
		close: r.close,
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			rt, err := r.execTrue(ctx)
			if err != nil {
				return nil, err
			}
			fb, err := r.execEcho(ctx)
			if err != nil {
				return nil, err
			}
			return map[string]time.Duration{RowExecTrue: rt, RowExecEcho: fb}, nil
		},
	}
}

// idleGap is how long a computer sits idle before the idle exec. It is
// longer than an RCU grace period (a few jiffies), so the exec pays what
// the first cgroup migration after a quiet spell costs on this host.
const idleGap = 100 * time.Millisecond

// cubicleExecIdle measures a /bin/true round trip into a running computer
// that has been idle for idleGap, with nothing else of the bench running:
// what an agent's request after a pause sees, rather than back-to-back
// execs.
func cubicleExecIdle(cfg Config) *path {
	r := &running{cfg: cfg}
	return &path{
		name: "cubicle exec after idle", required: true,
		rows:  []rowDef{{RowExecIdle, fmt.Sprintf("cubicle  exec /bin/true after %v idle", idleGap)}},
		setup: r.setup,
		close: r.close,
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			if err := sleepCtx(ctx, idleGap); err != nil {
				return nil, err
			}
			d, err := r.execTrue(ctx)
			return map[string]time.Duration{RowExecIdle: d}, err
		},
	}
}

// execBounded runs argv in sb with stdout to out. Exec returns only after
// the agent reaped the process; should the agent not honour the cancel,
// the computer is destroyed, which ends Exec with ErrGone.
func execBounded(ctx context.Context, sb interface {
	sandbox.Processes
	sandbox.Lifecycle
}, timeout time.Duration, argv []string, out *FirstByte) (sandbox.ExitStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sio := sandbox.ExecIO{}
	if out != nil {
		sio.Stdout = out
	}
	type result struct {
		st  sandbox.ExitStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: argv}, sio)
		done <- result{st, err}
	}()
	select {
	case r := <-done:
		return r.st, r.err
	case <-time.After(timeout + 5*time.Second):
	}
	destroy(sb, timeout)
	r := <-done
	if r.err == nil {
		r.err = errors.New("exec did not return")
	}
	return r.st, fmt.Errorf("%w; the computer was destroyed", r.err)
}

// destroy removes a computer within a bounded time, also when the run was
// cancelled.
func kill(sb sandbox.Lifecycle, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+cleanupTimeout)
	defer cancel()
	if err := sb.Kill(ctx); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}

func destroy(sb sandbox.Lifecycle, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+cleanupTimeout)
	defer cancel()
	if err := sb.Destroy(ctx); err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	return nil
}

// checkOutput turns a failed or unexpected run into an error.
func checkOutput(st sandbox.ExitStatus, err error, out *FirstByte, want string) error {
	switch {
	case err != nil:
		return err
	case st.TimedOut:
		return errors.New("timed out")
	case st.Signal != 0:
		return fmt.Errorf("killed by signal %d", st.Signal)
	case st.ExitCode != 0:
		return fmt.Errorf("exit code %d", st.ExitCode)
	case out == nil:
		return nil
	}
	if _, ok := out.Time(); !ok || out.String() != want {
		return fmt.Errorf("output %q, want %q", out.String(), want)
	}
	return nil
}
