package computer

import (
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// TestPythonAnswer: outputs land in their cell (consecutive stream text
// merged, as the API answers), out-of-range cells are refused, and the
// cells' ends and the call's come from the sandbox's result.
func TestPythonAnswer(t *testing.T) {
	a := NewPythonAnswer([]PythonCell{{Code: "a", Title: "one"}, {Code: "b"}}, 1<<20)
	for _, o := range []sandbox.PythonOutput{
		{Cell: 0, Output: kernel.Output{Type: kernel.OutStream, Name: "stdout", Text: "x"}},
		{Cell: 0, Output: kernel.Output{Type: kernel.OutStream, Name: "stdout", Text: "y"}},
		{Cell: 1, Output: kernel.Output{Type: kernel.OutError, EName: "E"}},
	} {
		if !a.Add(o) {
			t.Fatalf("Add(%+v) refused", o)
		}
	}
	if a.Add(sandbox.PythonOutput{Cell: 2}) || a.Add(sandbox.PythonOutput{Cell: -1}) {
		t.Fatal("an output of no cell was kept")
	}
	res := a.Result(sandbox.PythonResult{Status: "error", FailedCell: 1, Message: "m", KernelRestarted: true,
		Cells: []sandbox.CellResult{{Index: 0, Status: "ok", ExecutionCount: 3}, {Index: 1, Status: "error", Truncated: true}, {Index: 9}}},
		1500*time.Millisecond)
	c := res.Cells
	if res.Status != "error" || res.FailedCell == nil || *res.FailedCell != 1 || res.Message != "m" || !res.KernelRestarted ||
		res.Duration != 1500*time.Millisecond || len(c) != 2 || c[0].Title != "one" || c[0].ExecutionCount != 3 || c[1].Status != "error" || !c[1].Truncated {
		t.Fatalf("%+v", res)
	}
	if len(c[0].Outputs) != 1 || c[0].Outputs[0].Text != "xy" || len(c[1].Outputs) != 1 || c[1].Outputs[0].EName != "E" {
		t.Fatalf("outputs %+v", c)
	}
	if r := NewPythonAnswer([]PythonCell{{}}, 1024).Result(sandbox.PythonResult{FailedCell: -1}, 0); r.FailedCell != nil || r.Cells[0].Outputs == nil {
		t.Fatalf("no failed cell, no outputs: %+v", r)
	}
}
