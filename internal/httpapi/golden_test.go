package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/jupyter"
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
			if req.Command == "fail" { // an error after output: an SSE error event
				sio.Stdout.Write([]byte("partial\n"))
				return sandbox.ExitStatus{}, fmt.Errorf("%w: fork failed", sandbox.ErrProcLimit)
			}
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
		StartProcessFunc: func(ctx context.Context, req sandbox.ProcessStart) (sandbox.ProcessInfo, error) {
			return goldenRunning, nil
		},
		ListProcessesFunc: func(ctx context.Context) ([]sandbox.ProcessInfo, error) {
			return []sandbox.ProcessInfo{goldenExited, goldenRunning}, nil
		},
		GetProcessFunc: func(ctx context.Context, id string) (sandbox.ProcessInfo, error) { return goldenExited, nil },
		ProcessOutputFunc: func(ctx context.Context, req sandbox.OutputRequest, out sandbox.OutputIO) (sandbox.OutputEnd, error) {
			out.Mark(2, 2)
			out.Stdout.Write([]byte("hello\n"))
			out.Stderr.Write([]byte("warn \xc3"))
			out.Stderr.Write([]byte("\xa9\n"))
			return sandbox.OutputEnd{Next: 16, Process: goldenExited}, nil
		},
		WriteStdinFunc: func(ctx context.Context, req sandbox.StdinWrite) (sandbox.StdinResult, error) {
			return sandbox.StdinResult{Written: len(req.Data), Closed: req.Close}, nil
		},
		SignalProcessFunc: func(ctx context.Context, id string, sig int, wait time.Duration) (sandbox.ProcessInfo, error) {
			return goldenExited, nil
		},
	}, nil
}

// goldenRunning and goldenExited are the background processes of the
// golden sandbox.
var (
	goldenRunning = sandbox.ProcessInfo{ID: "proc_2", Pid: 9, Argv: []string{"sleep", "9"}, Cwd: "/workspace",
		Running: true, StartedAt: goldenModTime, StdinOpen: true}
	goldenExited = sandbox.ProcessInfo{ID: "proc_1", Pid: 7, Command: "x", Cwd: "/workspace",
		Exit: sandbox.ExitStatus{ExitCode: -1, Signal: 15}, StartedAt: goldenModTime,
		EndedAt: goldenModTime.Add(1500 * time.Millisecond), OutputStart: 2, OutputEnd: 16}
)

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
// durations (as numbers or as strings), and random ids and secrets; each
// is replaced by a fixed value of its shape.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"(created_at|ready_at|expires_at|stopped_at|last_active_at|completed_at|duration_ms|seconds|quantity)":[0-9]+`), `"$1":0`},
	{regexp.MustCompile(`"(created_at|ready_at|expires_at|revoked_at|destroyed_at|last_activity)":"[^"]*"`), `"$1":"T"`},
	{regexp.MustCompile(`\b(req|org|key|srv)_[0-9a-f]{24}\b`), `${1}_0`},
	{regexp.MustCompile(`\b(resp|msg|ci|fc)_[0-9a-f]{24}\b`), `${1}_0`},
	{regexp.MustCompile(`\bcub_[0-9a-f]{48}\b`), `cub_0`},
	{regexp.MustCompile(`"prefix":"cub_[0-9a-f]{4}"`), `"prefix":"cub_0"`},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), `00000000-0000-0000-0000-000000000000`},
}

// normalise replaces the volatile values of a body.
func normalise(b []byte) []byte {
	for _, v := range volatile {
		b = v.re.ReplaceAll(b, []byte(v.with))
	}
	return b
}

// TestGoldenJSON pins every public JSON shape of the computers API that
// comes from the layers below (computer view, exec and python answers and
// their SSE events, file listing, write result, tool results), byte for
// byte: a change of the control channel or of the sandbox's types cannot
// change the API silently. The other TestGolden* pin the rest of the
// public bodies (errors, admin, usage and audit, the Responses gateway,
// the Kernel Gateway API). Run with -update to accept a deliberate change.
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
		{"process_start", "POST", base + "/processes", map[string]any{"argv": []string{"sleep", "9"}}, nil, 201},
		{"exec_background", "POST", base + "/exec", map[string]any{"argv": []string{"sleep", "9"}, "background": true}, nil, 201},
		{"process_list", "GET", base + "/processes", nil, nil, 200},
		{"process_get", "GET", base + "/processes/proc_1", nil, nil, 200},
		{"process_output", "GET", base + "/processes/proc_1/output?offset=0", nil, nil, 200},
		{"process_output_base64", "GET", base + "/processes/proc_1/output?encoding=base64", nil, nil, 200},
		{"process_output_sse", "GET", base + "/processes/proc_1/output", nil, sse, 200},
		{"process_stdin", "POST", base + "/processes/proc_1/stdin", map[string]any{"data": "hi", "close": true}, nil, 200},
		{"process_signal", "POST", base + "/processes/proc_1/signal", map[string]any{"signal": "SIGTERM"}, nil, 200},
		{"process_kill", "DELETE", base + "/processes/proc_1", nil, nil, 200},
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
	got := normalise(r.body)
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

