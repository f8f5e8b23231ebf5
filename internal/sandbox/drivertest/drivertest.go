package drivertest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Options says what of the contract the driver under test can show here.
type Options struct {
	// Python: the computers have /usr/bin/python3 with ipykernel (Python
	// and Kernels are tested).
	Python bool
	// MemoryEnforced: something enforces Spec.MemoryBytes (a cgroup); a
	// process allocating past it is OOM-killed and reported so.
	MemoryEnforced bool
	// Spec adjusts the spec of every computer the suite creates (nil:
	// the default limits with a 64 MiB disk).
	Spec func(*sandbox.Spec)
}

// Run runs the contract against newDriver's driver: one computer for the
// calls that leave it usable, fresh ones for memory and destroy.
func Run(t *testing.T, newDriver func(t *testing.T) sandbox.Driver, opts Options) {
	d := newDriver(t)
	sb := start(t, d, opts, nil)
	t.Run("Identity", func(t *testing.T) { testIdentity(t, sb) })
	t.Run("Exec", func(t *testing.T) { testExec(t, sb) })
	t.Run("ExecTimeout", func(t *testing.T) { testExecTimeout(t, sb) })
	t.Run("Files", func(t *testing.T) { testFiles(t, sb) })
	t.Run("FilesErrors", func(t *testing.T) { testFilesErrors(t, sb) })
	t.Run("Python", func(t *testing.T) {
		if !opts.Python {
			t.Skip("the driver's computers here have no Python (Options.Python)")
		}
		testPython(t, sb)
	})
	t.Run("Kernel", func(t *testing.T) {
		if !opts.Python {
			t.Skip("the driver's computers here have no Python (Options.Python)")
		}
		testKernel(t, sb)
	})
	t.Run("Memory", func(t *testing.T) {
		if !opts.MemoryEnforced {
			t.Skip("nothing enforces a memory limit here (Options.MemoryEnforced)")
		}
		testMemory(t, d, opts)
	})
	t.Run("Destroy", func(t *testing.T) { testDestroy(t, d, opts) })
}

// spec is the spec of the suite's computers.
func spec(opts Options, tweak func(*sandbox.Spec)) sandbox.Spec {
	s := sandbox.DefaultSpec()
	s.DiskBytes = 64 << 20
	if opts.Spec != nil {
		opts.Spec(&s)
	}
	if tweak != nil {
		tweak(&s)
	}
	return s
}

// start creates a computer destroyed when the test ends.
func start(t *testing.T, d sandbox.Driver, opts Options, tweak func(*sandbox.Spec)) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Create(ctx, spec(opts, tweak))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return sb
}

// result is a finished process and its output.
type result struct {
	sandbox.ExitStatus
	Stdout, Stderr string
}

func run(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest, stdin string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	sio := sandbox.ExecIO{Stdout: &out, Stderr: &errb}
	if stdin != "" {
		sio.Stdin = strings.NewReader(stdin)
	}
	st, err := sb.Exec(ctx, req, sio)
	if err != nil {
		t.Fatalf("Exec %q: %v", req.Command, err)
	}
	return result{st, out.String(), errb.String()}
}

func testIdentity(t *testing.T, sb sandbox.Sandbox) {
	if !strings.HasPrefix(sb.ID(), "cmp_") {
		t.Errorf("ID %q, want cmp_…", sb.ID())
	}
	if sb.Spec().MemoryBytes == 0 || sb.Spec().DiskBytes == 0 {
		t.Errorf("Spec %+v lost its limits", sb.Spec())
	}
	select {
	case <-sb.Done():
		t.Fatalf("Done is closed on a running computer (%s)", sb.ExitReason())
	default:
	}
}

func testExec(t *testing.T, sb sandbox.Sandbox) {
	r := run(t, sb, sandbox.ExecRequest{Command: "echo out; echo err >&2; exit 3"}, "")
	if r.ExitCode != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.TimedOut {
		t.Errorf("exit 3: %+v stdout %q stderr %q", r.ExitStatus, r.Stdout, r.Stderr)
	}
	r = run(t, sb, sandbox.ExecRequest{Argv: []string{"tr", "a-z", "A-Z"}}, "hello\n")
	if r.ExitCode != 0 || r.Stdout != "HELLO\n" {
		t.Errorf("stdin through tr: %+v stdout %q stderr %q", r.ExitStatus, r.Stdout, r.Stderr)
	}
	r = run(t, sb, sandbox.ExecRequest{Command: "id -u; pwd; echo $CUBICLE_T", Env: []string{"CUBICLE_T=set"}}, "")
	if lines := strings.Fields(r.Stdout); len(lines) != 3 || lines[0] == "0" || lines[1] != "/workspace" || lines[2] != "set" {
		t.Errorf("id -u; pwd; env: %q (want a non-root uid, /workspace, the variable)", r.Stdout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/no/such/program"}}, sandbox.ExecIO{}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a missing program: %v, want ErrNotFound", err)
	}
}

