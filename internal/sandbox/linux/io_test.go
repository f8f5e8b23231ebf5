package linux_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// ioExec runs req with a deadline and returns the status, output and how
// long it took.
func ioExec(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest, stdin []byte, limit time.Duration) (sandbox.ExitStatus, string, string, time.Duration, error) {
	t.Helper()
	var out, errb bytes.Buffer
	sio := sandbox.ExecIO{Stdout: &out, Stderr: &errb}
	if stdin != nil {
		sio.Stdin = bytes.NewReader(stdin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	st, err := sb.Exec(ctx, req, sio)
	d := time.Since(start)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec %q %v did not finish within %v", req.Command, req.Argv, limit)
	}
	return st, out.String(), errb.String(), d, err
}

func TestStdinDelivered(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	in := fileRandom(t, 1<<20)
	want := sha256.Sum256(in)

	h := sha256.New()
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"cat"}}, sandbox.ExecIO{
		Stdin:  bytes.NewReader(in),
		Stdout: ioWriterFunc(func(p []byte) { n.Add(int64(len(p))); h.Write(p) }),
	})
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("cat of 1 MiB: %+v, %v (after echoing %d bytes)", st, err, n.Load())
	}
	if n.Load() != int64(len(in)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("cat echoed %d bytes with sha256 %x, want %d bytes with %x", n.Load(), h.Sum(nil), len(in), want)
	}
	// The process sees EOF after the last byte, and the hash agrees inside.
	st, out, _, _, err := ioExec(t, sb, sandbox.ExecRequest{Command: "sha256sum | cut -d' ' -f1"}, in, 15*time.Second)
	if err != nil || st.ExitCode != 0 || strings.TrimSpace(out) != fmt.Sprintf("%x", want) {
		t.Fatalf("sha256sum inside: %q, %+v, %v", out, st, err)
	}
	// Empty stdin is EOF at once.
	st, out, _, _, err = ioExec(t, sb, sandbox.ExecRequest{Command: "wc -c"}, []byte{}, 10*time.Second)
	if err != nil || strings.TrimSpace(out) != "0" {
		t.Fatalf("wc -c of empty stdin: %q, %+v, %v", out, st, err)
	}
	// No stdin is /dev/null.
	if got := mustSucceed(t, sb, "readlink /proc/self/fd/0; wc -c"); got != "/dev/null\n0\n" {
		t.Fatalf("without stdin: %q", got)
	}
}

type ioWriterFunc func([]byte)

func (f ioWriterFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func TestStdinNotReadDoesNotHang(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	big := make([]byte, 8<<20) // far more than a pipe holds

	st, _, _, d, err := ioExec(t, sb, sandbox.ExecRequest{Command: "sleep 0.2"}, big, 20*time.Second)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("sleep with unread stdin: %+v, %v", st, err)
	}
	if d > 5*time.Second {
		t.Errorf("sleep 0.2 with 8 MiB of unread stdin took %v", d)
	}
	// A process that closes stdin at once.
	st, out, _, _, err := ioExec(t, sb, sandbox.ExecRequest{Command: "exec 0<&-; echo closed"}, big, 20*time.Second)
	if err != nil || out != "closed\n" {
		t.Errorf("closed stdin: out %q, %+v, %v", out, st, err)
	}
	// The agent is not wedged: the next processes work, with and without stdin.
	if got := mustSucceed(t, sb, "echo ok"); got != "ok\n" {
		t.Fatalf("next exec: %q", got)
	}
	// A reader that stops early.
	st, out, _, d, err = ioExec(t, sb, sandbox.ExecRequest{Command: "head -c 10 | wc -c"}, big, 10*time.Second)
	if err != nil || st.ExitCode != 0 || strings.TrimSpace(out) != "10" || d > 5*time.Second {
		t.Errorf("head -c 10: out %q, %+v, %v, took %v", out, st, err, d)
	}
	st, out, _, _, err = ioExec(t, sb, sandbox.ExecRequest{Argv: []string{"cat"}}, []byte("again"), 10*time.Second)
	if err != nil || out != "again" {
		t.Fatalf("cat after: %q, %+v, %v", out, st, err)
	}
}

