package pyterm

import (
	"context"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Backend is where cells run: a local computer or a server's.
type Backend interface {
	// Run makes one call; onOutput sees each output as it happens.
	Run(ctx context.Context, req computer.PythonRequest, onOutput func(kernel.Output)) (computer.PythonResult, error)
	// Interrupt interrupts the session kernel's running cell.
	Interrupt(ctx context.Context) error
	// Warm starts the session kernel ahead of the first input (best effort).
	Warm(ctx context.Context)
	// Describe names the computer for the REPL's banner.
	Describe() string
	// InterruptedNote completes "interrupted" (what happened to the computer).
	InterruptedNote() string
}

// Local is a fresh computer of this host, destroyed by the caller.
type Local struct {
	sb        sandbox.Sandbox
	prelude   string
	maxOutput int64
}

// NewLocal runs calls in sb's session kernel, started with prelude, each
// cell's output bounded by maxOutput bytes.
func NewLocal(sb sandbox.Sandbox, prelude string, maxOutput int64) *Local {
	return &Local{sb: sb, prelude: prelude, maxOutput: maxOutput}
}

// Run answers as POST /v1/computers/{id}/python would (computer.PythonAnswer).
func (l *Local) Run(ctx context.Context, req computer.PythonRequest, onOutput func(kernel.Output)) (computer.PythonResult, error) {
	ans := computer.NewPythonAnswer(req.Cells, l.maxOutput)
	start := time.Now()
	res, err := l.sb.Python(ctx, sandbox.PythonRequest{Cells: computer.SandboxCells(req.Cells), Timeout: req.Timeout,
		Reset: req.Reset, Mode: "session", Prelude: l.prelude, MaxOutput: l.maxOutput},
		func(o sandbox.PythonOutput) {
			ans.Add(o)
			onOutput(o.Output)
		})
	if err != nil {
		return computer.PythonResult{}, err
	}
	return ans.Result(res, time.Since(start)), nil
}

func (l *Local) Interrupt(ctx context.Context) error {
	return l.sb.PythonControl(ctx, "interrupt")
}

func (l *Local) Warm(ctx context.Context) {
	l.sb.Python(ctx, sandbox.PythonRequest{Mode: "session", Prelude: l.prelude, Timeout: time.Minute}, nil)
}

func (l *Local) Describe() string { return "a fresh local computer, " + l.sb.ID() }

func (l *Local) InterruptedNote() string { return "; the computer was destroyed" }

// Remote is a computer of a 'cubicle serve' server, over its API.
type Remote struct {
	c  *client.Client
	id string
}

// NewRemote runs calls in computer id of c's server.
func NewRemote(c *client.Client, id string) *Remote { return &Remote{c: c, id: id} }

// Run streams the call and answers with the service's types, which the
// renderer and --json share with the local computer.
func (r *Remote) Run(ctx context.Context, req computer.PythonRequest, onOutput func(kernel.Output)) (computer.PythonResult, error) {
	cells := make([]client.Cell, len(req.Cells))
	for i, c := range req.Cells {
		cells[i] = client.Cell{Code: c.Code, Title: c.Title}
	}
	res, err := r.c.PythonStream(ctx, r.id, client.PythonRequest{Cells: cells, Timeout: int(req.Timeout / time.Second), Reset: req.Reset},
		func(o client.PythonOutput) { onOutput(kernelOutput(o.Output)) })
	if err != nil {
		if ctx.Err() != nil {
			return computer.PythonResult{}, ctx.Err()
		}
		return computer.PythonResult{}, err
	}
	out := computer.PythonResult{Status: res.Status, Cells: make([]computer.CellView, len(res.Cells)), FailedCell: res.FailedCell,
		Cancelled: res.Cancelled, TimedOut: res.TimedOut, Message: res.Message, KernelRestarted: res.KernelRestarted,
		Duration: time.Duration(res.DurationMS) * time.Millisecond}
	for i, c := range res.Cells { // no artifacts: the CLI never asks for save_images
		v := computer.CellView{Index: c.Index, Title: c.Title, Status: c.Status, ExecutionCount: c.ExecutionCount,
			InputRequested: c.InputRequested, Truncated: c.Truncated, Outputs: make([]kernel.Output, len(c.Outputs))}
		for j, o := range c.Outputs {
			v.Outputs[j] = kernelOutput(o)
		}
		out.Cells[i] = v
	}
	return out, nil
}

func kernelOutput(o client.Output) kernel.Output {
	return kernel.Output{Type: kernel.OutputType(o.Type), Name: o.Name, Text: o.Text, MIME: o.MIME, JSON: o.JSON, PNG: o.PNG,
		Width: o.Width, Height: o.Height, ExecutionCount: o.ExecutionCount, EName: o.EName, EValue: o.EValue,
		Traceback: o.Traceback, Omitted: o.Omitted, DisplayID: o.DisplayID}
}

func (r *Remote) Interrupt(ctx context.Context) error { return r.c.InterruptPython(ctx, r.id) }

func (r *Remote) Warm(context.Context) {} // the server's pool warms kernels

func (r *Remote) Describe() string { return "computer " + r.id + " at " + r.c.URL() }

func (r *Remote) InterruptedNote() string { return "" }
