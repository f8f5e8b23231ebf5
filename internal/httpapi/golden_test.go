package httpapi_test

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from what the API answers now")

// goldenModTime is the modification time of every scripted file.
var goldenModTime = time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

// goldenSandbox answers every call with fixed values, so the API's bodies
// are the same bytes on every run.
func goldenSandbox(ctx context.Context, spec sandbox.Spec) (*sandboxtest.Sandbox, error) {
	return &sandboxtest.Sandbox{
		ExecFunc: func(ctx context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
			sio.Stdout.Write([]byte("hello\n"))
			sio.Stderr.Write([]byte("warn é\n"))
			return sandbox.ExitStatus{ExitCode: 3, Duration: 12 * time.Millisecond}, nil
		},
		StatFunc: func(ctx context.Context, path string) (sandbox.FileInfo, error) {
			return sandbox.FileInfo{Name: "notes.txt", Path: "/workspace/notes.txt", Type: "file", Size: 5, Mode: 0o644, ModTime: goldenModTime}, nil
		},
		ReadFileFunc: func(ctx context.Context, req sandbox.FileRead, w io.Writer) (sandbox.DataEnd, error) {
			w.Write([]byte("notes"))
			return sandbox.DataEnd{Path: "/workspace/notes.txt", Size: 5}, nil
		},
		ListFunc: func(ctx context.Context, path string) (sandbox.Listing, error) {
			return sandbox.Listing{Truncated: true, Entries: []sandbox.FileInfo{
				{Name: "data", Path: "/workspace/data", Type: "dir", Size: 4096, Mode: 0o755, ModTime: goldenModTime},
				{Name: "notes.txt", Path: "/workspace/notes.txt", Type: "file", Size: 5, Mode: 0o644, ModTime: goldenModTime},
				{Name: "link", Path: "/workspace/link", Type: "symlink", Mode: 0o777, ModTime: goldenModTime},
			}}, nil
		},
		WriteFileFunc: func(ctx context.Context, req sandbox.FileWrite, r io.Reader) (sandbox.Written, error) {
			n, err := io.Copy(io.Discard, r)
			return sandbox.Written{Path: "/workspace/" + req.Path, Bytes: n}, err
		},
		PythonFunc: goldenPython,
	}, nil
}

// goldenPNG is a 1×1 PNG.
var goldenPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7V\xbd\xfa\x00\x00\x00\x00IEND\xaeB`\x82")

func goldenPython(ctx context.Context, req sandbox.PythonRequest, on func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
	outs := []sandbox.PythonOutput{
		{Cell: 0, Output: kernel.Output{Type: "stream", Name: "stdout", Text: "hi\n"}},
		{Cell: 0, Output: kernel.Output{Type: "execute_result", Text: "2", MIME: "text/plain", JSON: []byte(`{"a":1}`), ExecutionCount: 1, DisplayID: "d1"}},
		{Cell: 0, Output: kernel.Output{Type: "display_data", PNG: goldenPNG, Width: 1, Height: 1, Omitted: []string{"image/svg+xml"}}},
		{Cell: 1, Output: kernel.Output{Type: "error", EName: "ZeroDivisionError", EValue: "division by zero", Traceback: []string{"Traceback", "ZeroDivisionError"}}},
	}
	for _, o := range outs {
		if on != nil {
			on(o)
		}
	}
	return sandbox.PythonResult{Status: "error", FailedCell: 1, Message: "Cell 2 (b) failed: ZeroDivisionError: division by zero",
		KernelRestarted: true, Cells: []sandbox.CellResult{
			{Index: 0, Title: "a", Status: "ok", ExecutionCount: 1, Truncated: true},
			{Index: 1, Title: "b", Status: "error", ExecutionCount: 2, InputRequested: true},
		}}, nil
}

// volatile are the values that change between runs: times and measured
// durations.
var volatile = regexp.MustCompile(`"(created_at|ready_at|expires_at|duration_ms)":[0-9]+`)

// TestGoldenJSON pins every public JSON shape of the computers API that
// comes from the layers below (computer view, exec and python answers and
// their SSE events, file listing, write result, tool results), byte for
// byte: a change of the control channel or of the sandbox's types cannot
// change the API silently. Run with -update to accept a deliberate change.
func TestGoldenJSON(t *testing.T) {
	drv := &sandboxtest.Driver{New: goldenSandbox}
	e := newEnvOn(t, t.TempDir(), drv, nil)
	_, key := e.newKey("", computerCaps)
	c := e.do(key, "POST", "/v1/computers", map[string]any{"metadata": map[string]string{"k": "v"}})
	id := drv.Last().ID()
	base := "/v1/computers/" + id
	sse := map[string]string{"Accept": "text/event-stream"}
	python := map[string]any{"cells": []map[string]string{{"code": "1+1", "title": "a"}, {"code": "1/0", "title": "b"}}}
	cases := []struct {
		name         string
		method, path string
		body         any
		hdr          map[string]string
		code         int
	}{
		{"computer_get", "GET", base, nil, nil, 200},
		{"computer_list", "GET", "/v1/computers", nil, nil, 200},
		{"exec", "POST", base + "/exec", map[string]any{"command": "x"}, nil, 200},
		{"exec_base64", "POST", base + "/exec", map[string]any{"command": "x", "encoding": "base64"}, nil, 200},
		{"exec_sse", "POST", base + "/exec", map[string]any{"command": "x"}, sse, 200},
		{"exec_sse_base64", "POST", base + "/exec", map[string]any{"command": "x", "encoding": "base64"}, sse, 200},
		{"python", "POST", base + "/python", python, nil, 200},
		{"python_sse", "POST", base + "/python", python, sse, 200},
		{"files_list", "GET", base + "/files?dir=.", nil, nil, 200},
		{"file_put", "PUT", base + "/files/a/b.txt", "12345", nil, 201},
		{"tool_exec", "POST", base + "/tools/builtin__computer_exec", map[string]any{"arguments": map[string]any{"command": "x"}}, nil, 200},
		{"tool_write_file", "POST", base + "/tools/builtin__computer_write_file", map[string]any{"arguments": map[string]any{"path": "a.txt", "content": "abc"}}, nil, 200},
		{"tool_read_file", "POST", base + "/tools/builtin__computer_read_file", map[string]any{"arguments": map[string]any{"path": "notes.txt"}}, nil, 200},
		{"tool_python", "POST", base + "/tools/python", map[string]any{"arguments": python}, nil, 200},
	}
	checkGolden(t, "computer_create", http.StatusCreated, c)
	for _, tc := range cases {
		r := e.doCtx(context.Background(), key, tc.method, tc.path, tc.body, tc.hdr)
		checkGolden(t, tc.name, tc.code, r)
	}
}

func checkGolden(t *testing.T, name string, code int, r resp) {
	t.Helper()
	if r.code != code {
		t.Errorf("%s: status %d, want %d: %s", name, r.code, code, r.body)
		return
	}
	got := volatile.ReplaceAll(r.body, []byte(`"$1":0`))
	file := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%s: %v (run with -update to create it)", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the body changed:\n got %s\nwant %s", name, got, want)
	}
}
