package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const python = "/usr/bin/python3"

// testKernel is a real ipykernel process owned by the test.
type testKernel struct {
	cmd    *exec.Cmd
	ci     ConnInfo
	dir    string
	stderr *lockedBuffer
	exited chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func launchKernel(t testing.TB, transport string) *testKernel {
	t.Helper()
	dir, err := os.MkdirTemp("", "kernel-test-")
	if err != nil {
		t.Fatal(err)
	}
	var ci ConnInfo
	if transport == "ipc" {
		ci, err = NewConnInfo("127.0.0.1")
		ci.Transport = "ipc"
		ci.IP = filepath.Join(dir, "kernel-ipc")
	} else {
		ci, err = NewConnInfo("127.0.0.1")
	}
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "kernel.json")
	if err := ci.WriteConnectionFile(file); err != nil {
		t.Fatal(err)
	}
	k := &testKernel{ci: ci, dir: dir, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	k.cmd = exec.Command(python, "-m", "ipykernel_launcher", "-f", file,
		"--InteractiveShell.colors=NoColor", "--HistoryManager.enabled=False")
	k.cmd.Dir = dir
	k.cmd.Env = append(os.Environ(), "IPYTHONDIR="+filepath.Join(dir, "ipython"), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	k.cmd.Stdout = k.stderr
	k.cmd.Stderr = k.stderr
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = k.cmd.Wait(); close(k.exited) }()
	return k
}

func (k *testKernel) stop() {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.exited
	os.RemoveAll(k.dir)
}

func (k *testKernel) connect(t testing.TB, opts Options) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, k.ci, opts)
	if err != nil {
		t.Fatalf("Connect: %v\nkernel output:\n%s", err, k.stderr.String())
	}
	return c
}

// startKernel launches a kernel that is stopped when the test ends.
func startKernel(t testing.TB, opts Options) (*testKernel, *Client) {
	t.Helper()
	k := launchKernel(t, "tcp")
	t.Cleanup(k.stop)
	c := k.connect(t, opts)
	t.Cleanup(func() { c.Close() })
	return k, c
}

// The shared kernel serves the tests that leave it usable.
var shared struct {
	once sync.Once
	k    *testKernel
	c    *Client
	err  error
}

