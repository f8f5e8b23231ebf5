package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// pyStream runs one cell and returns what the agent streamed for it.
func pyStream(t *testing.T, sb sandbox.Sandbox, code string) ([]kernel.Output, sandbox.PythonResult) {
	t.Helper()
	var outs []kernel.Output
	res, err := sb.Python(context.Background(), sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: code}},
		Timeout: 2 * time.Minute}, func(o sandbox.PythonOutput) { outs = append(outs, o.Output) })
	if err != nil || res.Status != "ok" {
		t.Fatalf("python: %+v %v", res, err)
	}
	return outs, res
}

// A flood of one-byte stream messages (10,000 here: each flushed write
// costs the kernel about 2 ms on a loaded test host) reaches the host as a few outputs
// holding all the text, and the answer has one output.
func TestPythonStreamFloodIsCoalesced(t *testing.T) {
	sb, _ := realComputer(t)
	const n = 10000
	start := time.Now()
	streamed, _ := pyStream(t, sb, "import sys\nfor i in range(10000): sys.stdout.write('x'); sys.stdout.flush()")
	var text strings.Builder
	acc := kernel.NewAccumulator(0)
	for _, o := range streamed {
		if o.Type != kernel.OutStream || o.Name != "stdout" {
			t.Fatalf("streamed %+v", o)
		}
		text.WriteString(o.Text)
		acc.Add(o)
	}
	if text.String() != strings.Repeat("x", n) {
		t.Fatalf("streamed %d bytes of text", text.Len())
	}
	// Deliveries are paced (50 ms apart) and what came in between is
	// merged: a kernel sends a flushed write every few milliseconds at
	// best, so each streamed output carries many of them.
	if len(streamed) > n/10 {
		t.Errorf("%d outputs streamed for %d messages", len(streamed), n)
	}
	if outs := acc.Outputs(); len(outs) != 1 || outs[0].Text != strings.Repeat("x", n) {
		t.Errorf("answer: %d outputs", len(outs))
	}
	t.Logf("%d streamed outputs in %v", len(streamed), time.Since(start))
}

// A cell with more than kernel.MaxOutputs outputs answers the bound and a
// marker, through the python tool as through the stream.
func TestPythonOutputCountBound(t *testing.T) {
	sb, _ := realComputer(t)
	code := "import sys\nfor i in range(3000):\n    s = (sys.stdout, sys.stderr)[i % 2]; s.write('x'); s.flush()"
	streamed, res := pyStream(t, sb, code)
	if len(streamed) > kernel.MaxOutputs+1 || streamed[len(streamed)-1].Type != kernel.OutTruncated || !res.Cells[0].Truncated {
		t.Fatalf("%d outputs streamed, last %+v, truncated %v", len(streamed), streamed[len(streamed)-1], res.Cells[0].Truncated)
	}
	args, _ := json.Marshal(map[string]any{"cells": []map[string]any{{"code": code, "title": nil}}, "timeout": nil, "cwd": nil, "reset": nil})
	tr, err := tools.Default().Run(context.Background(), tools.Env{Sandbox: sb}, tools.PythonName, args)
	if err != nil || len(tr.Cells) != 1 {
		t.Fatalf("python tool: %+v %v", tr, err)
	}
	outs := tr.Cells[0].Outputs
	want := "[output truncated: the cell's output reached the limit of 1000 outputs; 2000 more bytes in 2000 outputs were dropped]"
	if len(outs) != kernel.MaxOutputs+1 || outs[kernel.MaxOutputs].Text != want {
		t.Fatalf("%d outputs, last %+v", len(outs), outs[len(outs)-1])
	}
	if !strings.HasSuffix(tr.Output, "\n"+want) {
		t.Errorf("the model's text does not end with the marker: %q", tr.Output[max(0, len(tr.Output)-200):])
	}
}
