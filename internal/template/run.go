package template

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// RunLimits bound each run step of a build (its build computer).
type RunLimits struct {
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	MemoryMB       int `json:"memory_mb,omitempty"`
	// DiskMB bounds what the step writes: its changes to the root and
	// its /workspace together.
	DiskMB int `json:"disk_mb,omitempty"`
}

// Defaults and bounds of RunLimits.
var (
	DefaultRunLimits = RunLimits{TimeoutSeconds: 600, MemoryMB: 1024, DiskMB: 2048}
	MaxRunLimits     = RunLimits{TimeoutSeconds: 3600, MemoryMB: 16384, DiskMB: 65536}
)

// Run step bounds: how many, how long one command is.
const (
	maxRunSteps  = 64
	maxRunLength = 16 << 10
)

// check fills in l's defaults and refuses values out of bounds.
func (l *RunLimits) check() error {
	for _, f := range []struct {
		name     string
		v        *int
		def, max int
	}{
		{"timeout_seconds", &l.TimeoutSeconds, DefaultRunLimits.TimeoutSeconds, MaxRunLimits.TimeoutSeconds},
		{"memory_mb", &l.MemoryMB, DefaultRunLimits.MemoryMB, MaxRunLimits.MemoryMB},
		{"disk_mb", &l.DiskMB, DefaultRunLimits.DiskMB, MaxRunLimits.DiskMB},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 0 || *f.v > f.max {
			return fmt.Errorf("run_limits.%s: %d is not between 1 and %d", f.name, *f.v, f.max)
		}
	}
	return nil
}

// checkRun checks a spec's run steps and their limits.
func (sp *Spec) checkRun() error {
	if len(sp.Run) == 0 && sp.RunLimits == (RunLimits{}) && sp.NetworkPolicy == nil {
		return nil
	}
	if len(sp.Run) > maxRunSteps {
		return fmt.Errorf("run: %d steps, at most %d (join commands with &&)", len(sp.Run), maxRunSteps)
	}
	for i, c := range sp.Run {
		if strings.TrimSpace(c) == "" || len(c) > maxRunLength || strings.Contains(c, "\x00") || !utf8.ValidString(c) {
			return fmt.Errorf("run[%d]: give a shell command of 1 to %d bytes of UTF-8 text", i, maxRunLength)
		}
	}
	if err := sp.NetworkPolicy.check(len(sp.Run)); err != nil {
		return err
	}
	return sp.RunLimits.check()
}

// Allowlist is a spec's network_policy: the shape of a computer's
// (POST /v1/computers), "allowlist" only. The server checks it against
// the deployment's, organisation's and key's allowlists as a computer's.
type Allowlist struct {
	Type           string   `json:"type"`
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	AllowedCIDRs   []string `json:"allowed_cidrs,omitempty"`
}

// maxNetworkPolicy bounds a network_policy's entries (a computer's bound).
const maxNetworkPolicy = 256

func (n *Allowlist) check(steps int) error {
	if n != nil && steps == 0 {
		return fmt.Errorf("network_policy is the run steps' network: give run steps, or leave it out (defaults.network_policy is the computers')")
	}
	return n.checkShape("network_policy")
}

// checkShape checks a policy (nil: none) named field in messages.
func (n *Allowlist) checkShape(field string) error {
	switch {
	case n == nil:
		return nil
	case n.Type != "allowlist":
		return fmt.Errorf("%s.type must be \"allowlist\" (leave the policy out for no network), got %q", field, n.Type)
	case len(n.AllowedDomains) == 0 && len(n.AllowedCIDRs) == 0:
		return fmt.Errorf("%s.allowed_domains: an allowlist needs at least one domain (or allowed_cidrs)", field)
	case len(n.AllowedDomains)+len(n.AllowedCIDRs) > maxNetworkPolicy:
		return fmt.Errorf("%s: at most %d entries", field, maxNetworkPolicy)
	}
	return nil
}

// RunStep is one run step for a RunFunc: Command runs with /bin/sh -c in
// a build computer whose root is Image (the root of the layers so far)
// made writable, as root of the computer's user namespace, with no
// network but what Network allows, in WorkingDir with Env, within Limits.
type RunStep struct {
	N, Of      int // the step's number, from 1, and how many there are
	Command    string
	Image      string
	Env        []string
	WorkingDir string
	Limits     RunLimits
	// Network is the spec's network_policy: nil, no network.
	Network *Allowlist
	// Output receives the step's output (stdout and stderr) as it comes.
	Output func(p []byte)
}

// RunResult is how a run step ended and, when it succeeded, its changes.
type RunResult struct {
	ExitCode  int // -1 when killed by a signal
	Signal    int
	TimedOut  bool
	OOMKilled bool
	// Changes is the upper layer of the build computer's root (see
	// sandbox.RootChanges) when ExitCode is 0; UserUID owns on disk
	// what the computer's user (uid 1000) owns.
	Changes *os.File
	UserUID uint32
	// Release destroys the build computer (after Changes is read).
	Release func()
}

// RunFunc runs one run step in a build computer (internal/computer's
// TemplateRunner over the sandbox driver).
type RunFunc func(ctx context.Context, step RunStep) (RunResult, error)