func TestIOStdoutStderrSeparated(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	st, out, errOut, _, err := ioExec(t, sb, sandbox.ExecRequest{
		Command: `i=1; while [ $i -le 2000 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done; exit 3`,
	}, nil, time.Minute)
	if err != nil || st.ExitCode != 3 {
		t.Fatalf("%+v, %v", st, err)
	}
	var wantOut, wantErr strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&wantOut, "o%d\n", i)
		fmt.Fprintf(&wantErr, "e%d\n", i)
	}
	if out != wantOut.String() {
		t.Errorf("stdout (%d bytes) is not exactly o1..o2000 (%d bytes)", len(out), wantOut.Len())
	}
	if errOut != wantErr.String() {
		t.Errorf("stderr (%d bytes) is not exactly e1..e2000 (%d bytes)", len(errOut), wantErr.Len())
	}
	// Binary output, NUL bytes included, passes unchanged.
	_, out, _, _, err = ioExec(t, sb, sandbox.ExecRequest{Command: `printf 'a\000b\377\n'`}, nil, 10*time.Second)
	if err != nil || out != "a\x00b\xff\n" {
		t.Errorf("binary output: %q, %v", out, err)
	}
}

func TestEnvAndCwd(t *testing.T) {
	sb := newComputer(t, newDriver(t), func(s *sandbox.Spec) { s.Env = []string{"SPEC_VAR=from-spec", "FOO=spec"} })
	ctx := fileCtx(t)
	if err := sb.Mkdir(ctx, "sub", false); err != nil {
		t.Fatal(err)
	}
	st, out, _, _, err := ioExec(t, sb, sandbox.ExecRequest{
		Command: `echo "$FOO"; pwd; echo "$PWD"; echo "$HOME"; echo "$SPEC_VAR"; echo "$DUP"; echo "${BAD-unset}"`,
		Env:     []string{"FOO=bar", "DUP=1", "DUP=2", "BAD"},
		Cwd:     "sub",
	}, nil, 10*time.Second)
	want := "bar\n/workspace/sub\n/workspace/sub\n/workspace\nfrom-spec\n2\nunset\n"
	if err != nil || st.ExitCode != 0 || out != want {
		t.Fatalf("got %q (%+v, %v), want %q", out, st, err, want)
	}
	// Argv processes get the same environment and an absolute cwd works.
	_, out, _, _, err = ioExec(t, sb, sandbox.ExecRequest{
		Argv: []string{"/usr/bin/env"}, Env: []string{"FOO=argv"}, Cwd: "/workspace/sub",
	}, nil, 10*time.Second)
	if err != nil || !strings.Contains(out, "\nFOO=argv\n") || !strings.Contains(out, "PWD=/workspace/sub\n") {
		t.Errorf("env of an argv process: %q, %v", out, err)
	}
	// The variables of one process do not leak into the next.
	if got := mustSucceed(t, sb, `echo "${FOO}"; pwd`); got != "spec\n/workspace\n" {
		t.Errorf("next process: %q", got)
	}
	// A missing working directory is a clear error naming it.
	_, _, _, _, err = ioExec(t, sb, sandbox.ExecRequest{Command: "true", Cwd: "no-such-dir"}, nil, 10*time.Second)
	if err == nil {
		t.Errorf("exec in a missing directory succeeded")
	} else if !strings.Contains(err.Error(), "no-such-dir") {
		t.Errorf("exec in a missing directory: %q does not name the directory", err)
	}
	// A missing program is ErrNotFound naming it.
	_, _, _, _, err = ioExec(t, sb, sandbox.ExecRequest{Argv: []string{"no-such-program"}}, nil, 10*time.Second)
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "no-such-program") {
		t.Errorf("missing program: %v", err)
	}
}

func TestConcurrentExec(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	const n = 10
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: fmt.Sprintf("sleep 0.5; echo %d", i)}, sandbox.ExecIO{Stdout: &out})
			if err == nil && st.ExitCode != 0 {
				err = fmt.Errorf("exit %d", st.ExitCode)
			}
			outs[i], errs[i] = out.String(), err
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i := 0; i < n; i++ {
		if errs[i] != nil || outs[i] != fmt.Sprintf("%d\n", i) {
			t.Errorf("process %d: %q, %v", i, outs[i], errs[i])
		}
	}
	if elapsed < 500*time.Millisecond {
		t.Errorf("10 × sleep 0.5 finished in %v: they cannot have slept", elapsed)
	}
	if elapsed > 5*time.Second {
		t.Errorf("10 concurrent sleep 0.5 took %v: processes are serialized", elapsed)
	}
	t.Logf("10 concurrent sleep 0.5: %v", elapsed)
}

// ioAgentPids lists the agents this test process started: cubicle agent
// processes whose parent is our launcher.
func ioAgentPids(t *testing.T) map[int]bool {
	t.Helper()
	pids := map[int]bool{}
	for _, pid := range agentPids(t) {
		if ours(pid) {
			pids[pid] = true
		}
	}
	return pids
}

// ioStatusKB reads a "Name: N kB" line of /proc/<pid>/status.
func ioStatusKB(t *testing.T, pid, name string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatalf("read status of %s: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%s/status", name, pid)
	return 0
}

