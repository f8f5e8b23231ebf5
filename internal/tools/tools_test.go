package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
)

// fake is a computer (sandboxtest's) whose exec and python are scripted,
// with an in-memory workspace holding files; run attaches it.
type fake struct {
	*sandboxtest.Sandbox
	ws       *sandboxtest.Workspace
	exec     func(req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error)
	files    map[string][]byte
	python   func(req sandbox.PythonRequest, on func(sandbox.PythonOutput)) (sandbox.PythonResult, error)
	lastExec sandbox.ExecRequest
}

// attach scripts the computer with f's functions and files, once.
func (f *fake) attach() *fake {
	if f.Sandbox != nil {
		return f
	}
	if f.files == nil {
		f.files = map[string][]byte{}
	}
	f.ws = sandboxtest.NewWorkspace(f.files)
	f.Sandbox = f.ws.Attach(&sandboxtest.Sandbox{})
	f.ExecFunc = func(_ context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
		f.lastExec = req
		return f.exec(req, sio)
	}
	if f.python != nil {
		f.PythonFunc = func(_ context.Context, req sandbox.PythonRequest, on func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
			return f.python(req, on)
		}
	}
	return f
}

// printing makes an exec that writes fixed streams.
func printing(stdout, stderr string, st sandbox.ExitStatus) func(sandbox.ExecRequest, sandbox.ExecIO) (sandbox.ExitStatus, error) {
	return func(_ sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
		// In chunks, as the agent sends them.
		for s := stdout; s != ""; {
			n := min(len(s), 64<<10)
			sio.Stdout.Write([]byte(s[:n]))
			s = s[n:]
		}
		sio.Stderr.Write([]byte(stderr))
		return st, nil
	}
}

