package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// cubicleResume measures a pause and resume cycle of one computer (with a
// file in its workspace): Pause, then Resume until ready and until
// /bin/echo's first byte, side by side with the cold start's Create and
// first byte (a resume should cost no more). Nil when the driver cannot
// pause.
func cubicleResume(cfg Config) *path {
	resumer, ok := cfg.Driver.(sandbox.Resumer)
	if !ok {
		return nil
	}
	r := &running{cfg: cfg}
	return &path{
		name: "cubicle pause and resume", required: true,
		rows: []rowDef{
			{RowPause, "cubicle  Pause()"},
			{RowResume, "cubicle  Resume() → ready"},
			{RowResumeFirstByte, "cubicle  resume → first byte"},
		},
		setup: func(ctx context.Context) error {
			if err := r.setup(ctx); err != nil {
				return err
			}
			st, err := r.sb.Exec(ctx, sandbox.ExecRequest{Command: "head -c 1048576 /dev/urandom > /workspace/kept"}, sandbox.ExecIO{})
			return checkOutput(st, err, nil, "")
		},
		close: r.close,
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			start := time.Now()
			if err := r.sb.(sandbox.Pauser).Pause(ctx); err != nil {
				return nil, fmt.Errorf("pause: %w", err)
			}
			paused := time.Since(start)
			id := r.sb.ID()
			start = time.Now()
			next, err := resumer.Resume(ctx, id, cfg.Spec)
			if err != nil {
				r.sb = nil // nothing runs; what is kept is the driver's
				return nil, fmt.Errorf("resume: %w", err)
			}
			r.sb = next
			ready := time.Now()
			var out FirstByte
			st, err := execBounded(ctx, r.sb, cfg.Timeout, echoArgv, &out)
			if err := checkOutput(st, err, &out, echoOutput); err != nil {
				return nil, err
			}
			first, _ := out.Time()
			return map[string]time.Duration{RowPause: paused, RowResume: ready.Sub(start), RowResumeFirstByte: first.Sub(start)}, nil
		},
	}
}