type ioCounter struct{ n atomic.Int64 }

func (w *ioCounter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

func TestOutputOneGiBStreamsInBoundedMemory(t *testing.T) {
	d := newDriver(t)
	before := ioAgentPids(t)
	sb := newComputer(t, d, nil)
	var agentPid string
	for pid := range ioAgentPids(t) {
		if !before[pid] {
			if agentPid != "" {
				t.Fatalf("more than one new agent process (%s and %d)", agentPid, pid)
			}
			agentPid = strconv.Itoa(pid)
		}
	}
	if agentPid == "" {
		t.Fatal("cannot find the computer's agent process")
	}
	// Reset our own high-water mark (Linux ≥ 4.0), so it measures this run.
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	hwmBefore := ioStatusKB(t, "self", "VmHWM")

	var out, errOut ioCounter
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "head -c 1G /dev/zero", Timeout: 3 * time.Minute}, sandbox.ExecIO{Stdout: &out, Stderr: &errOut})
	elapsed := time.Since(start)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("head -c 1G: %+v, %v", st, err)
	}
	if out.n.Load() != 1<<30 || errOut.n.Load() != 0 {
		t.Fatalf("stdout %d bytes (want exactly %d), stderr %d bytes", out.n.Load(), 1<<30, errOut.n.Load())
	}
	hwmAfter := ioStatusKB(t, "self", "VmHWM")
	agentHWM := ioStatusKB(t, agentPid, "VmHWM")
	t.Logf("1 GiB in %v (%.0f MiB/s); test process VmHWM %d → %d kB; agent VmHWM %d kB",
		elapsed, 1024/elapsed.Seconds(), hwmBefore, hwmAfter, agentHWM)
	if hwmAfter > hwmBefore+64<<10 {
		t.Errorf("the host side grew by %d kB while streaming 1 GiB: output is buffered", hwmAfter-hwmBefore)
	}
	if agentHWM > 64<<10 {
		t.Errorf("the agent's peak RSS is %d kB: output is buffered inside the computer", agentHWM)
	}
	// The agent still answers.
	if got := mustSucceed(t, sb, "echo alive"); got != "alive\n" {
		t.Errorf("after 1 GiB: %q", got)
	}
}

// ioSleepers counts sleep processes inside the computer.
func ioSleepers(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	return strings.TrimSpace(mustSucceed(t, sb, `n=0; for f in /proc/[0-9]*/comm; do [ "$(cat $f 2>/dev/null)" = sleep ] && n=$((n+1)); done; echo $n`))
}

func TestCancelKillsTheProcessTree(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	for _, cmd := range []string{
		"sleep 100",
		"sleep 100 & sleep 100 & setsid sleep 100 & wait",
	} {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		var once sync.Once
		go func() {
			<-started
			time.Sleep(300 * time.Millisecond)
			cancel()
		}()
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: cmd}, sandbox.ExecIO{Started: func(int) { once.Do(func() { close(started) }) }})
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%q: Exec did not return 20 s after cancel", cmd)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%q: err = %v, want context.Canceled", cmd, err)
		}
		if n := ioSleepers(t, sb); n != "0" {
			t.Errorf("%q: %s sleep processes survived the cancel", cmd, n)
		}
		cancel()
	}
	// Promptness: cancel → return.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 100"}, sandbox.ExecIO{})
	if d := time.Since(start); !errors.Is(err, context.Canceled) || d > 2*time.Second {
		t.Errorf("cancel after 300 ms: returned after %v with %v", d, err)
	}
	if got := mustSucceed(t, sb, "echo next"); got != "next\n" {
		t.Errorf("next exec after cancel: %q", got)
	}
}

func TestBackgroundProcessDoesNotHoldTheCommand(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	cases := []struct {
		cmd, out string
	}{
		{"sleep 100 & echo done", "done\n"},
		{"echo before; sleep 100 & echo after", "before\nafter\n"},
		{"(sleep 100 >&2 &); echo sub", "sub\n"},
		{"setsid sleep 100 & echo setsid", "setsid\n"},
		{"sleep 100 >/dev/null 2>&1 & echo quiet", "quiet\n"},
	}
	for _, c := range cases {
		st, out, _, d, err := ioExec(t, sb, sandbox.ExecRequest{Command: c.cmd}, nil, 20*time.Second)
		if err != nil || st.ExitCode != 0 || out != c.out {
			t.Errorf("%q: out %q, %+v, %v", c.cmd, out, st, err)
		}
		if d > 1500*time.Millisecond {
			t.Errorf("%q: took %v; a background process held the command open", c.cmd, d)
		}
	}
	// With stdin attached as well.
	st, out, _, d, err := ioExec(t, sb, sandbox.ExecRequest{Command: "sleep 100 & echo stdin"}, []byte("ignored"), 20*time.Second)
	if err != nil || st.ExitCode != 0 || out != "stdin\n" || d > 1500*time.Millisecond {
		t.Errorf("with stdin: out %q, %+v, %v, took %v", out, st, err, d)
	}
	if got := mustSucceed(t, sb, "echo still-works"); got != "still-works\n" {
		t.Errorf("next exec: %q", got)
	}
}

