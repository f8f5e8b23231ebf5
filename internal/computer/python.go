package computer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// maxPythonTimeout is sandbox.MaxPythonTimeout in the whole seconds the
// API counts.
const maxPythonTimeout = int(sandbox.MaxPythonTimeout / time.Second)

// PythonRequest is a python call: cells run in order in the computer's
// kernel.
type PythonRequest struct {
	Cells []PythonCell
	// Timeout bounds the whole call, in whole seconds (a fraction is
	// dropped): 0 is sandbox.DefaultPythonTimeout, at most
	// sandbox.MaxPythonTimeout and the computer's exec limit.
	Timeout time.Duration
	Cwd     string
	Reset   bool
	Mode    string // session (default) or per_call
	// SaveImages keeps every image the cells produce as an artifact (the
	// key needs the artifacts capability); their ids are in the cells'
	// artifacts.
	SaveImages bool
}

// PythonCell is one cell of a python request.
type PythonCell struct {
	Code  string
	Title string
}

// SandboxCells are cells as the sandbox runs them.
func SandboxCells(cells []PythonCell) []sandbox.PythonCell {
	out := make([]sandbox.PythonCell, len(cells))
	for i, c := range cells {
		out[i] = sandbox.PythonCell(c)
	}
	return out
}

// CellView is one cell of a python answer.
type CellView struct {
	Index          int
	Title          string
	Status         string // sandbox.CellOK, CellError, ...
	ExecutionCount int
	InputRequested bool
	Truncated      bool
	Outputs        []kernel.Output
	Artifacts      []artifact.Ref // images kept with SaveImages
}

// imageSaverFor returns the artifact store when p asked for save_images
// and may use it.
func (m *Manager) imageSaverFor(p governance.Principal, want bool) (Artifacts, error) {
	if !want {
		return nil, nil
	}
	if m.cfg.Artifacts == nil {
		return nil, fieldError("save_images", "images cannot be kept as artifacts on this deployment")
	}
	if !p.Caps.HasArtifacts() {
		return nil, &FieldError{Field: "save_images", Err: fmt.Errorf("%w: save_images needs the artifacts capability", ErrForbidden)}
	}
	return m.cfg.Artifacts, nil
}

// PythonResult is the answer of a python call.
type PythonResult struct {
	Status          string
	Cells           []CellView
	FailedCell      *int // nil: no cell failed
	Cancelled       bool
	TimedOut        bool
	Message         string
	KernelRestarted bool
	Duration        time.Duration
}

// PythonStream receives each output as it happens.
type PythonStream func(sandbox.PythonOutput)

// FieldError names the request field a validation error is about.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldError(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
}

// Validate checks a call and fills in the default timeout.
func (r *PythonRequest) Validate() error {
	switch {
	case len(r.Cells) == 0:
		return fieldError("cells", "give at least one cell")
	case len(r.Cells) > sandbox.MaxPythonCells:
		return fieldError("cells", "at most %d cells per call", sandbox.MaxPythonCells)
	case seconds(r.Timeout) < 0 || seconds(r.Timeout) > maxPythonTimeout:
		return fieldError("timeout", "timeout must be 1 to %d seconds", maxPythonTimeout)
	case r.Mode != "" && r.Mode != "session" && r.Mode != "per_call":
		return fieldError("mode", "mode must be session or per_call")
	}
	for i, c := range r.Cells {
		if len(c.Code) > sandbox.MaxPythonCellBytes {
			return fmt.Errorf("%w: cell %d is larger than %d bytes", ErrTooLarge, i, sandbox.MaxPythonCellBytes)
		}
	}
	if seconds(r.Timeout) == 0 {
		r.Timeout = sandbox.DefaultPythonTimeout
	}
	return nil
}

