package linux_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// pyCall is a finished Python call with the outputs it streamed.
type pyCall struct {
	res  sandbox.PythonResult
	outs []sandbox.PythonOutput
	err  error
	took time.Duration
}

func pyCells(code ...string) []sandbox.PythonCell {
	cells := make([]sandbox.PythonCell, len(code))
	for i, c := range code {
		cells[i] = sandbox.PythonCell{Code: c}
	}
	return cells
}

// pyRunCtx runs a call; onOutput (optional) sees each output as it arrives.
func pyRunCtx(ctx context.Context, sb sandbox.Sandbox, req sandbox.PythonRequest, onOutput func(sandbox.PythonOutput)) pyCall {
	var c pyCall
	start := time.Now()
	c.res, c.err = sb.Python(ctx, req, func(o sandbox.PythonOutput) {
		c.outs = append(c.outs, o)
		if onOutput != nil {
			onOutput(o)
		}
	})
	c.took = time.Since(start)
	return c
}

// pyRun runs a call that must not fail at the agent level.
func pyRun(t testing.TB, sb sandbox.Sandbox, req sandbox.PythonRequest) pyCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := pyRunCtx(ctx, sb, req, nil)
	if c.err != nil {
		t.Fatalf("Python %q: %v", cellCodes(req), c.err)
	}
	return c
}

// pyOK runs cells that must all succeed.
func pyOK(t testing.TB, sb sandbox.Sandbox, code ...string) pyCall {
	t.Helper()
	c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells(code...)})
	if c.res.Status != "ok" {
		t.Fatalf("Python %q: %s: %s\noutputs: %s", code, c.res.Status, c.res.Message, c.summary())
	}
	return c
}

func cellCodes(req sandbox.PythonRequest) []string {
	var s []string
	for _, c := range req.Cells {
		s = append(s, c.Code)
	}
	return s
}

func (c pyCall) of(cell int, typ kernel.OutputType) []kernel.Output {
	var outs []kernel.Output
	for _, o := range c.outs {
		if o.Cell == cell && o.Output.Type == typ {
			outs = append(outs, o.Output)
		}
	}
	return outs
}