// goldenCase is one request of a golden test and the status it must get.
type goldenCase struct {
	name         string
	method, path string
	body         any
	hdr          map[string]string
	code         int
}

// runGolden sends each case with key and checks its body against its file.
func runGolden(t *testing.T, e *env, key string, cases []goldenCase) {
	t.Helper()
	for _, tc := range cases {
		r := e.doCtx(context.Background(), key, tc.method, tc.path, tc.body, tc.hdr)
		checkGolden(t, tc.name, tc.code, r)
	}
}

// TestGoldenErrors pins the REST error body (OpenAI's shape with the
// request id) for each kind of failure a client meets first: no key, a
// forbidden route, a missing object, a wrong parameter, no route, a
// malformed body and a transport that is not configured.
func TestGoldenErrors(t *testing.T) {
	drv := &sandboxtest.Driver{New: goldenSandbox}
	e := newEnvOn(t, t.TempDir(), drv, nil)
	_, key := e.newKey("", computerCaps)
	e.do(key, "POST", "/v1/computers", nil)
	base := "/v1/computers/" + drv.Last().ID()
	checkGolden(t, "error_unauthenticated", http.StatusUnauthorized, e.do("", "GET", "/v1/computers", nil))
	runGolden(t, e, key, []goldenCase{
		{"error_forbidden", "GET", "/v1/admin/keys", nil, nil, 403},
		{"error_not_found", "GET", "/v1/computers/cmp_missing", nil, nil, 404},
		{"error_param", "GET", "/v1/audit?limit=0", nil, nil, 400},
		{"error_no_route", "GET", "/v1/nothing", nil, nil, 404},
		{"error_bad_json", "POST", base + "/exec", "{", nil, 400},
		{"error_unknown_field", "POST", base + "/exec", map[string]any{"command": "x", "bogus": 1}, nil, 400},
		{"error_exec_sse", "POST", base + "/exec", map[string]any{"command": "fail"}, map[string]string{"Accept": "text/event-stream"}, 200},
		{"error_no_gateway", "POST", "/v1/responses", map[string]any{"model": "m", "input": "hi"}, nil, 503},
	})
}

// TestGoldenAdmin pins the admin bodies (organisations and keys) and the
// usage and audit lists of an organisation that made and deleted one
// computer.
func TestGoldenAdmin(t *testing.T) {
	drv := &sandboxtest.Driver{New: goldenSandbox}
	e := newEnvOn(t, t.TempDir(), drv, nil)
	r := e.do(e.admin, "POST", "/v1/admin/orgs", map[string]any{"name": "acme", "allow_computer": true})
	checkGolden(t, "admin_org_create", http.StatusCreated, r)
	var org struct {
		ID string `json:"id"`
	}
	r.json(t, &org)
	checkGolden(t, "admin_org_list", http.StatusOK, e.do(e.admin, "GET", "/v1/admin/orgs", nil))
	r = e.do(e.admin, "POST", "/v1/admin/keys", map[string]any{"org_id": org.ID, "name": "k1", "capabilities": json.RawMessage(computerCaps)})
	checkGolden(t, "admin_key_create", http.StatusCreated, r)
	var k struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	r.json(t, &k)
	checkGolden(t, "admin_key_list", http.StatusOK, e.do(e.admin, "GET", "/v1/admin/keys?org_id="+org.ID, nil))

	c := e.do(k.Secret, "POST", "/v1/computers", nil)
	if c.code != http.StatusCreated {
		t.Fatalf("create: %s", c)
	}
	id := drv.Last().ID()
	if r := e.do(k.Secret, "DELETE", "/v1/computers/"+id, nil); r.code != http.StatusNoContent && r.code != http.StatusOK {
		t.Fatalf("delete: %s", r)
	}
	checkGolden(t, "computer_deleted", http.StatusOK, e.do(k.Secret, "GET", "/v1/computers/"+id, nil))
	checkGolden(t, "usage", http.StatusOK, e.do(k.Secret, "GET", "/v1/usage", nil))
	checkGolden(t, "audit", http.StatusOK, e.do(k.Secret, "GET", "/v1/audit", nil))

	r = e.do(e.admin, "DELETE", "/v1/admin/keys/"+k.Key.ID, nil)
	if r.code != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("revoke: %s", r)
	}
	checkGolden(t, "admin_key_list_revoked", http.StatusOK, e.do(e.admin, "GET", "/v1/admin/keys?org_id="+org.ID, nil))
}

// goldenUpstream asks for one code_interpreter call, then answers text.
func goldenUpstream(n int, req map[string]any) (int, any) {
	if n%2 == 1 {
		return 200, toolCallAnswer("code_interpreter", `{"code":"print(1+1)"}`)
	}
	return 200, chatAnswer(map[string]any{"role": "assistant", "content": "The answer is 2"})
}