// Python runs cells in the computer's kernel. Cancelling ctx (a client that
// went away) interrupts the kernel; the call returns once it is idle again.
func (m *Manager) Python(ctx context.Context, p governance.Principal, id string, req PythonRequest, stream PythonStream) (PythonResult, error) {
	if err := req.Validate(); err != nil {
		return PythonResult{}, err
	}
	l, err := m.running(ctx, p, id)
	if err != nil {
		return PythonResult{}, err
	}
	defer m.busy(l)()
	if req.Mode != sandbox.ModePerCall {
		m.mu.Lock()
		l.python = true
		m.mu.Unlock()
	}
	save, err := m.imageSaverFor(p, req.SaveImages)
	if err != nil {
		return PythonResult{}, err
	}
	var saveErr error
	timeout := tools.CapSeconds(l.execLimit, seconds(req.Timeout))
	ans := NewPythonAnswer(req.Cells, m.cfg.MaxOutputBytes)
	artifacts := make([][]artifact.Ref, len(req.Cells))
	start := time.Now()
	res, err := l.sb.Python(ctx, sandbox.PythonRequest{Cells: SandboxCells(req.Cells), Timeout: timeout,
		Cwd: req.Cwd, Reset: req.Reset, Mode: req.Mode, Prelude: m.preludeFor(l.sb.Spec()), MaxOutput: m.cfg.MaxOutputBytes},
		func(o sandbox.PythonOutput) {
			if ans.Add(o) && save != nil && len(o.Output.PNG) > 0 && saveErr == nil {
				name := fmt.Sprintf("cell%d-image%d.png", o.Cell+1, len(artifacts[o.Cell])+1)
				a, err := save.SaveImage(context.WithoutCancel(ctx), p, id, name, o.Output.PNG)
				if err != nil {
					saveErr = err
				} else {
					artifacts[o.Cell] = append(artifacts[o.Cell], a)
				}
			}
			if stream != nil {
				stream(o)
			}
		})
	elapsed := time.Since(start)
	m.metrics.python.observe(elapsed)
	if serr := m.stoppedDuring(id, l); serr != nil {
		err = serr // the call's own answer (a kernel killed by SIGKILL) would not say why
	}
	status := res.Status
	if err != nil {
		status = "error"
	}
	m.gov.Record(ctx, p, "computer.executed", id, map[string]any{"kind": "python",
		"duration_ms": elapsed.Milliseconds(), "cells": len(req.Cells), "status": status})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, ErrGone) {
			return PythonResult{}, err
		}
		return PythonResult{}, m.callError(ctx, id, err)
	}
	if saveErr != nil {
		return PythonResult{}, fmt.Errorf("keep images as artifacts: %w", saveErr)
	}
	out := ans.Result(res, elapsed)
	for i := range out.Cells {
		out.Cells[i].Artifacts = artifacts[i]
	}
	return out, nil
}

// stoppedDuring says why l stopped while a call ran: its lifetime ran out,
// or it was deleted; nil while it runs.
func (m *Manager) stoppedDuring(id string, l *live) error {
	m.mu.Lock()
	gone := l.gone()
	m.mu.Unlock()
	switch {
	case !gone:
		return nil
	case !m.now().Before(l.rec.ExpiresAt) && l.rec.ReadyAt != nil:
		return fmt.Errorf("%w: %s reached the end of its lifetime (%d seconds) while the call ran; its kernel and files are gone",
			ErrGone, id, int(l.rec.ExpiresAt.Sub(*l.rec.ReadyAt).Round(time.Second).Seconds()))
	}
	return deletedError(id)
}

// PythonControl interrupts or restarts a computer's session kernel.
func (m *Manager) PythonControl(ctx context.Context, p governance.Principal, id, action string) error {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return err
	}
	return execError(l.sb.PythonControl(ctx, action))
}

// warmKernel starts a pool computer's session kernel with the prelude, so
// the first cell of its user does not pay the kernel's start.
func (m *Manager) warmKernel(ctx context.Context, sb sandbox.Sandbox) error {
	res, err := sb.Python(ctx, sandbox.PythonRequest{Prelude: m.preludeFor(sb.Spec()), Mode: "session",
		Timeout: time.Minute}, nil)
	if err == nil && res.Status != "ok" {
		err = fmt.Errorf("prelude: %s", res.Message)
	}
	if err != nil {
		return fmt.Errorf("warm the Python kernel: %w", err)
	}
	return nil
}

// preludeFor is the prelude of computers of spec: their template's own
// (template.ComputerDefaults.Prelude) when it has one, else the configured one on
// the host's runtime; on a template, which may lack what it imports,
// each of its top-level statements runs guarded, so the prelude imports
// what the template has and skips the rest (an indented prelude is
// guarded whole).
func (m *Manager) preludeFor(spec sandbox.Spec) string {
	if spec.Root.Prelude != "" {
		return spec.Root.Prelude // the template's own, for what it has
	}
	if spec.Root.Image == "" || m.cfg.Prelude == "" {
		return m.cfg.Prelude
	}
	lines := strings.Split(strings.TrimRight(m.cfg.Prelude, "\n"), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") || strings.HasSuffix(l, "\\") {
			lines = []string{strings.Join(lines, "\n")}
			break
		}
	}
	var b strings.Builder
	for _, stmt := range lines {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		b.WriteString("try:\n    " + strings.ReplaceAll(stmt, "\n", "\n    ") + "\nexcept Exception:\n    pass\n")
	}
	return b.String()
}