func (c pyCall) stdout(cell int) string {
	var b strings.Builder
	for _, o := range c.of(cell, kernel.OutStream) {
		if o.Name == "stdout" {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

// value is the text of the cell's execute_result.
func (c pyCall) value(cell int) string {
	if r := c.of(cell, kernel.OutResult); len(r) == 1 {
		return r[0].Text
	}
	return fmt.Sprintf("<no single result: %s>", c.summary())
}

func (c pyCall) summary() string {
	var parts []string
	for _, o := range c.outs {
		s := fmt.Sprintf("%d:%s", o.Cell, o.Output.Type)
		if t := o.Output.Text; t != "" {
			s += " " + strconv.Quote(clip(t, 200))
		}
		if o.Output.EName != "" {
			s += " " + o.Output.EName + ": " + clip(o.Output.EValue, 200)
		}
		if len(o.Output.PNG) > 0 {
			s += fmt.Sprintf(" png %d bytes", len(o.Output.PNG))
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("result %+v; outputs [%s]", c.res, strings.Join(parts, ", "))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func cellStatuses(res sandbox.PythonResult) []string {
	var s []string
	for _, c := range res.Cells {
		s = append(s, c.Status)
	}
	return s
}

// kernelProcs lists the pids of ipykernel processes in sb.
func kernelProcs(t testing.TB, sb sandbox.Sandbox) []string {
	t.Helper()
	out := mustSucceed(t, sb, `for d in /proc/[0-9]*; do tr '\0' ' ' < $d/cmdline 2>/dev/null | grep -q '^/usr/bin/python3 /tmp/cubicle-kernel-[^ /]*/launch.py -f ' && echo ${d#/proc/}; done; true`)
	return strings.Fields(out)
}

// agentOf finds, on the host, the agent of sb: the parent of its session
// kernel (found by its connection file, whose name is random).
func agentOf(t testing.TB, sb sandbox.Sandbox) int {
	t.Helper()
	file := strings.Trim(pyOK(t, sb, "from ipykernel.kernelapp import IPKernelApp\nIPKernelApp.instance().connection_file").value(0), "'")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("/launch.py\x00-f\x00"+file+"\x00")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pp := ppid(pid); pp > 0 {
			return pp
		}
	}
	t.Fatalf("no kernel process with connection file %s on the host", file)
	return 0
}

func countFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestPython exercises one computer's session kernel (and per_call kernels)
// through the Sandbox interface: state, failures, rich output, timeouts,
// interrupts, concurrency, preludes and controls.
func TestPython(t *testing.T) {
	t.Parallel()
	sb := newComputer(t, newDriver(t), nil)

	t.Run("StatePersists", func(t *testing.T) {
		c := pyOK(t, sb, "x = 41")
		t.Logf("first call (kernel start) took %v", c.took)
		if c.res.KernelRestarted || c.res.Message != "" {
			t.Errorf("first call: %+v", c.res)
		}
		c = pyOK(t, sb, "x + 1")
		if got := c.value(0); got != "42" {
			t.Fatalf("x + 1 = %s", got)
		}
		if c.res.Cells[0].ExecutionCount != 2 {
			t.Errorf("execution count %d, want 2", c.res.Cells[0].ExecutionCount)
		}
		c = pyOK(t, sb, "import os; print(os.getcwd(), os.getuid(), os.getgid())")
		if got := c.stdout(0); got != "/workspace 1000 1000\n" {
			t.Errorf("cwd and identity: %q", got)
		}
	})

	t.Run("FailingCellStopsTheRest", func(t *testing.T) {
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: []sandbox.PythonCell{
			{Code: "a = 1\nprint('one')"},
			{Code: "1/0", Title: "divide"},
			{Code: "b = 2\nprint('three')"},
		}})
		want := "Cell 2 (divide) failed: ZeroDivisionError: division by zero"
		if c.res.Status != "error" || c.res.FailedCell != 1 || c.res.Message != want ||
			!slices.Equal(cellStatuses(c.res), []string{"ok", "error", "skipped"}) {
			t.Fatalf("%s", c.summary())
		}
		if errs := c.of(1, kernel.OutError); len(errs) != 1 || errs[0].EName != "ZeroDivisionError" || len(errs[0].Traceback) == 0 {
			t.Errorf("error output: %+v", errs)
		}
		if strings.Contains(strings.Join(c.of(1, kernel.OutError)[0].Traceback, ""), "\x1b[") {
			t.Error("traceback has ANSI colours")
		}
		if c.stdout(0) != "one\n" || len(c.of(2, kernel.OutStream)) != 0 {
			t.Errorf("outputs: %s", c.summary())
		}
		// Earlier state persists; the skipped cell never ran.
		c = pyOK(t, sb, "a, 'b' in globals()")
		if got := c.value(0); got != "(1, False)" {
			t.Errorf("after the failure: %s", got)
		}
	})

	t.Run("MatplotlibOneImage", func(t *testing.T) {
		c := pyOK(t, sb,
			"import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(3, 2))\nplt.plot([1, 3, 2])\nplt.show()",
			"fig2, ax = plt.subplots(figsize=(2, 2)); ax.bar([1, 2], [3, 4]); fig2")
		for cell := 0; cell < 2; cell++ {
			var imgs []kernel.Output
			for _, o := range c.outs {
				if o.Cell == cell && len(o.Output.PNG) > 0 {
					imgs = append(imgs, o.Output)
				}
			}
			if len(imgs) != 1 {
				t.Fatalf("cell %d: %d images; %s", cell, len(imgs), c.summary())
			}
			img, err := png.Decode(bytes.NewReader(imgs[0].PNG))
			if err != nil {
				t.Fatalf("cell %d: PNG does not decode: %v", cell, err)
			}
			if b := img.Bounds(); b.Dx() != imgs[0].Width || b.Dy() != imgs[0].Height || b.Dx() < 100 {
				t.Errorf("cell %d: image %v, output says %dx%d", cell, b, imgs[0].Width, imgs[0].Height)
			}
		}
	})

	t.Run("DataFrame", func(t *testing.T) {
		c := pyOK(t, sb, "import pandas as pd\ndf = pd.DataFrame({'alpha': [1, 2, 3], 'beta_col': ['x', 'y', 'z']})\ndf")
		r := c.of(0, kernel.OutResult)
		if len(r) != 1 || (r[0].MIME != "text/html" && r[0].MIME != "text/plain" && r[0].MIME != "text/markdown") ||
			!strings.Contains(r[0].Text, "alpha") || !strings.Contains(r[0].Text, "beta_col") || strings.Contains(r[0].Text, "<table") {
			t.Fatalf("DataFrame: %s", c.summary())
		}
		t.Logf("DataFrame as %s:\n%s", r[0].MIME, r[0].Text)
	})

	t.Run("InputDoesNotHang", func(t *testing.T) {
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("name = input('name? ')", "print('not reached')"), Timeout: 20 * time.Second})
		if c.res.Status != "error" || c.res.FailedCell != 0 || !c.res.Cells[0].InputRequested || c.res.Cells[1].Status != "skipped" ||
			!strings.HasPrefix(c.res.Message, "Cell 1 failed: EOFError") || !strings.Contains(c.res.Message, "input() is not supported") {
			t.Fatalf("%s", c.summary())
		}
		if c.took > 5*time.Second {
			t.Errorf("took %v", c.took)
		}
		if in := c.of(0, kernel.OutInput); len(in) != 1 || in[0].Text != "name? " {
			t.Errorf("input request: %s", c.summary())
		}
	})

	timedOut := func(t *testing.T, c pyCall) {
		t.Helper()
		if c.res.Status != "cancelled" || !c.res.Cancelled || !c.res.TimedOut || c.res.Message != "Command timed out after 2 seconds" ||
			c.res.Cells[0].Status != "cancelled" || c.res.FailedCell != -1 {
			t.Fatalf("%s", c.summary())
		}
	}

	t.Run("TimeoutBusyLoop", func(t *testing.T) {
		pyOK(t, sb, "kept = 'yes'")
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("while True: pass", "print('skipped')"), Timeout: 2 * time.Second})
		timedOut(t, c)
		if c.res.KernelRestarted || c.took > 3500*time.Millisecond {
			t.Errorf("interrupt: restarted %v, took %v", c.res.KernelRestarted, c.took)
		}
		if c.res.Cells[1].Status != "skipped" {
			t.Errorf("cells %v", cellStatuses(c.res))
		}
		if got := pyOK(t, sb, "kept").value(0); got != "'yes'" {
			t.Errorf("state after interrupt: %s", got)
		}
	})

	t.Run("TimeoutSleepKeepsState", func(t *testing.T) {
		pyOK(t, sb, "y = 5")
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("import time\nprint('sleeping', flush=True)\ntime.sleep(100)"), Timeout: 2 * time.Second})
		timedOut(t, c)
		t.Logf("sleep interrupted: call took %v", c.took)
		if c.res.KernelRestarted || c.took > 3500*time.Millisecond {
			t.Errorf("restarted %v, took %v", c.res.KernelRestarted, c.took)
		}
		if c.stdout(0) != "sleeping\n" {
			t.Errorf("stdout %q", c.stdout(0))
		}
		if errs := c.of(0, kernel.OutError); len(errs) != 1 || errs[0].EName != "KeyboardInterrupt" {
			t.Errorf("interrupt not reported as a KeyboardInterrupt output: %s", c.summary())
		}
		if got := pyOK(t, sb, "y * 2").value(0); got != "10" {
			t.Errorf("state after interrupt: %s", got)
		}
	})

	t.Run("GILHoldingLoopRestarts", func(t *testing.T) {
		pyOK(t, sb, "z = 1")
		// sum's fast path over a range is a C loop that never checks for
		// signals (unlike the regex engine, which does).
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("sum(range(10**12))"), Timeout: 2 * time.Second})
		timedOut(t, c)
		t.Logf("GIL-holding loop: call took %v (2 s timeout, 2 s grace, restart)", c.took)
		if !c.res.KernelRestarted {
			t.Errorf("kernel not restarted: %+v", c.res)
		}
		c = pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("1 + 1", "z")})
		if c.value(0) != "2" || c.res.FailedCell != 1 || !strings.Contains(c.res.Message, "NameError") {
			t.Errorf("after restart: %s", c.summary())
		}
		if c.res.KernelRestarted {
			t.Errorf("the restart was reported by the call that caused it, not this one")
		}
		if n := len(kernelProcs(t, sb)); n != 1 {
			t.Errorf("%d kernel processes after the restart", n)
		}
	})

	t.Run("ManyLines", func(t *testing.T) {
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("for i in range(1000000):\n    print(i)"), Timeout: 60 * time.Second})
		t.Logf("1M lines: %v", c.took)
		if c.res.Status != "ok" {
			t.Fatalf("%s", c.summary())
		}
		out := c.stdout(0)
		marks := c.of(0, kernel.OutTruncated)
		if !c.res.Cells[0].Truncated || len(marks) != 1 || !strings.Contains(marks[0].Text, "1 MiB limit") {
			t.Fatalf("not cut with a marker: truncated %v, %d markers, %d bytes", c.res.Cells[0].Truncated, len(marks), len(out))
		}
		if last := c.outs[len(c.outs)-1].Output; last.Type != kernel.OutTruncated {
			t.Errorf("the marker is not last: %+v", last)
		}
		if len(out) > 1<<20 || len(out) < 1<<19 || !strings.HasSuffix(out, "\n") {
			t.Fatalf("%d bytes of stdout", len(out))
		}
		for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if l != strconv.Itoa(i) {
				t.Fatalf("line %d is %q", i, l)
			}
		}
		t.Logf("%d stream outputs, marker %q", len(c.of(0, kernel.OutStream)), marks[0].Text)
		// The marker counts everything dropped, not what was known when the
		// cap was reached: 1M lines are 6888890 bytes.
		if want := fmt.Sprintf("%d more bytes", 6888890-len(out)); !strings.Contains(marks[0].Text, want) {
			t.Errorf("marker %q, want %q", marks[0].Text, want)
		}
	})

	t.Run("ConcurrentCallsSerialized", func(t *testing.T) {
		pyOK(t, sb, "n = 0")
		const calls = 20
		var wg sync.WaitGroup
		results := make([]pyCall, calls)
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = pyRunCtx(context.Background(), sb, sandbox.PythonRequest{Cells: pyCells("n += 1\nimport time; time.sleep(0.01)\nn")}, nil)
			}()
		}
		wg.Wait()
		var got []int
		for _, c := range results {
			if c.err != nil || c.res.Status != "ok" {
				t.Fatalf("%v %s", c.err, c.summary())
			}
			v, err := strconv.Atoi(c.value(0))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		slices.Sort(got)
		for i, v := range got {
			if v != i+1 {
				t.Fatalf("values %v, want 1..%d each once", got, calls)
			}
		}
	})

	t.Run("PerCallFreshAndGone", func(t *testing.T) {
		pyOK(t, sb, "session_var = 1")
		before := kernelProcs(t, sb)
		c := pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Cells: pyCells(
			"import os\nfrom ipykernel.kernelapp import IPKernelApp\nprint(os.getpid(), IPKernelApp.instance().connection_file)",
			"'session_var' in globals()")})
		if c.res.Status != "ok" || c.value(1) != "False" || c.res.KernelRestarted {
			t.Fatalf("per_call: %s", c.summary())
		}
		f := strings.Fields(c.stdout(0))
		if len(f) != 2 || slices.Contains(before, f[0]) {
			t.Fatalf("per_call kernel: %q (session kernels %v)", c.stdout(0), before)
		}
		if after := kernelProcs(t, sb); !slices.Equal(after, before) {
			t.Errorf("kernel processes %v after per_call, %v before", after, before)
		}
		mustSucceed(t, sb, "test ! -e /proc/"+f[0]+" && test ! -e "+f[1]+" && test ! -e $(dirname "+f[1]+")")
		if got := pyOK(t, sb, "session_var").value(0); got != "1" {
			t.Errorf("session state after per_call: %s", got)
		}
		if n := strings.Count(mustSucceed(t, sb, "ls /tmp"), "cubicle-kernel-"); n != 1 {
			t.Errorf("%d connection directories in /tmp, want the session's", n)
		}
	})

	t.Run("NoLeaks", func(t *testing.T) {
		agent := agentOf(t, sb)
		before := countFDs(t, agent)
		for range 2 {
			if c := pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Cells: pyCells("1")}); c.value(0) != "1" {
				t.Fatal(c.summary())
			}
		}
		pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Cells: pyCells("import os; os.kill(os.getpid(), 9)")})
		pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Cells: pyCells("import time; time.sleep(10)"), Timeout: time.Second})
		deadline := time.Now().Add(3 * time.Second)
		for countFDs(t, agent) != before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if after := countFDs(t, agent); after != before {
			t.Errorf("agent has %d descriptors, %d before 4 per_call kernels", after, before)
		}
		if n := strings.Count(mustSucceed(t, sb, "ls /tmp"), "cubicle-kernel-"); n != 1 {
			t.Errorf("%d connection directories in /tmp", n)
		}
		if n := len(kernelProcs(t, sb)); n != 1 {
			t.Errorf("%d kernel processes", n)
		}
	})

	const prelude = "open('/workspace/prelude.log', 'a').write('ran\\n')\nP = 7"
	preludeRuns := func(t *testing.T) int {
		t.Helper()
		return strings.Count(mustSucceed(t, sb, "cat /workspace/prelude.log 2>/dev/null; true"), "ran")
	}

	t.Run("PreludeOncePerKernel", func(t *testing.T) {
		c := pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Prelude: prelude, Cells: pyCells("P")})
		if c.value(0) != "7" || preludeRuns(t) != 1 {
			t.Fatalf("per_call prelude: %d runs, %s", preludeRuns(t), c.summary())
		}
		// Reset restarts the session kernel, which runs the prelude once.
		c = pyRun(t, sb, sandbox.PythonRequest{Reset: true, Prelude: prelude, Cells: pyCells("P + 1", "'session_var' in globals()")})
		if c.res.Status != "ok" || c.value(0) != "8" || c.value(1) != "False" || !c.res.KernelRestarted {
			t.Fatalf("reset: %s", c.summary())
		}
		if got := pyOK(t, sb, "import os; os.getcwd()").value(0); got != "'/workspace'" {
			t.Errorf("cwd of the reset kernel: %s", got)
		}
		pyRun(t, sb, sandbox.PythonRequest{Prelude: prelude, Cells: pyCells("P")})
		pyOK(t, sb, "P")
		if n := preludeRuns(t); n != 2 {
			t.Fatalf("prelude ran %d times, want 2 (per_call, reset)", n)
		}
		// A prelude that fails is reported as such.
		c = pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Prelude: "import no_such_module_here", Cells: pyCells("1")})
		if c.res.Status != "error" || !strings.HasPrefix(c.res.Message, "The prelude failed: ModuleNotFoundError") || c.res.Cells[0].Status != "skipped" {
			t.Errorf("failing prelude: %s", c.summary())
		}
		// Warm-up: no cells, only a prelude (the kernel exists: nothing runs).
		c = pyRun(t, sb, sandbox.PythonRequest{Prelude: prelude})
		if c.res.Status != "ok" || preludeRuns(t) != 2 {
			t.Errorf("warm-up on a warm kernel: %d runs, %s", preludeRuns(t), c.summary())
		}
	})

	// started runs a call in the background and waits for its first output.
	started := func(t *testing.T, ctx context.Context, req sandbox.PythonRequest) <-chan pyCall {
		t.Helper()
		first := make(chan struct{})
		var once sync.Once
		done := make(chan pyCall, 1)
		go func() {
			done <- pyRunCtx(ctx, sb, req, func(sandbox.PythonOutput) { once.Do(func() { close(first) }) })
		}()
		select {
		case <-first:
		case c := <-done:
			t.Fatalf("ended before its first output: %s", c.summary())
		case <-time.After(30 * time.Second):
			t.Fatal("no output")
		}
		return done
	}
	wait := func(t *testing.T, done <-chan pyCall) pyCall {
		t.Helper()
		select {
		case c := <-done:
			if c.err != nil {
				t.Fatalf("Python: %v", c.err)
			}
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("the call did not end")
		}
		return pyCall{}
	}
	sleeper := sandbox.PythonRequest{Cells: pyCells("import time\nprint('go', flush=True)\ntime.sleep(60)", "print('skipped')"), Timeout: 60 * time.Second}

	t.Run("ControlInterrupt", func(t *testing.T) {
		pyOK(t, sb, "w = 'kept'")
		done := started(t, context.Background(), sleeper)
		// A call queued behind it can be cancelled before it starts.
		qctx, qcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		q := pyRunCtx(qctx, sb, sandbox.PythonRequest{Cells: pyCells("w = 'overwritten'")}, nil)
		qcancel()
		if q.err != nil || !q.res.Cancelled || q.res.Message != "The call was cancelled before it started." || q.took > 2*time.Second {
			t.Errorf("queued call: %v %s (took %v)", q.err, q.summary(), q.took)
		}
		start := time.Now()
		if err := sb.PythonControl(context.Background(), "interrupt"); err != nil {
			t.Fatal(err)
		}
		c := wait(t, done)
		t.Logf("interrupt control: call ended %v after it", time.Since(start))
		if c.res.Status != "error" || c.res.FailedCell != 0 || !strings.HasPrefix(c.res.Message, "Cell 1 failed: KeyboardInterrupt") || c.res.Cancelled {
			t.Fatalf("%s", c.summary())
		}
		if got := pyOK(t, sb, "w").value(0); got != "'kept'" {
			t.Errorf("state after interrupt: %s", got)
		}
		if err := sb.PythonControl(context.Background(), "interrupt"); err != nil {
			t.Errorf("interrupting an idle kernel: %v", err)
		}
		if err := sb.PythonControl(context.Background(), "explode"); err == nil {
			t.Error("unknown control accepted")
		}
	})

	t.Run("CancelContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := started(t, ctx, sleeper)
		cancel()
		c := wait(t, done)
		if c.res.Status != "cancelled" || !c.res.Cancelled || c.res.TimedOut || c.res.KernelRestarted ||
			c.res.Message != "The call was cancelled while cell 1 was running." || !slices.Equal(cellStatuses(c.res), []string{"cancelled", "skipped"}) {
			t.Fatalf("%s", c.summary())
		}
		if got := pyOK(t, sb, "w").value(0); got != "'kept'" {
			t.Errorf("state after cancel: %s", got)
		}
	})

	t.Run("ControlRestart", func(t *testing.T) {
		runs := preludeRuns(t)
		done := started(t, context.Background(), sleeper)
		start := time.Now()
		if err := sb.PythonControl(context.Background(), "restart"); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart control took %v", time.Since(start))
		c := wait(t, done)
		if c.res.Status != "cancelled" || !c.res.Cancelled || !strings.Contains(c.res.Message, "restarted") || c.res.Cells[0].Status != "cancelled" {
			t.Fatalf("%s", c.summary())
		}
		c = pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("P", "w")})
		if c.value(0) != "7" || c.res.FailedCell != 1 || c.res.KernelRestarted {
			t.Fatalf("after restart: %s", c.summary())
		}
		if n := preludeRuns(t); n != runs+1 {
			t.Errorf("prelude ran %d times in the restarted kernel", n-runs)
		}
		if n := len(kernelProcs(t, sb)); n != 1 {
			t.Errorf("%d kernel processes", n)
		}
	})

	t.Run("BadRequests", func(t *testing.T) {
		ctx := context.Background()
		if _, err := sb.Python(ctx, sandbox.PythonRequest{Mode: "forever", Cells: pyCells("1")}, nil); err == nil {
			t.Error("unknown mode accepted")
		}
		if _, err := sb.Python(ctx, sandbox.PythonRequest{Cwd: "/workspace/nope", Cells: pyCells("1")}, nil); err == nil {
			t.Error("missing cwd accepted")
		}
		mustSucceed(t, sb, "mkdir -p /workspace/sub")
		if got := pyOK(t, sb, "import os; os.getcwd()").value(0); got != "'/workspace'" {
			t.Errorf("cwd %s", got)
		}
		c := pyRun(t, sb, sandbox.PythonRequest{Cwd: "sub", Cells: pyCells("import os; os.getcwd()")})
		if c.value(0) != "'/workspace/sub'" {
			t.Errorf("cwd sub: %s", c.summary())
		}
		huge := strings.Repeat("x", 2<<20)
		if _, err := sb.Python(ctx, sandbox.PythonRequest{Cells: pyCells(huge)}, nil); err == nil {
			t.Error("a 2 MiB request was accepted")
		}
	})
}

