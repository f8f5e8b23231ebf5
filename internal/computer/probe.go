package computer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Probe proves that isolation and limits hold on this host before the
// server declares itself ready: it starts a small computer, checks the
// process's identity and privileges, and overflows the memory limit to see
// the OOM killer act inside the computer while the agent survives.
func (m *Manager) Probe(ctx context.Context) error {
	spec := m.spec(32<<20, 30*time.Second)
	spec.DiskBytes = 16 << 20
	sb, err := m.driver.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("isolation probe: start a computer: %w", err)
	}
	defer sb.Destroy(context.WithoutCancel(ctx))
	var out bytes.Buffer
	st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "grep -E '^(Uid|CapEff|NoNewPrivs|Seccomp):' /proc/self/status"},
		sandbox.ExecIO{Stdout: &out})
	if err != nil || st.ExitCode != 0 {
		return fmt.Errorf("isolation probe: run a process: %v (exit %d)", err, st.ExitCode)
	}
	for _, want := range []string{"Uid:\t1000\t1000\t1000\t1000", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out.String(), want) {
			return fmt.Errorf("isolation probe: process status lacks %q:\n%s", want, out.String())
		}
	}
	st, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "head -c 96M /dev/zero | tail -n 1 >/dev/null"}, sandbox.ExecIO{})
	if err != nil || !st.OOMKilled {
		return fmt.Errorf("isolation probe: the memory limit did not apply (err %v, status %+v)", err, st)
	}
	if st, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/true"}}, sandbox.ExecIO{}); err != nil || st.ExitCode != 0 {
		return fmt.Errorf("isolation probe: the computer did not survive an OOM: %v", err)
	}
	return nil
}