func testExecTimeout(t *testing.T, sb sandbox.Sandbox) {
	begin := time.Now()
	r := run(t, sb, sandbox.ExecRequest{Command: "sleep 60 & sleep 60", Timeout: 500 * time.Millisecond}, "")
	if !r.TimedOut || r.ExitCode != -1 {
		t.Errorf("sleep past its timeout: %+v, want TimedOut and killed", r.ExitStatus)
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("a 500 ms timeout took %v", d)
	}
}

func testFiles(t *testing.T, sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "dir/note.txt", Mode: 0o644, Parents: true}, strings.NewReader("contract\n"))
	if err != nil || w.Path != "/workspace/dir/note.txt" || w.Bytes != 9 {
		t.Fatalf("WriteFile: %+v %v", w, err)
	}
	var buf bytes.Buffer
	end, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "/workspace/dir/note.txt", Limit: 1 << 20}, &buf)
	if err != nil || buf.String() != "contract\n" || end.Size != 9 || end.Truncated {
		t.Errorf("ReadFile: %q %+v %v", buf.String(), end, err)
	}
	fi, err := sb.Stat(ctx, "dir/note.txt")
	if err != nil || fi.Type != "file" || fi.Size != 9 || fi.Name != "note.txt" {
		t.Errorf("Stat: %+v %v", fi, err)
	}
	ls, err := sb.List(ctx, "dir")
	if err != nil || len(ls.Entries) != 1 || ls.Entries[0].Name != "note.txt" {
		t.Errorf("List: %+v %v", ls, err)
	}
	// Processes see the same workspace, and what they write is read back.
	r := run(t, sb, sandbox.ExecRequest{Command: "cat dir/note.txt && echo made > dir/made.txt"}, "")
	if r.ExitCode != 0 || r.Stdout != "contract\n" {
		t.Errorf("cat of an uploaded file: %+v %q %q", r.ExitStatus, r.Stdout, r.Stderr)
	}
	buf.Reset()
	if _, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "dir/made.txt", Limit: 1 << 20}, &buf); err != nil || buf.String() != "made\n" {
		t.Errorf("ReadFile of a process's file: %q %v", buf.String(), err)
	}
	if err := sb.Remove(ctx, "dir", true); err != nil {
		t.Errorf("Remove: %v", err)
	}
}

func testFilesErrors(t *testing.T, sb sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "missing", Limit: 10}, &bytes.Buffer{}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("read a missing file: %v, want ErrNotFound", err)
	}
	for _, p := range []string{"../etc/passwd", "/etc/passwd"} {
		if _, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: p, Mode: 0o644}, strings.NewReader("x")); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("write %s: %v, want ErrPathEscape", p, err)
		}
	}
	run(t, sb, sandbox.ExecRequest{Command: "ln -sf /etc/hostname link"}, "")
	if _, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "link", Limit: 1 << 20}, &bytes.Buffer{}); err == nil {
		t.Errorf("read through a symlink out of the workspace succeeded")
	}
}

func testDestroy(t *testing.T, d sandbox.Driver, opts Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := d.Create(ctx, spec(opts, nil))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if r := run(t, sb, sandbox.ExecRequest{Command: "echo alive"}, ""); r.Stdout != "alive\n" {
		t.Fatalf("exec before destroy: %+v %q", r.ExitStatus, r.Stdout)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if done := sb.Done(); done != nil {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Done not closed 30 s after Destroy")
		}
		if sb.ExitReason() == "" {
			t.Error("no ExitReason once Done closed")
		}
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}, sandbox.ExecIO{}); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Exec after Destroy: %v, want ErrGone", err)
	}
	if _, err := sb.Stat(ctx, "."); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Stat after Destroy: %v, want ErrGone", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("a second Destroy: %v", err)
	}
}