// TestPythonHostileKernel: a kernel that breaks the wire protocol or dies
// costs at most its own session.
func TestPythonHostileKernel(t *testing.T) {
	t.Parallel()
	sb := newComputer(t, newDriver(t), nil)
	// A call without cells warms the session kernel up with the prelude.
	c := pyRun(t, sb, sandbox.PythonRequest{Prelude: "W = 3"})
	if c.res.Status != "ok" || len(c.outs) != 0 || len(kernelProcs(t, sb)) != 1 {
		t.Fatalf("warm-up: %s", c.summary())
	}
	t.Logf("warm-up took %v", c.took)
	if got := pyOK(t, sb, "v = 1\nW").value(0); got != "3" {
		t.Fatalf("after warm-up: %s", got)
	}

	t.Run("ForgedFrame", func(t *testing.T) {
		forge := `
import os, socket, struct, time
from ipykernel.kernelapp import IPKernelApp
port = IPKernelApp.instance().iopub_port
time.sleep(0.3)  # let iopub go quiet
` + testbin.ForgeHugeFrame("port") + `time.sleep(1)
print("wrote", n)
`
		before := kernelProcs(t, sb)
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells(forge, "print('skipped')")})
		t.Logf("%s", c.res.Message)
		if c.res.Status != "error" || c.res.FailedCell != 0 || c.res.Cells[1].Status != "skipped" ||
			!strings.Contains(c.res.Message, "broke the wire protocol") || !strings.Contains(c.res.Message, "4611686018427387904") {
			t.Fatalf("%s", c.summary())
		}
		if c.took > 5*time.Second {
			t.Errorf("took %v", c.took)
		}
		// The agent keeps serving, the hostile kernel is gone, and the
		// next call gets a fresh one.
		if out := mustSucceed(t, sb, "echo still here"); out != "still here\n" {
			t.Fatalf("exec after the forged frame: %q", out)
		}
		if after := kernelProcs(t, sb); len(after) != 0 {
			t.Errorf("kernel processes after the protocol error: %v (before: %v)", after, before)
		}
		c = pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("1 + 1", "v")})
		if c.value(0) != "2" || !c.res.KernelRestarted || c.res.FailedCell != 1 || !strings.Contains(c.res.Message, "earlier state is lost") {
			t.Fatalf("next call: %s", c.summary())
		}
	})

	t.Run("CrashRestartsOnceThenFails", func(t *testing.T) {
		kill := "import os\nprint('dying', flush=True)\nos.kill(os.getpid(), 9)"
		c := pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells(kill, "print('skipped')")})
		t.Logf("first crash: %s", c.res.Message)
		if c.res.Status != "error" || c.res.FailedCell != 0 || c.res.Cells[1].Status != "skipped" ||
			!strings.Contains(c.res.Message, "died (killed by SIGKILL)") || !strings.Contains(c.res.Message, "restarted by the next call") {
			t.Fatalf("%s", c.summary())
		}
		if c.took > 5*time.Second {
			t.Errorf("crash noticed after %v", c.took)
		}
		c = pyOK(t, sb, "1 + 1")
		t.Logf("after the crash: %s", c.res.Message)
		if c.value(0) != "2" || !c.res.KernelRestarted || !strings.Contains(c.res.Message, "state is lost") {
			t.Fatalf("restart after a crash: %s", c.summary())
		}
		// The second crash happens between calls (a thread kills the
		// kernel after the cell ended): the next call finds it dead.
		pyOK(t, sb, "import os, threading\nthreading.Timer(0.2, os.kill, (os.getpid(), 9)).start()")
		time.Sleep(500 * time.Millisecond)
		for range 2 {
			c = pyRun(t, sb, sandbox.PythonRequest{Cells: pyCells("1 + 1")})
			if c.res.Status != "error" || c.res.Message != "The Python kernel crashed twice and was not restarted again." ||
				c.res.Cells[0].Status != "skipped" || len(c.outs) != 0 {
				t.Fatalf("after the second crash: %s", c.summary())
			}
		}
		// per_call kernels are not the session's: they still work.
		if c := pyRun(t, sb, sandbox.PythonRequest{Mode: "per_call", Cells: pyCells("3 * 3")}); c.value(0) != "9" {
			t.Errorf("per_call while the session failed: %s", c.summary())
		}
		if err := sb.PythonControl(context.Background(), "restart"); err != nil {
			t.Fatal(err)
		}
		c = pyOK(t, sb, "1 + 1")
		if c.value(0) != "2" || c.res.KernelRestarted {
			t.Fatalf("after the restart control: %s", c.summary())
		}
		if n := len(kernelProcs(t, sb)); n != 1 {
			t.Errorf("%d kernel processes", n)
		}
	})
}

// BenchmarkPythonOnePlusOne measures a `1+1` round trip through
// Sandbox.Python on a warm session kernel.
func BenchmarkPythonOnePlusOne(b *testing.B) {
	sb := newComputer(b, newDriver(b), nil)
	pyOK(b, sb, "1 + 1")
	req := sandbox.PythonRequest{Cells: pyCells("1+1")}
	lat := make([]time.Duration, 0, 1024)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := sb.Python(context.Background(), req, nil)
		if err != nil || res.Status != "ok" {
			b.Fatalf("%v %+v", err, res)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