// runSteps runs the spec's run steps on img, each on the root of the
// layers before it, adding each step's changes as a layer.
func (s *Store) runSteps(ctx context.Context, sp Spec, img *builtImage, dir string, opts Options) error {
	if len(sp.Run) == 0 {
		return nil
	}
	if opts.Run == nil {
		return errf(ErrInvalid, "run steps need a build computer: build this spec with 'cubicle template build' or POST /v1/templates")
	}
	for i, command := range sp.Run {
		step := RunStep{N: i + 1, Of: len(sp.Run), Command: command, Env: img.config.Config.Env,
			WorkingDir: img.config.Config.WorkingDir, Limits: sp.RunLimits, Network: sp.NetworkPolicy}
		v, err := img.image()
		if err != nil {
			return err
		}
		rm, err := s.storeLayers(ctx, v, Source{Kind: kindBuild}, opts.Progress)
		if err != nil {
			return within(err, "run[%d]", i)
		}
		step.Image = filepath.Join(s.rootPath(rm.ChainID), imageFile)
		tarPath := filepath.Join(dir, fmt.Sprintf("run-%d.tar", i+1))
		if err := s.runStep(ctx, step, tarPath, opts); err != nil {
			return err
		}
		if err := img.addTar(tarPath); err != nil {
			return err
		}
	}
	return nil
}

// runStep runs one step and writes its changes as a layer tar to out.
func (s *Store) runStep(ctx context.Context, step RunStep, out string, opts Options) error {
	tail := &lineTail{max: 20}
	start := time.Now()
	report(opts.Progress, Progress{Step: "run", Layer: step.N, Layers: step.Of, State: "running", Message: "$ " + firstLine(step.Command)})
	step.Output = func(p []byte) {
		for _, line := range tail.write(p) {
			report(opts.Progress, Progress{Step: "run", Layer: step.N, Layers: step.Of, State: "running", Message: line})
		}
	}
	res, err := opts.Run(ctx, step)
	if res.Release != nil {
		defer res.Release()
	}
	if res.Changes != nil {
		defer res.Changes.Close()
	}
	if line := tail.flush(); line != "" {
		report(opts.Progress, Progress{Step: "run", Layer: step.N, Layers: step.Of, State: "running", Message: line})
	}
	if err != nil {
		return within(err, "run[%d]", step.N-1)
	}
	if why := res.failure(step.Limits); why != "" {
		return errf(ErrInvalid, "run[%d] (%s) %s; its last lines:\n%s", step.N-1, firstLine(step.Command), why, tail.String())
	}
	if res.Changes == nil {
		return fmt.Errorf("run[%d]: the build computer gave no changes", step.N-1)
	}
	n, err := writeChangesTar(res.Changes, res.UserUID, out, s.limits)
	if err != nil {
		return within(err, "run[%d]: its changes", step.N-1)
	}
	report(opts.Progress, Progress{Step: "run", Layer: step.N, Layers: step.Of, State: "done", Files: n,
		Message: fmt.Sprintf("done in %.1f s, %d entries changed", time.Since(start).Seconds(), n)})
	return nil
}

// failure says why a step failed, "" when it succeeded.
func (r RunResult) failure(l RunLimits) string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("ran out of time (run_limits.timeout_seconds %d)", l.TimeoutSeconds)
	case r.OOMKilled:
		return fmt.Sprintf("ran out of memory (run_limits.memory_mb %d)", l.MemoryMB)
	case r.ExitCode == -1:
		return fmt.Sprintf("was killed by signal %d", r.Signal)
	case r.ExitCode != 0:
		return fmt.Sprintf("failed with exit status %d", r.ExitCode)
	}
	return ""
}

func firstLine(s string) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s, cut = s[:80], true
	}
	if cut {
		s += "…"
	}
	return s
}

// lineTail splits output into lines (long ones cut at 4 KiB) and keeps
// the last max of them.
type lineTail struct {
	max     int
	partial []byte
	last    []string
}

func (t *lineTail) write(p []byte) []string {
	var out []string
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.partial = append(t.partial, p...)
			if len(t.partial) >= 4<<10 {
				out = append(out, t.take())
			}
			break
		}
		t.partial = append(t.partial, p[:i]...)
		out = append(out, t.take())
		p = p[i+1:]
	}
	return out
}

// take ends the partial line and keeps it.
func (t *lineTail) take() string {
	line := strings.ToValidUTF8(string(t.partial), "\uFFFD")
	t.partial = t.partial[:0]
	t.last = append(t.last, line)
	if len(t.last) > t.max {
		t.last = t.last[1:]
	}
	return line
}

// flush ends a last line without a newline.
func (t *lineTail) flush() string {
	if len(t.partial) == 0 {
		return ""
	}
	return t.take()
}

func (t *lineTail) String() string { return strings.Join(t.last, "\n") }

// storeLayers stores img's layers and their root (with its image), for a
// run step's build computer, and returns the root.
func (s *Store) storeLayers(ctx context.Context, img v1.Image, src Source, progress func(Progress)) (rootMeta, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	_, _, metas, err := s.storeImageLayers(ctx, img, src, progress)
	if err != nil {
		return rootMeta{}, err
	}
	return s.root(ctx, metas, progress)
}
