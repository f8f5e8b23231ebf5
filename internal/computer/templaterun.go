package computer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/template"
)

// buildPids bounds the processes of a run step's build computer.
const buildPids = 1024

// TemplateRunner runs template builds' run steps (template.Options.Run)
// in build computers of drv: a computer on the root of the layers so far,
// made writable (sandbox.Root.Build), without network (or, for a step
// whose spec has a network_policy, with net's internet), with the step's
// memory, disk and time; the step runs as root of the computer's user
// namespace. The step's output goes to step.Output as it comes; its
// changes are read once the computer was killed.
func TemplateRunner(drv sandbox.Driver, net *BuildNetwork) template.RunFunc {
	return func(ctx context.Context, step template.RunStep) (template.RunResult, error) {
		timeout := time.Duration(step.Limits.TimeoutSeconds) * time.Second
		spec := sandbox.Spec{
			MemoryBytes: int64(step.Limits.MemoryMB) << 20, DiskBytes: int64(step.Limits.DiskMB) << 20,
			CPUs: sandbox.DefaultCPUs, Pids: buildPids, Timeout: timeout, Network: sandbox.NetworkNone, Env: step.Env,
			Root: sandbox.Root{Template: fmt.Sprintf("build step %d", step.N), Image: step.Image, Build: true},
		}
		if step.Network != nil {
			if net == nil {
				return template.RunResult{}, fmt.Errorf("%w: network_policy: this build has no internet for its run steps", template.ErrInvalid)
			}
			spec.Network, spec.Internet, spec.Owner = sandbox.NetworkInternet, net.Policy, net.Owner
		}
		sb, err := drv.Create(ctx, spec)
		if err != nil {
			return template.RunResult{}, fmt.Errorf("start the build computer: %w", stepError(err))
		}
		release := func() { sb.Destroy(context.WithoutCancel(ctx)) }
		res := template.RunResult{Release: release}
		rc, ok := sb.(sandbox.RootChanges)
		if !ok {
			return res, fmt.Errorf("this driver cannot run build steps")
		}
		out := stepOutput(step.Output)
		cwd := step.WorkingDir
		if cwd == "" {
			cwd = "/"
		}
		env := []string{"HOME=/root", "USER=root", "LOGNAME=root"}
		// One stream, in the order the step wrote it: stderr joins stdout
		// at the file descriptor (two pipes read apart interleave by
		// chance), as a build log shows them.
		st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "exec 2>&1\n" + step.Command, Cwd: cwd, Env: env, Timeout: timeout},
			sandbox.ExecIO{Stdout: out, Stderr: out})
		if err != nil {
			return res, stepError(err)
		}
		res.ExitCode, res.Signal, res.TimedOut, res.OOMKilled = st.ExitCode, st.Signal, st.TimedOut, st.OOMKilled
		if st.ExitCode != 0 || st.TimedOut || st.OOMKilled {
			return res, nil
		}
		// Processes the step left behind end here: nothing changes the
		// root while it is read.
		if err := sb.Kill(ctx); err != nil {
			return res, err
		}
		res.Changes, res.UserUID, err = rc.RootChanges(ctx)
		return res, err
	}
}

// BuildNetwork is the internet of a build's run steps when its spec has a
// network_policy: Policy as checked for a computer of Owner's (the
// deployment's, organisation's and key's allowlists; no domain secrets),
// whose egress records the steps' connections.
type BuildNetwork struct {
	Policy sandbox.InternetPolicy
	Owner  sandbox.Owner
}

// buildNetwork checks a spec's network_policy as a computer's of p
// (nil: none asked).
func (m *Manager) buildNetwork(p governance.Principal, n *template.Allowlist) (*BuildNetwork, error) {
	if n == nil {
		return nil, nil
	}
	_, pol, err := m.internet(p, &NetworkPolicy{Type: n.Type, AllowedDomains: n.AllowedDomains, AllowedCIDRs: n.AllowedCIDRs})
	if err != nil {
		return nil, err
	}
	if r := p.ComputerInternet(); r != nil {
		return nil, fmt.Errorf("%w: network_policy: the %s's policy withholds internet computers (%s): its run steps would have no network", ErrForbidden, r.Level, r.Reason)
	}
	return &BuildNetwork{Policy: pol, Owner: sandbox.Owner{Org: p.Org.ID, Key: p.Key.ID}}, nil
}

// stepError classifies what the build's spec or image caused (a working
// directory the image lacks, limits the host cannot give) as the
// template's ErrInvalid, the client's.
func stepError(err error) error {
	for _, e := range []error{sandbox.ErrNotFound, sandbox.ErrNotDir, sandbox.ErrInvalid, sandbox.ErrInvalidSpec, sandbox.ErrNoSpace} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", template.ErrInvalid, err)
		}
	}
	return err
}

// stepOutput is an io.Writer calling fn (nil: discarded).
type stepOutput func(p []byte)

func (f stepOutput) Write(p []byte) (int, error) {
	if f != nil {
		f(p)
	}
	return len(p), nil
}
