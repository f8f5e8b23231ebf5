package tools

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

func TestCodeInterpreter(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	var got sandbox.PythonRequest
	f := &fake{python: func(req sandbox.PythonRequest, on func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
		got = req
		if strings.Contains(req.Cells[0].Code, "1/0") {
			on(sandbox.PythonOutput{Cell: 0, Output: kernel.Output{Type: kernel.OutError, EName: "ZeroDivisionError",
				EValue: "division by zero", Traceback: []string{"Traceback (most recent call last):", "ZeroDivisionError: division by zero"}}})
			return sandbox.PythonResult{Status: "error", FailedCell: 0, Message: "Cell 0 failed: ZeroDivisionError: division by zero",
				Cells: []sandbox.CellResult{{Index: 0, Status: "error"}}}, nil
		}
		on(sandbox.PythonOutput{Cell: 0, Output: kernel.Output{Type: kernel.OutStream, Name: "stdout", Text: "hi\n"}})
		on(sandbox.PythonOutput{Cell: 0, Output: kernel.Output{Type: kernel.OutDisplay, PNG: png, Width: 64, Height: 48, Text: "<Figure>"}})
		return sandbox.PythonResult{Status: "ok", FailedCell: -1, Cells: []sandbox.CellResult{{Index: 0, Status: "ok"}}}, nil
	}}
	res := run(t, f, Env{}, CodeInterpreterName, `{"code":"print('hi')"}`)
	if len(got.Cells) != 1 || got.Cells[0].Code != "print('hi')" || got.Reset || got.Cwd != "" {
		t.Fatalf("request %+v", got)
	}
	if res.Output != "hi\n[image: 64x48 PNG]" || res.Failed || len(res.Cells) != 0 {
		t.Fatalf("output %q %+v", res.Output, res)
	}
	// The model is told of the image; the client's logs carry no placeholder.
	if len(res.Outputs) != 2 || res.Outputs[0] != (CodeOutput{Type: "logs", Logs: "hi"}) || res.Outputs[1].Type != "image" {
		t.Fatalf("outputs %+v", res.Outputs)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(res.Outputs[1].URL, "data:image/png;base64,"))
	if err != nil || !bytes.Equal(b, png) || !strings.HasPrefix(res.Outputs[1].URL, "data:image/png;base64,") {
		t.Fatalf("image url %q: %v", res.Outputs[1].URL, err)
	}

	res = run(t, f, Env{}, CodeInterpreterName, `{"code":"1/0"}`)
	want := "ZeroDivisionError: division by zero\nTraceback (most recent call last):\nCell 0 failed: ZeroDivisionError: division by zero"
	if res.Output != want || !res.Failed || len(res.Outputs) != 1 || res.Outputs[0].Logs != want {
		t.Fatalf("error: %q %+v", res.Output, res.Outputs)
	}

	for args, want := range map[string]string{
		`{"code":"1","cells":[]}`: `Invalid arguments: unknown field "cells".`,
		`{}`:                      "Invalid arguments: code is required.",
	} {
		if got := run(t, f, Env{}, CodeInterpreterName, args); got.Output != want || !got.Failed || got.Outputs != nil {
			t.Errorf("%s: %q, want %q", args, got.Output, want)
		}
	}
}