// lateWriter takes its first write only after a pause: a host that is
// slow to read a process's output.
type lateWriter struct {
	bytes.Buffer
	pause time.Duration
}

func (w *lateWriter) Write(p []byte) (int, error) {
	if w.Len() == 0 {
		time.Sleep(w.pause)
	}
	return w.Buffer.Write(p)
}

// TestOutputBacklogDeliveredWhole: what a process wrote to its pipe
// before it exited arrives whole even when the host reads it later than
// the 200 ms grace that descendants get; a descendant that writes on and
// on is still cut off after the grace.
func TestOutputBacklogDeliveredWhole(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	// While the host holds its first chunk for a second, the frames
	// queued on the way and the pipe take all of head's output: head
	// exits with its last bytes in the pipe.
	const size = 2 << 20
	out := &lateWriter{pause: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero", size)}, sandbox.ExecIO{Stdout: out})
	if err != nil || st.ExitCode != 0 || out.Len() != size {
		t.Fatalf("slow reader: %d of %d bytes, %+v, %v", out.Len(), size, st, err)
	}

	start := time.Now()
	var flood ioCounter
	st, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "yes & echo started"}, sandbox.ExecIO{Stdout: &flood})
	if d := time.Since(start); err != nil || st.ExitCode != 0 || d > 3*time.Second {
		t.Errorf("a descendant writing on and on: %+v, %v after %v, want the command's end within about the grace", st, err, d)
	}
}

// A cancel that reaches the agent while the process is still being started
// (here: the context is cancelled before Exec is even called) must kill it
// all the same, not let it run to its time limit.
func TestCancelBeforeStart(t *testing.T) {
	sb := newComputer(t, newDriver(t), func(s *sandbox.Spec) { s.Timeout = 8 * time.Second })
	for i := 0; i < 30; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 100"}, sandbox.ExecIO{})
		d := time.Since(start)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d: %+v, %v; want context.Canceled", i, st, err)
		}
		if d > 3*time.Second || st.TimedOut {
			t.Fatalf("attempt %d: a cancelled Exec ran for %v (timed out: %v): the kill was lost", i, d, st.TimedOut)
		}
	}
	if got := mustSucceed(t, sb, "echo next"); got != "next\n" {
		t.Errorf("next exec: %q", got)
	}
}

// pausingWriter sleeps before every write: a slow host, so the process's
// pipe is full whenever the agent comes back to it.
type pausingWriter struct {
	bytes.Buffer
	pause  time.Duration
	writes int
}

func (w *pausingWriter) Write(p []byte) (int, error) {
	time.Sleep(w.pause)
	w.writes++
	return w.Buffer.Write(p)
}

// TestOutputExactBehindSlowReader: output that waits in a full pipe (a
// slow reader) or flows (a fast one) arrives byte for byte, in order
// within each stream, also where large and small writes alternate.
func TestOutputExactBehindSlowReader(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	const size = 8 << 20
	sum := strings.Fields(mustSucceed(t, sb, fmt.Sprintf("head -c %d /dev/urandom > /tmp/r && sha256sum /tmp/r", size)))[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pause := range []time.Duration{0, 2 * time.Millisecond} {
		out, errb := &pausingWriter{pause: pause}, &pausingWriter{pause: pause}
		st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cat /tmp/r; echo one; cat /tmp/r >&2; cat /tmp/r; echo two"},
			sandbox.ExecIO{Stdout: out, Stderr: errb})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("pause %v: %+v, %v", pause, st, err)
		}
		o, e := out.Bytes(), errb.Bytes()
		hex := func(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }
		if len(o) != 2*size+8 || hex(o[:size]) != sum || string(o[size:size+4]) != "one\n" || hex(o[size+4:2*size+4]) != sum ||
			string(o[2*size+4:]) != "two\n" {
			t.Fatalf("pause %v: stdout of %d bytes is not the file, one, the file, two (%d bytes)", pause, len(o), 2*size+8)
		}
		if len(e) != size || hex(e) != sum {
			t.Fatalf("pause %v: stderr of %d bytes is not the file", pause, len(e))
		}
		t.Logf("pause %v: %d stdout frames, %d stderr frames", pause, out.writes, errb.writes)
	}
}