func sharedKernel(t *testing.T) *Client {
	t.Helper()
	shared.once.Do(func() {
		shared.k = launchKernel(t, "tcp")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shared.c, shared.err = Connect(ctx, shared.k.ci, Options{})
		if shared.err != nil {
			shared.err = fmt.Errorf("%w\nkernel output:\n%s", shared.err, shared.k.stderr.String())
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.Close()
	}
	if shared.k != nil {
		shared.k.stop()
	}
	os.Exit(code)
}

func run(t *testing.T, c *Client, code string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Execute(ctx, code, nil)
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	if !r.Completed {
		t.Fatalf("Execute(%q): not completed", code)
	}
	return r
}

func outputsOf(r Result, typ OutputType) []Output {
	var outs []Output
	for _, o := range r.Outputs {
		if o.Type == typ {
			outs = append(outs, o)
		}
	}
	return outs
}

func streamText(r Result, name string) string {
	var b strings.Builder
	for _, o := range r.Outputs {
		if o.Type == OutStream && o.Name == name {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

func TestBasics(t *testing.T) {
	c := sharedKernel(t)
	if c.Info().LanguageInfo.Name != "python" || !strings.HasPrefix(c.Info().ProtocolVersion, "5.") {
		t.Errorf("kernel info: %+v", c.Info())
	}

	r := run(t, c, "1+1")
	res := outputsOf(r, OutResult)
	if len(res) != 1 || res[0].Text != "2" || res[0].MIME != "text/plain" {
		t.Fatalf("1+1: outputs %+v", r.Outputs)
	}
	if r.Status != "ok" || r.ExecutionCount <= 0 || res[0].ExecutionCount != r.ExecutionCount || r.Failed() {
		t.Errorf("1+1: result %+v", r)
	}
	if r.ReplyMissing || r.IdleMissing {
		t.Errorf("1+1: completed without reply or idle: %+v", r)
	}

	run(t, c, "x = 41")
	r = run(t, c, "x + 1")
	if res := outputsOf(r, OutResult); len(res) != 1 || res[0].Text != "42" {
		t.Fatalf("state did not persist: %+v", r.Outputs)
	}

	var streamed []Output
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Execute(ctx, "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nprint('world')", func(o Output) { streamed = append(streamed, o) })
	if err != nil {
		t.Fatal(err)
	}
	if got := streamText(r, "stdout"); got != "hello\nworld\n" {
		t.Errorf("stdout = %q (outputs %+v)", got, r.Outputs)
	}
	if got := streamText(r, "stderr"); got != "oops\n" {
		t.Errorf("stderr = %q", got)
	}
	if len(streamed) == 0 {
		t.Error("OnOutput was never called")
	}

	r = run(t, c, "def f():\n    return 1/0\nf()")
	if r.Status != "error" || r.Error == nil || r.Error.EName != "ZeroDivisionError" || !r.Failed() {
		t.Fatalf("1/0: %+v", r)
	}
	errs := outputsOf(r, OutError)
	if len(errs) != 1 || len(errs[0].Traceback) == 0 {
		t.Fatalf("1/0: error outputs %+v", errs)
	}
	tb := strings.Join(errs[0].Traceback, "\n")
	if strings.Contains(tb, "\x1b") || !strings.Contains(tb, "ZeroDivisionError") || !strings.Contains(tb, "f()") {
		t.Errorf("traceback: %q", tb)
	}
	// The kernel is still fine after an error (stop_on_error=false).
	if r := run(t, c, "x"); outputsOf(r, OutResult)[0].Text != "41" {
		t.Errorf("after error: %+v", r.Outputs)
	}
}

func TestMatplotlibOneImage(t *testing.T) {
	c := sharedKernel(t)
	check := func(name string, r Result) {
		t.Helper()
		var imgs []Output
		for _, o := range r.Outputs {
			if o.PNG != nil {
				imgs = append(imgs, o)
			}
		}
		if len(imgs) != 1 {
			t.Fatalf("%s: %d images, want 1; outputs %+v", name, len(imgs), summarize(r.Outputs))
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(imgs[0].PNG))
		if err != nil || format != "png" || cfg.Width < 10 || cfg.Height < 10 {
			t.Fatalf("%s: image does not decode as PNG: %v %s %+v", name, err, format, cfg)
		}
		if cfg.Width != imgs[0].Width || cfg.Height != imgs[0].Height {
			t.Errorf("%s: size %dx%d, output says %dx%d", name, cfg.Width, cfg.Height, imgs[0].Width, imgs[0].Height)
		}
		if r.Failed() {
			t.Fatalf("%s: failed: %+v", name, r.Error)
		}
	}
	r := run(t, c, "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\nimport matplotlib.pyplot as plt\nplt.plot([1,2])\nplt.show()")
	check("plt.show()", r)

	r = run(t, c, "fig = plt.figure()\nplt.plot([1])\nfig")
	check("figure as last expression", r)
	if r.Duplicates != 1 {
		t.Errorf("figure as last expression: %d duplicates dropped, want 1 (outputs %+v)", r.Duplicates, summarize(r.Outputs))
	}
}

func summarize(outs []Output) []string {
	var s []string
	for _, o := range outs {
		d := string(o.Type) + ":" + clip(o.Text, 60)
		if o.PNG != nil {
			d += fmt.Sprintf(" [png %d bytes]", len(o.PNG))
		}
		s = append(s, d)
	}
	return s
}

func TestDataFrame(t *testing.T) {
	c := sharedKernel(t)
	r := run(t, c, "import pandas as pd\ndf = pd.DataFrame({'alpha': [1, 2], 'beta': ['x', 'y|z']})\ndf")
	res := outputsOf(r, OutResult)
	if len(res) != 1 {
		t.Fatalf("outputs %+v", r.Outputs)
	}
	// text/plain is preferred over text/html.
	if res[0].MIME != "text/plain" || !strings.Contains(res[0].Text, "alpha") || !strings.Contains(res[0].Text, "beta") {
		t.Fatalf("DataFrame: %+v", res[0])
	}
	if !slices.Contains(res[0].Omitted, "text/html") {
		t.Errorf("omitted = %v, want text/html listed", res[0].Omitted)
	}

	// HTML only → converted to a markdown table.
	r = run(t, c, "from IPython.display import HTML, display\ndisplay(HTML(df.to_html()))")
	d := outputsOf(r, OutDisplay)
	if len(d) != 1 || d[0].MIME != "text/html" {
		t.Fatalf("HTML display: %+v", r.Outputs)
	}
	want := "|  | alpha | beta |\n| --- | --- | --- |\n| 0 | 1 | x |\n| 1 | 2 | y\\|z |"
	if d[0].Text != want {
		t.Errorf("markdown table:\n%s\nwant:\n%s", d[0].Text, want)
	}

	// Markdown wins over everything; JSON is kept structured.
	r = run(t, c, "from IPython.display import Markdown, JSON\ndisplay(Markdown('# Title'))\ndisplay(JSON({'a': [1, 2]}))")
	d = outputsOf(r, OutDisplay)
	if len(d) != 2 || d[0].MIME != "text/markdown" || d[0].Text != "# Title" || string(d[1].JSON) != `{"a":[1,2]}` {
		t.Errorf("markdown/json: %+v", d)
	}
}

func TestInputDoesNotHang(t *testing.T) {
	c := sharedKernel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	r, err := c.Execute(ctx, "name = input('your name? ')\nprint('unreachable')", nil)
	if err != nil {
		t.Fatalf("input(): %v after %v", err, time.Since(start))
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("input() took %v", el)
	}
	if !r.InputRequested || !r.Failed() || r.Error == nil || r.Error.EName != "EOFError" {
		t.Fatalf("input(): %+v", r)
	}
	in := outputsOf(r, OutInput)
	if len(in) != 1 || in[0].Text != "your name? " {
		t.Errorf("input outputs: %+v", r.Outputs)
	}
	if strings.Contains(streamText(r, "stdout"), "unreachable") {
		t.Error("the cell went on after input()")
	}
	// A loop that swallows EOF must not spin forever on our answers either:
	// it ends when the loop does.
	r = run(t, c, "n = 0\nwhile n < 3:\n    try:\n        input()\n    except EOFError:\n        n += 1\nprint(n)")
	if got := streamText(r, "stdout"); got != "3\n" || !r.InputRequested {
		t.Errorf("EOF loop: %q %+v", got, r)
	}
}

func TestInterrupt(t *testing.T) {
	k, c := startKernel(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := c.Execute(ctx, "import time\nprint('sleeping', flush=True)\ntime.sleep(100)", nil)
	if !errors.Is(err, context.DeadlineExceeded) || !r.Cancelled || r.Completed {
		t.Fatalf("Execute: err %v, result %+v", err, r)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Execute returned after %v", el)
	}
	if err := k.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	res, err := c.WaitIdle(wctx)
	if err != nil || len(res) != 1 {
		t.Fatalf("WaitIdle: %v %d", err, len(res))
	}
	t.Logf("idle %v after SIGINT", time.Since(start)-300*time.Millisecond)
	fin := res[0]
	if !fin.Completed || !fin.Cancelled || fin.Error == nil || fin.Error.EName != "KeyboardInterrupt" {
		t.Fatalf("after interrupt: %+v", fin)
	}
	if got := streamText(fin, "stdout"); got != "sleeping\n" {
		t.Errorf("stdout %q", got)
	}
	if res, err := c.WaitIdle(wctx); err != nil || len(res) != 0 {
		t.Errorf("second WaitIdle: %v %v", res, err)
	}
	r = run(t, c, "1+1")
	if res := outputsOf(r, OutResult); len(res) != 1 || res[0].Text != "2" {
		t.Fatalf("after interrupt, 1+1: %+v", r.Outputs)
	}
}

func TestKernelDies(t *testing.T) {
	k, c := startKernel(t, Options{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Execute(ctx, "import time\ntime.sleep(30)", nil)
	if !errors.Is(err, ErrDisconnected) {
		t.Fatalf("Execute: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("noticed after %v", el)
	}
	t.Log(err)
	if _, err := c.Execute(ctx, "1+1", nil); !errors.Is(err, ErrDisconnected) || !errors.Is(c.Err(), ErrDisconnected) {
		t.Errorf("after death: %v / %v", err, c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed")
	}
}

func TestManyLines(t *testing.T) {
	c := sharedKernel(t)
	const n = 100000
	code := fmt.Sprintf("for i in range(%d):\n    print(i)", n)

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	r := run(t, c, code)
	out := streamText(r, "stdout")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n || r.Truncated {
		t.Fatalf("%d lines, truncated %v", len(lines), r.Truncated)
	}
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
	if s := outputsOf(r, OutStream); len(s) != 1 {
		t.Errorf("stream chunks not merged: %d outputs", len(s))
	}

	// With a 64 KiB cap: an in-order prefix, cut at a line, then the marker.
	const limit = 64 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var streamedBytes int
	r, err := c.Run(ctx, Request{Code: code, MaxOutputBytes: limit, OnOutput: func(o Output) {
		streamedBytes += len(o.Text)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Outputs) != 2 || r.Outputs[1].Type != OutTruncated {
		t.Fatalf("capped: %v", summarize(r.Outputs))
	}
	out = r.Outputs[0].Text
	if len(out) > limit || len(out) < limit/2 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("capped output of %d bytes", len(out))
	}
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l != strconv.Itoa(i) {
			t.Fatalf("capped line %d is %q", i, l)
		}
	}
	if !strings.Contains(r.Outputs[1].Text, "64 KiB limit") || streamedBytes > limit+1024 {
		t.Errorf("marker %q, streamed %d bytes", r.Outputs[1].Text, streamedBytes)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("heap in use: %d KiB before, %d KiB after", before.HeapInuse>>10, after.HeapInuse>>10)
}

func TestClearOutputAndUpdate(t *testing.T) {
	c := sharedKernel(t)
	r := run(t, c, "from IPython.display import clear_output, display\nprint('a')\nprint('b')\nclear_output()\nprint('c')")
	if len(r.Outputs) != 2 || r.Outputs[0].Type != OutClear || !strings.Contains(r.Outputs[0].Text, "1 earlier") || r.Outputs[1].Text != "c\n" {
		t.Errorf("clear_output: %v", summarize(r.Outputs))
	}
	r = run(t, c, "print('x')\nclear_output(wait=True)\nprint('y')")
	if len(r.Outputs) != 2 || r.Outputs[1].Text != "y\n" {
		t.Errorf("clear_output(wait=True): %v", summarize(r.Outputs))
	}
	r = run(t, c, "h = display('first', display_id=True)\nh.update('second')")
	d := outputsOf(r, OutDisplay)
	if len(d) != 1 || d[0].Text != "'second'" {
		t.Errorf("update_display_data: %v", summarize(r.Outputs))
	}
}

func TestIPCTransport(t *testing.T) {
	k := launchKernel(t, "ipc")
	defer k.stop()
	c := k.connect(t, Options{})
	defer c.Close()
	r := run(t, c, "6*7")
	if res := outputsOf(r, OutResult); len(res) != 1 || res[0].Text != "42" {
		t.Fatalf("ipc: %+v", r.Outputs)
	}
}

// BenchmarkExecuteOnePlusOne measures the `1+1` round trip: execute_request
// sent to execute_reply and idle received.
func BenchmarkExecuteOnePlusOne(b *testing.B) {
	k := launchKernel(b, "tcp")
	defer k.stop()
	c := k.connect(b, Options{})
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Execute(ctx, "1+1", nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		r, err := c.Execute(ctx, "1+1", nil)
		// (After 1000 results IPython warns on stderr that its Out cache is full.)
		if res := outputsOf(r, OutResult); err != nil || len(res) != 1 || res[0].Text != "2" {
			b.Fatalf("%v %+v", err, r)
		}
	}
}
