package computer

import (
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// PythonAnswer assembles the answer of one python call from what the
// sandbox streams and returns: the outputs per cell, accumulated as the
// API answers them (streams merged, bounded by maxOutput), then the cells'
// ends. Manager.Python and 'cubicle python' on a local computer both use
// it, so they answer alike. Add is called from one goroutine at a time
// (the sandbox's output callback), Result once the call returned.
type PythonAnswer struct {
	cells []CellView
	outs  []*kernel.Accumulator
}

// NewPythonAnswer starts the answer of a call of cells.
func NewPythonAnswer(cells []PythonCell, maxOutput int64) *PythonAnswer {
	a := &PythonAnswer{cells: make([]CellView, len(cells)), outs: make([]*kernel.Accumulator, len(cells))}
	for i, c := range cells {
		a.cells[i] = CellView{Index: i, Title: c.Title}
		a.outs[i] = kernel.NewAccumulator(maxOutput)
	}
	return a
}

// Add keeps one streamed output; false: it names no cell of the call.
func (a *PythonAnswer) Add(o sandbox.PythonOutput) bool {
	if o.Cell < 0 || o.Cell >= len(a.outs) {
		return false
	}
	a.outs[o.Cell].Add(o.Output)
	return true
}

// Result is the answer of a call that ended with res after elapsed.
func (a *PythonAnswer) Result(res sandbox.PythonResult, elapsed time.Duration) PythonResult {
	cells := a.cells
	for i := range cells {
		cells[i].Outputs = a.outs[i].Outputs()
	}
	for _, c := range res.Cells {
		if c.Index >= 0 && c.Index < len(cells) {
			cells[c.Index].Status, cells[c.Index].ExecutionCount = c.Status, c.ExecutionCount
			cells[c.Index].InputRequested, cells[c.Index].Truncated = c.InputRequested, c.Truncated
		}
	}
	out := PythonResult{Status: res.Status, Cells: cells, Cancelled: res.Cancelled, TimedOut: res.TimedOut,
		Message: res.Message, KernelRestarted: res.KernelRestarted, Duration: elapsed}
	if res.FailedCell >= 0 {
		fc := res.FailedCell
		out.FailedCell = &fc
	}
	return out
}
