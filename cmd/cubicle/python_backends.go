package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// pyBackend is where cells run: a local computer or a server's.
type pyBackend interface {
	// run makes one call; onOutput sees each output as it happens.
	run(ctx context.Context, req computer.PythonRequest, onOutput func(kernel.Output)) (computer.PythonResult, error)
	// interrupt interrupts the session kernel's running cell.
	interrupt(ctx context.Context) error
	// warm starts the session kernel ahead of the first input (best effort).
	warm(ctx context.Context)
	// describe names the computer for the REPL's banner.
	describe() string
	// interruptedNote completes "interrupted" (what happened to the computer).
	interruptedNote() string
}

// localPython is a fresh computer of this host, destroyed by the caller.
type localPython struct {
	sb        sandbox.Sandbox
	prelude   string
	maxOutput int64
}

func newLocalPython(sigc <-chan os.Signal, spec sandbox.Spec, data, prelude string) (*localPython, int) {
	ctx, stop := untilSignal(sigc)
	defer stop()
	drv, err := linux.New(linux.Config{StateDir: data})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return nil, 125
	}
	drv.GC(ctx) // computers of killed earlier runs
	sb, err := drv.Create(ctx, spec)
	if err != nil {
		if sig := caughtSignal(ctx); sig != nil {
			fmt.Fprintln(os.Stderr, "cubicle python: interrupted")
			return nil, signalStatus(sig)
		}
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return nil, 125
	}
	return &localPython{sb: sb, prelude: prelude, maxOutput: int64(config.Default().Computers.MaxOutputBytes)}, 0
}

// run answers as POST /v1/computers/{id}/python would (computer.PythonAnswer).
func (l *localPython) run(ctx context.Context, req computer.PythonRequest, onOutput func(kernel.Output)) (computer.PythonResult, error) {
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

func (l *localPython) interrupt(ctx context.Context) error {
	return l.sb.PythonControl(ctx, "interrupt")
}

func (l *localPython) warm(ctx context.Context) {
	l.sb.Python(ctx, sandbox.PythonRequest{Mode: "session", Prelude: l.prelude, Timeout: time.Minute}, nil)
}

func (l *localPython) describe() string { return "a fresh local computer, " + l.sb.ID() }

func (l *localPython) interruptedNote() string { return "; the computer was destroyed" }

// remotePython is a computer of a 'cubicle serve' server, over its API.
type remotePython struct {
	c  *client.Client
	id string
}

// run streams the call and answers with the service's types, which the
// renderer and --json share with the local computer.
func (r *remotePython) run(ctx context.Context, req computer.PythonRequest, onOutput func(kernel.Output)) (computer.PythonResult, error) {
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

func (r *remotePython) interrupt(ctx context.Context) error { return r.c.InterruptPython(ctx, r.id) }

func (r *remotePython) warm(context.Context) {} // the server's pool warms kernels

func (r *remotePython) describe() string { return "computer " + r.id + " at " + r.c.URL() }

func (r *remotePython) interruptedNote() string { return "" }