// goldenPythonOK is a cell that prints and shows an image.
func goldenPythonOK(ctx context.Context, req sandbox.PythonRequest, on func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
	for _, o := range []sandbox.PythonOutput{
		{Output: kernel.Output{Type: "stream", Name: "stdout", Text: "2\n"}},
		{Output: kernel.Output{Type: "display_data", PNG: goldenPNG, Width: 1, Height: 1}},
	} {
		if on != nil {
			on(o)
		}
	}
	return sandbox.PythonResult{Status: "ok", Cells: []sandbox.CellResult{{Index: 0, Status: "ok", ExecutionCount: 1}}}, nil
}

// TestGoldenResponses pins the Responses gateway's response object (with a
// code_interpreter call run by the scripted sandbox and a message), the
// same response streamed (every event), a stored response read back, and
// the gateway's error body.
func TestGoldenResponses(t *testing.T) {
	drv := &sandboxtest.Driver{New: func(ctx context.Context, spec sandbox.Spec) (*sandboxtest.Sandbox, error) {
		sb, err := goldenSandbox(ctx, spec)
		sb.PythonFunc = goldenPythonOK
		return sb, err
	}}
	e := newEnvOn(t, t.TempDir(), drv, nil)
	e.withGateway(newScripted(t, goldenUpstream))
	_, key := e.newKey("", computerCaps)
	body := map[string]any{"model": "m", "input": "1+1?", "tools": ciTool, "include": []string{"code_interpreter_call.outputs"}}
	r := e.do(key, "POST", "/v1/responses", body)
	checkGolden(t, "responses_create", http.StatusOK, r)
	var out struct {
		ID string `json:"id"`
	}
	r.json(t, &out)
	e.waitDestroyed(key, out.ID)
	checkGolden(t, "responses_get", http.StatusOK, e.do(key, "GET", "/v1/responses/"+out.ID, nil))

	stream := map[string]any{"model": "m", "input": "1+1?", "tools": ciTool, "stream": true, "include": []string{"code_interpreter_call.outputs"}}
	r = e.do(key, "POST", "/v1/responses", stream)
	checkGolden(t, "responses_stream", http.StatusOK, r)
	runGolden(t, e, key, []goldenCase{
		{"responses_error_param", "POST", "/v1/responses", map[string]any{"model": "m", "input": "hi", "temperature": "hot"}, nil, 400},
		{"responses_error_not_found", "GET", "/v1/responses/resp_missing", nil, nil, 404},
	})
}

// goldenKernel is a kernel relay that answers nothing: the Kernel Gateway
// API's REST bodies need only its existence.
type goldenKernel struct {
	once sync.Once
	msgs chan sandbox.KernelMessage
}

func (k *goldenKernel) Send(ctx context.Context, m sandbox.KernelMessage) error { return nil }
func (k *goldenKernel) Messages() <-chan sandbox.KernelMessage                  { return k.msgs }
func (k *goldenKernel) Interrupt(ctx context.Context) error                     { return nil }
func (k *goldenKernel) Restart(ctx context.Context) error                       { return nil }
func (k *goldenKernel) Err() error                                              { return nil }
func (k *goldenKernel) Close(ctx context.Context) error {
	k.once.Do(func() { close(k.msgs) })
	return nil
}

// TestGoldenJupyter pins the Kernel Gateway API's bodies (kernel specs,
// a started kernel, the kernel list) and its error body, served on the
// REST listener as serve mounts it.
func TestGoldenJupyter(t *testing.T) {
	drv := &sandboxtest.Driver{New: func(ctx context.Context, spec sandbox.Spec) (*sandboxtest.Sandbox, error) {
		return &sandboxtest.Sandbox{OpenKernelFunc: func(ctx context.Context, start sandbox.KernelStart) (sandbox.Kernel, error) {
			return &goldenKernel{msgs: make(chan sandbox.KernelMessage)}, nil
		}}, nil
	}}
	e := newEnvOn(t, t.TempDir(), drv, nil)
	kgw := jupyter.New(jupyter.Config{}, e.mgr, e.gov)
	t.Cleanup(func() { kgw.Close(context.Background()) })
	e.rewire(func(o *httpapi.Options) { o.Mounts = append(o.Mounts, kgw) })
	_, key := e.newKey("", computerCaps)
	checkGolden(t, "jupyter_error_unauthenticated", http.StatusUnauthorized, e.do("", "GET", "/api/kernels", nil))
	runGolden(t, e, key, []goldenCase{
		{"jupyter_kernelspecs", "GET", "/api/kernelspecs", nil, nil, 200},
		{"jupyter_kernelspec", "GET", "/api/kernelspecs/python3", nil, nil, 200},
		{"jupyter_kernels_empty", "GET", "/api/kernels", nil, nil, 200},
		{"jupyter_kernel_start", "POST", "/api/kernels", map[string]any{"name": "python3"}, nil, 201},
		{"jupyter_kernels", "GET", "/api/kernels", nil, nil, 200},
		{"jupyter_error_not_found", "GET", "/api/kernels/00000000-0000-4000-8000-000000000000", nil, nil, 404},
		{"jupyter_error_bad_request", "POST", "/api/kernels", "{", nil, 400},
	})
}