func run(t *testing.T, f *fake, env Env, name, args string) Result {
	t.Helper()
	env.Sandbox = f.attach()
	res, err := Default().Run(context.Background(), env, name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	return res
}

func TestExecFormat(t *testing.T) {
	big := strings.Repeat("a", 2<<20)
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		st             sandbox.ExitStatus
		args           string
		limits         Limits
		want           string
	}{
		{name: "seed example", stdout: "3 files written\n", args: `{"command":"x"}`,
			want: "exit_code: 0\nstdout:\n3 files written\n\nstderr:\n"},
		{name: "exit code and stderr", stdout: "out", stderr: "boom\n", st: sandbox.ExitStatus{ExitCode: 2},
			args: `{"command":"x","timeout_seconds":null}`, want: "exit_code: 2\nstdout:\nout\nstderr:\nboom\n"},
		{name: "timeout", stdout: "partial\n", st: sandbox.ExitStatus{ExitCode: -1, Signal: 9, TimedOut: true},
			args: `{"command":"x","timeout_seconds":5}`, want: "timed out after 5 seconds\nstdout:\npartial\n\nstderr:\n"},
		{name: "timeout clamped to the limit", st: sandbox.ExitStatus{ExitCode: -1, TimedOut: true},
			args: `{"command":"x","timeout_seconds":500}`, limits: Limits{ExecTimeout: 7 * time.Second},
			want: "timed out after 7 seconds\nstdout:\n\nstderr:\n"},
		{name: "stream cut, small limit", stdout: "0123456789", args: `{"command":"x"}`, limits: Limits{MaxStreamBytes: 4},
			want: "exit_code: 0\nstdout:\n0123\nstderr:\n[output cut by the computer]"},
		{name: "invalid utf-8 replaced", stdout: "a\xffb", args: `{"command":"x"}`,
			want: "exit_code: 0\nstdout:\na\uFFFDb\nstderr:\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{exec: printing(tc.stdout, tc.stderr, tc.st)}
			res := run(t, f, Env{Limits: tc.limits}, ExecName, tc.args)
			if res.Output != tc.want {
				t.Fatalf("output\n%q\nwant\n%q", res.Output, tc.want)
			}
			if res.ExitCode == nil || *res.ExitCode != tc.st.ExitCode {
				t.Fatalf("exit code %v", res.ExitCode)
			}
		})
	}

	t.Run("1 MiB cut and 32 KiB answer", func(t *testing.T) {
		f := &fake{exec: printing(big, "err\n", sandbox.ExitStatus{})}
		res := run(t, f, Env{}, ExecName, `{"command":"yes"}`)
		if len(res.Output) > 32<<10 {
			t.Fatalf("answer is %d bytes", len(res.Output))
		}
		want := "\n[output cut by the computer]\n[truncated]"
		if !strings.HasSuffix(res.Output, want) || !strings.HasPrefix(res.Output, "exit_code: 0\nstdout:\naaaa") {
			t.Fatalf("answer ends %q", res.Output[len(res.Output)-80:])
		}
		if len(res.Output) != 32<<10 {
			t.Fatalf("answer is %d bytes, want exactly %d", len(res.Output), 32<<10)
		}
	})
	t.Run("1 MiB read, no cut marker under the limit", func(t *testing.T) {
		f := &fake{exec: printing(big[:1<<20], "", sandbox.ExitStatus{})}
		res := run(t, f, Env{}, ExecName, `{"command":"x"}`)
		if strings.Contains(res.Output, CutMarker) || !strings.HasSuffix(res.Output, "a\n[truncated]") {
			t.Fatalf("answer ends %q", res.Output[len(res.Output)-60:])
		}
	})
	t.Run("passes the command and timeout", func(t *testing.T) {
		f := &fake{exec: printing("", "", sandbox.ExitStatus{})}
		run(t, f, Env{Limits: Limits{ExecTimeout: 20 * time.Second}}, ExecName, `{"command":"echo hi","timeout_seconds":3}`)
		if f.lastExec.Command != "echo hi" || f.lastExec.Timeout != 3e9 {
			t.Fatalf("exec request %+v", f.lastExec)
		}
	})
	t.Run("process limit is a sentence", func(t *testing.T) {
		f := &fake{exec: func(sandbox.ExecRequest, sandbox.ExecIO) (sandbox.ExitStatus, error) {
			return sandbox.ExitStatus{}, sandbox.ErrProcLimit
		}}
		if res := run(t, f, Env{}, ExecName, `{"command":"x"}`); res.Output != ProcLimitSentence || !res.Failed {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("a gone computer is a Go error", func(t *testing.T) {
		f := &fake{exec: func(sandbox.ExecRequest, sandbox.ExecIO) (sandbox.ExitStatus, error) {
			return sandbox.ExitStatus{}, sandbox.ErrGone
		}}
		_, err := Default().Run(context.Background(), Env{Sandbox: f.attach()}, ExecName, json.RawMessage(`{"command":"x"}`))
		if !errors.Is(err, sandbox.ErrGone) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestTruncateUTF8(t *testing.T) {
	// "é" is 2 bytes, "€" 3, "𝄞" 4: every cut position must land on a boundary.
	for _, ch := range []string{"é", "€", "𝄞"} {
		for pad := range 4 {
			s := strings.Repeat("x", pad) + strings.Repeat(ch, 20<<10)
			out := Truncate(s, 32<<10)
			if !utf8.ValidString(out) {
				t.Fatalf("%q pad %d: invalid UTF-8 at the cut", ch, pad)
			}
			if len(out) > 32<<10 || !strings.HasSuffix(out, "\n[truncated]") {
				t.Fatalf("%q pad %d: %d bytes, ends %q", ch, pad, len(out), out[len(out)-20:])
			}
			body := strings.TrimSuffix(out, "\n[truncated]")
			if !strings.HasPrefix(s, body) || len(body) < 32<<10-len("\n[truncated]")-utf8.UTFMax {
				t.Fatalf("%q pad %d: body of %d bytes is not the longest prefix", ch, pad, len(body))
			}
		}
	}
	if got := Truncate("short", 32<<10); got != "short" {
		t.Fatalf("short text changed: %q", got)
	}
	if got := CutUTF8("a€", 3); got != "a" {
		t.Fatalf("CutUTF8 = %q", got)
	}
}

func TestWriteFile(t *testing.T) {
	for _, tc := range []struct{ args, want, path string }{
		{`{"path":"run.py","content":"print(1)\n"}`, "Wrote 9 bytes to /workspace/run.py.", "/workspace/run.py"},
		{`{"path":"a/../b/c.txt","content":""}`, "Wrote 0 bytes to /workspace/b/c.txt.", "/workspace/b/c.txt"},
		{`{"path":"/workspace/x","content":"é"}`, "Wrote 2 bytes to /workspace/x.", "/workspace/x"},
		{`"{\"path\":\"s.txt\",\"content\":\"hi\"}"`, "Wrote 2 bytes to /workspace/s.txt.", "/workspace/s.txt"},
		{`{"path":"../etc/passwd","content":"x"}`, "Path is outside the workspace: /etc/passwd", ""},
		{`{"path":"/etc/passwd","content":"x"}`, "Path is outside the workspace: /etc/passwd", ""},
		{`{"path":"/workspacex/a","content":"x"}`, "Path is outside the workspace: /workspacex/a", ""},
		{`{"path":"","content":"x"}`, "Invalid arguments: path must not be empty.", ""},
		{`{"path":"a"}`, "Invalid arguments: content is required.", ""},
		{`{"path":"a","content":null}`, "Invalid arguments: content is required.", ""},
		{`{"path":"a","content":"x","mode":1}`, `Invalid arguments: unknown field "mode".`, ""},
		{`{"path":5,"content":"x"}`, "Invalid arguments: path must be a string.", ""},
		{`{"path":"a","content":"x","path":"b"}`, `Invalid arguments: duplicate field "path".`, ""},
		{`[1]`, "Invalid arguments: expected a JSON object.", ""},
		{`{"path":"a","content":"x"} {}`, "Invalid arguments: expected a JSON object.", ""},
		{`not json`, "Invalid arguments: expected a JSON object.", ""},
	} {
		f := &fake{}
		res := run(t, f, Env{}, WriteFileName, tc.args)
		if res.Output != tc.want {
			t.Errorf("%s: %q, want %q", tc.args, res.Output, tc.want)
		}
		if tc.path != "" && (len(f.ws.Writes()) != 1 || f.ws.Writes()[0] != tc.path || res.Failed) {
			t.Errorf("%s: writes %v", tc.args, f.ws.Writes())
		}
		if tc.path == "" && (len(f.ws.Writes()) != 0 || !res.Failed) {
			t.Errorf("%s: wrote %v on an error", tc.args, f.ws.Writes())
		}
	}
	res := run(t, &fake{}, Env{Limits: Limits{MaxFileBytes: 3}}, WriteFileName, `{"path":"a","content":"abcd"}`)
	if res.Output != "File is too large: the limit is 3 bytes." {
		t.Fatalf("%q", res.Output)
	}
}

func TestReadFile(t *testing.T) {
	long := strings.Repeat("€", 12<<10) // 36 KiB
	f := &fake{files: map[string][]byte{
		"/workspace/a.txt":    []byte("hello\n"),
		"/workspace/bin.dat":  {1, 2, 0, 3},
		"/workspace/long.txt": []byte(long),
	}}
	for _, tc := range []struct {
		env        Env
		args, want string
	}{
		{Env{}, `{"path":"a.txt"}`, "hello\n"},
		{Env{}, `{"path":"/workspace/a.txt","export":null}`, "hello\n"},
		{Env{}, `{"path":"bin.dat","export":false}`, "[binary file: 4 bytes; read it again with export to keep it]"},
		{Env{}, `{"path":"bin.dat","export":true}`, "[binary output omitted: 4 bytes]"},
		{Env{Artifacts: true}, `{"path":"bin.dat","export":true}`, "Export is not available on this deployment yet."},
		{Env{}, `{"path":"nope.txt"}`, "File not found: /workspace/nope.txt"},
		{Env{}, `{"path":"nope.txt","export":true}`, "File not found: /workspace/nope.txt"},
		{Env{}, `{"path":"/tmp/x"}`, "Path is outside the workspace: /tmp/x"},
		{Env{}, `{}`, "Invalid arguments: path is required."},
		{Env{}, `{"path":"a.txt","export":"yes"}`, "Invalid arguments: export must be a boolean."},
	} {
		if got := run(t, f, tc.env, ReadFileName, tc.args).Output; got != tc.want {
			t.Errorf("%s: %q, want %q", tc.args, got, tc.want)
		}
	}
	out := run(t, f, Env{}, ReadFileName, `{"path":"long.txt"}`).Output
	if len(out) > 32<<10 || !utf8.ValidString(out) || !strings.HasSuffix(out, "€\n[truncated]") {
		t.Fatalf("long file: %d bytes, ends %q", len(out), out[len(out)-20:])
	}
	// A file beyond the read limit is cut even when what was read fits.
	out = run(t, f, Env{Limits: Limits{MaxStreamBytes: 3}}, ReadFileName, `{"path":"a.txt"}`).Output
	if out != "hel\n[truncated]" {
		t.Fatalf("beyond the read limit: %q", out)
	}
}

func TestPythonRendering(t *testing.T) {
	png := []byte("\x89PNG fake")
	f := &fake{python: func(req sandbox.PythonRequest, on func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
		if len(req.Cells) != 2 || req.Cells[0].Code != "print(1)" || req.Cwd != "/workspace/sub" || !req.Reset ||
			req.Timeout != 10e9 {
			return sandbox.PythonResult{}, fmt.Errorf("unexpected request %+v", req)
		}
		on(sandbox.PythonOutput{Cell: 0, Output: kernel.Output{Type: kernel.OutStream, Name: "stdout", Text: "1\n"}})
		on(sandbox.PythonOutput{Cell: 0, Output: kernel.Output{Type: kernel.OutDisplay, PNG: png, Width: 640, Height: 480, Text: "<Figure>"}})
		on(sandbox.PythonOutput{Cell: 0, Output: kernel.Output{Type: kernel.OutResult, Text: "42"}})
		on(sandbox.PythonOutput{Cell: 1, Output: kernel.Output{Type: kernel.OutError, EName: "ZeroDivisionError",
			EValue: "division by zero", Traceback: []string{"Traceback (most recent call last):", "  Cell In[2], line 1\n    1/0",
				"ZeroDivisionError: division by zero"}}})
		return sandbox.PythonResult{Status: "error", FailedCell: 1, Message: "Cell 1 failed: ZeroDivisionError: division by zero",
			Cells: []sandbox.CellResult{{Index: 0, Status: "ok"}, {Index: 1, Status: "error"}}}, nil
	}}
	res := run(t, f, Env{Limits: Limits{ExecTimeout: 10 * time.Second}}, PythonName,
		`{"cells":[{"code":"print(1)","title":null},{"code":"1/0"}],"timeout":60,"cwd":"sub","reset":true}`)
	want := "[cell 0: ok]\n1\n[image: 640x480 PNG]\n42\n[cell 1: error]\nZeroDivisionError: division by zero\n" +
		"Traceback (most recent call last):\n  Cell In[2], line 1\n    1/0\nCell 1 failed: ZeroDivisionError: division by zero"
	if res.Output != want {
		t.Fatalf("output\n%q\nwant\n%q", res.Output, want)
	}
	if len(res.Images) != 1 || !bytes.Equal(res.Images[0].PNG, png) || res.Images[0].Width != 640 || !res.Failed {
		t.Fatalf("images %+v", res.Images)
	}
	if len(res.Cells) != 2 || len(res.Cells[0].Outputs) != 3 {
		t.Fatalf("cells %+v", res.Cells)
	}
	for args, want := range map[string]string{
		`{"cells":[]}`:                          "Invalid arguments: cells must hold 1 to 64 cells.",
		`{"cells":[{"code":"1","extra":1}]}`:    `Invalid arguments: unknown field "extra".`,
		`{"cells":[{"title":"t"}]}`:             "Invalid arguments: cells[0].code is required.",
		`{"cells":[{"code":"1"}],"timeout":0}`:  "Invalid arguments: timeout must be 1 to 600 seconds.",
		`{"cells":[{"code":"1"}],"cwd":"/etc"}`: "Path is outside the workspace: /etc",
		`{"code":"1"}`:                          `Invalid arguments: unknown field "code".`,
	} {
		if got := run(t, f, Env{}, PythonName, args).Output; got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := Default()
	names := func(ts []*Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	for pattern, want := range map[string][]string{
		"builtin__computer_*":         {ExecName, WriteFileName, ReadFileName},
		"builtin__computer_exec":      {ExecName},
		"builtin__*":                  {ExecName, WriteFileName, ReadFileName},
		"*":                           {ExecName, WriteFileName, ReadFileName, PythonName, CodeInterpreterName},
		"python":                      {PythonName},
		"builtin__computer_":          nil,
		"builtin__computer_exec*":     {ExecName},
		"*_exec":                      nil,
		"builtin__*_exec":             nil,
		"builtin__computer_execution": nil,
	} {
		if got := names(r.Match(pattern)); !slices.Equal(got, want) {
			t.Errorf("Match(%q) = %v, want %v", pattern, got, want)
		}
	}
	if _, ok := r.Lookup("builtin__computer_*"); ok {
		t.Fatal("Lookup matched a pattern")
	}
	res, err := r.Run(context.Background(), Env{}, "nope", nil)
	if err != nil || res.Output != "Unknown tool: nope" || !res.Failed {
		t.Fatalf("unknown tool: %+v %v", res, err)
	}
	// Definitions: OpenAI function format, strict schemas.
	defs := r.Definitions(func(t *Tool) bool { return t.Name != PythonName && t.Name != CodeInterpreterName })
	if len(defs) != 3 {
		t.Fatalf("%d definitions", len(defs))
	}
	for _, d := range r.Definitions(nil) {
		if d.Type != "function" || !d.Function.Strict || d.Function.Description == "" {
			t.Fatalf("definition %+v", d)
		}
		checkStrict(t, d.Function.Name, d.Function.Parameters)
	}
}

// checkStrict checks OpenAI's strict mode: every object closed and every
// property required.
func checkStrict(t *testing.T, name string, raw json.RawMessage) {
	t.Helper()
	var s struct {
		Type                 any                        `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Items                json.RawMessage            `json:"items"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: schema is not JSON: %v", name, err)
	}
	if s.Type == "object" {
		if s.AdditionalProperties == nil || *s.AdditionalProperties {
			t.Fatalf("%s: additionalProperties must be false", name)
		}
		for p, sub := range s.Properties {
			if !slices.Contains(s.Required, p) {
				t.Fatalf("%s: property %s is not required", name, p)
			}
			checkStrict(t, name+"."+p, sub)
		}
	}
	if len(s.Items) > 0 {
		checkStrict(t, name+"[]", s.Items)
	}
}

func TestRunBatchInOrder(t *testing.T) {
	f := &fake{}
	f.exec = func(req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
		if _, ok := f.files["/workspace/run.sh"]; !ok {
			return sandbox.ExitStatus{ExitCode: 127}, nil
		}
		sio.Stdout.Write([]byte("ran\n"))
		return sandbox.ExitStatus{}, nil
	}
	out := Default().RunBatch(context.Background(), Env{Sandbox: f.attach()}, []Call{
		{Name: WriteFileName, Arguments: json.RawMessage(`{"path":"run.sh","content":"echo ran"}`)},
		{Name: "nope", Arguments: json.RawMessage(`{}`)},
		{Name: ExecName, Arguments: json.RawMessage(`"{\"command\":\"sh run.sh\"}"`)},
	})
	want := []string{"Wrote 8 bytes to /workspace/run.sh.", "Unknown tool: nope", "exit_code: 0\nstdout:\nran\n\nstderr:\n"}
	for i, r := range out {
		if r.Output != want[i] || r.Err != nil || r.Images == nil || r.Artifacts == nil {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	// An infrastructure failure stops the round.
	f.exec = func(sandbox.ExecRequest, sandbox.ExecIO) (sandbox.ExitStatus, error) {
		return sandbox.ExitStatus{}, sandbox.ErrGone
	}
	out = Default().RunBatch(context.Background(), Env{Sandbox: f.attach()}, []Call{
		{Name: ExecName, Arguments: json.RawMessage(`{"command":"x"}`)},
		{Name: WriteFileName, Arguments: json.RawMessage(`{"path":"later","content":""}`)},
	})
	if !errors.Is(out[0].Err, sandbox.ErrGone) || !errors.Is(out[1].Err, ErrNotRun) || out[1].Output != NotRunSentence {
		t.Fatalf("batch after failure: %+v", out)
	}
	if _, ok := f.files["/workspace/later"]; ok {
		t.Fatal("a call after an infrastructure failure ran")
	}
}

// TestCapSeconds: a count of seconds is seconds (not nanoseconds) against a
// time.Duration limit; unset and larger counts leave the limit.
func TestCapSeconds(t *testing.T) {
	for _, c := range []struct {
		limit   time.Duration
		seconds []int
		want    time.Duration
	}{
		{2 * time.Second, nil, 2 * time.Second},
		{300 * time.Second, []int{2}, 2 * time.Second},
		{2 * time.Second, []int{300}, 2 * time.Second},
		{300 * time.Second, []int{0, -1, 7, 20}, 7 * time.Second},
		{1500 * time.Millisecond, []int{1, 2}, time.Second},
		{time.Minute, []int{1 << 62}, time.Minute},
	} {
		if got := CapSeconds(c.limit, c.seconds...); got != c.want {
			t.Errorf("CapSeconds(%v, %v) = %v, want %v", c.limit, c.seconds, got, c.want)
		}
	}
}
