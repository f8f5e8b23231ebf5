package linux_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// Hostile code against the limits of a computer. The heavy tests (bombs,
// CPU) do not call t.Parallel, so they never overlap each other or the
// isolation tests and their measurements stay meaningful.

func TestLimitMemoryBomb(t *testing.T) {
	const limit = 128 << 20
	sb := newComputer(t, newDriver(t), func(s *sandbox.Spec) { s.MemoryBytes = limit })
	// Bounded at 1 GiB so a missing limit fails the test instead of the host.
	bomb := "a=[]\nfor i in range(64):\n  a.append(bytearray(16<<20))\n  print(len(a)*16, flush=True)\nprint('escaped')"

	start := time.Now()
	r := runReq(t, sb, sandbox.ExecRequest{Argv: []string{python, "-c", bomb}}, nil)
	if !r.OOMKilled || r.Signal != int(syscall.SIGKILL) || r.ExitCode != -1 || r.TimedOut {
		t.Errorf("memory bomb: %+v, want OOMKilled by SIGKILL\nstdout: %s\nstderr: %s", r.ExitStatus, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, "escaped") {
		t.Errorf("the bomb allocated 1 GiB under a %d MiB limit", limit>>20)
	}
	if lines := strings.Fields(r.Stdout); len(lines) > 0 {
		if mib, _ := strconv.Atoi(lines[len(lines)-1]); mib > limit>>20 {
			t.Errorf("the bomb held %d MiB under a %d MiB limit", mib, limit>>20)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("memory bomb took %v to be stopped", d)
	}

	// The agent survived: the same computer runs the next process, and the
	// next process is not reported as OOM-killed.
	next := run(t, sb, "echo ok")
	if next.ExitCode != 0 || next.Stdout != "ok\n" || next.OOMKilled {
		t.Errorf("after the bomb: %+v %q %q", next.ExitStatus, next.Stdout, next.Stderr)
	}
	if _, err := sb.Stat(context.Background(), "/workspace"); err != nil {
		t.Errorf("file API after the bomb: %v", err)
	}

	// A bomb in a child: the parent shell lives on and sees the kill.
	upload(t, sb, "/workspace/bomb.py", []byte(bomb), 0o644)
	r = run(t, sb, python+" /workspace/bomb.py >/dev/null; echo status=$?")
	if !r.OOMKilled || r.ExitCode != 0 || !strings.Contains(r.Stdout, "status=137") {
		t.Errorf("bomb in a child: %+v stdout %q, want OOMKilled, child status 137, shell exit 0", r.ExitStatus, r.Stdout)
	}
	mustSucceed(t, sb, "echo ok")
}

// hostLatency forks /bin/true on the host until stop is closed and reports
// the slowest run and how many ran.
func hostLatency(stop <-chan struct{}) (worst time.Duration, runs int, err error) {
	for {
		select {
		case <-stop:
			return worst, runs, nil
		default:
		}
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return worst, runs, err
		}
		worst = max(worst, time.Since(start))
		runs++
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLimitForkBomb(t *testing.T) {
	bombs := []struct{ name, code string }{
		// Every process forks forever; the foreground one keeps the command alive.
		{"python", "import os, time\nwhile True:\n  try: os.fork()\n  except OSError: time.sleep(0.01)"},
		// The classic, kept in the foreground by a busy loop of builtins.
		{"bash", ":(){ :|:& };:; while :; do :; done"},
	}
	for _, bomb := range bombs {
		t.Run(bomb.name, func(t *testing.T) {
			const pids, timeout = 64, 3 * time.Second
			sb := newComputer(t, newDriver(t), func(s *sandbox.Spec) { s.Pids = pids; s.Timeout = timeout })
			script := uploadProbe(t, sb)
			// A single process that never forks counts what it sees,
			// itself included, during the bomb.
			counter := startBackground(t, sb, sandbox.ExecRequest{
				Argv: []string{python, script, "count_procs", "4.5"}, Timeout: 20 * time.Second, // beyond the computer's
			})
			// The bomb starts once the counter counts: a Python start
			// slowed by a loaded host must not miss the whole bomb.
			for end := time.Now().Add(30 * time.Second); !strings.Contains(counter.stdout.String(), "counting"); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the process counter did not start counting within 30 s: %q", counter.stderr.String())
				}
			}

			stop := make(chan struct{})
			type latency struct {
				worst time.Duration
				runs  int
				err   error
			}
			host := make(chan latency, 1)
			go func() {
				w, n, err := hostLatency(stop)
				host <- latency{w, n, err}
			}()

			argv := []string{python, "-c", bomb.code}
			if bomb.name == "bash" {
				argv = []string{"/bin/bash", "-c", bomb.code}
			}
			start := time.Now()
			r := runReq(t, sb, sandbox.ExecRequest{Argv: argv}, nil)
			elapsed := time.Since(start)
			close(stop)
			if !r.TimedOut || r.Signal != int(syscall.SIGKILL) {
				t.Errorf("fork bomb: %+v, want timed out and killed\nstderr: %.500s", r.ExitStatus, r.Stderr)
			}
			if elapsed > timeout+10*time.Second {
				t.Errorf("fork bomb: Exec returned after %v, timeout %v", elapsed, timeout)
			}
			h := <-host
			if h.err != nil || h.runs < 10 || h.worst > 2*time.Second {
				t.Errorf("host during the bomb: %d runs of /bin/true, slowest %v, err %v", h.runs, h.worst, h.err)
			}

			cst, err := counter.wait(t, 30*time.Second)
			var most, samples int
			if _, serr := fmt.Sscanf(strings.TrimPrefix(counter.stdout.String(), "counting\n"), "max %d samples %d", &most, &samples); err != nil || serr != nil {
				t.Fatalf("process counter: %+v %v: printed %q (%v), stderr %q", cst, err, counter.stdout.String(), serr, counter.stderr.String())
			}
			t.Logf("at most %d processes seen in %d samples; host ran /bin/true %d times, slowest %v",
				most, samples, h.runs, h.worst)
			// A listing of /proc is not atomic: a pid freed and reused
			// while it is read may be seen twice; and processes the agent
			// starts (this counter among them) join even a full cgroup,
			// since migration is not limit-checked. Without the limit the
			// count goes into the thousands.
			if most > pids+8 || most < pids/2 {
				t.Errorf("the computer ran up to %d processes (in %d samples); limit %d", most, samples, pids)
			}

			// Nothing of the bomb is left, and the agent still serves.
			waitNoProcesses(t, sb, 5*time.Second)
			if out := mustSucceed(t, sb, "ls / >/dev/null && echo ok"); out != "ok\n" {
				t.Errorf("after the bomb: %q", out)
			}
			start = time.Now()
			if err := exec.Command("/bin/true").Run(); err != nil || time.Since(start) > 2*time.Second {
				t.Errorf("host after the bomb: /bin/true took %v (%v)", time.Since(start), err)
			}
		})
	}
}

// countProcs counts the processes named comm in sb.
func countProcs(t testing.TB, sb sandbox.Sandbox, comm string) int {
	t.Helper()
	n := 0
	for _, c := range processNames(t, sb) {
		if c == comm {
			n++
		}
	}
	return n
}

// waitGone waits until no process named comm runs in sb.
func waitGone(t testing.TB, sb sandbox.Sandbox, comm string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for countProcs(t, sb, comm) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still running %v later: %v", comm, within, processNames(t, sb))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLimitTimeout(t *testing.T) {
	d := newDriver(t)
	trees := []struct{ name, command string }{
		{"background child", "sleep 1000 & sleep 1000"},
		{"setsid escapee", "setsid sleep 1000 & sleep 1000"},
		{"double-forked daemon", "(setsid sh -c 'sleep 1000 & exit 0' &); sleep 1000"},
	}
	for _, tree := range trees {
		t.Run(tree.name, func(t *testing.T) {
			t.Parallel()
			const timeout = time.Second
			sb := newComputer(t, d, func(s *sandbox.Spec) { s.Timeout = timeout })
			start := time.Now()
			r := run(t, sb, tree.command)
			elapsed := time.Since(start)
			if !r.TimedOut || r.Signal != int(syscall.SIGKILL) {
				t.Errorf("%q: %+v, want timed out and killed", tree.command, r.ExitStatus)
			}
			if elapsed < timeout || elapsed > timeout+10*time.Second {
				t.Errorf("%q: returned after %v, timeout %v", tree.command, elapsed, timeout)
			}
			waitGone(t, sb, "sleep", 3*time.Second)
		})
	}
	t.Run("request timeout", func(t *testing.T) {
		t.Parallel()
		sb := newComputer(t, d, func(s *sandbox.Spec) { s.Timeout = time.Minute })
		start := time.Now()
		r := runReq(t, sb, sandbox.ExecRequest{Command: "setsid sleep 1000 & sleep 1000", Timeout: time.Second}, nil)
		if !r.TimedOut || time.Since(start) > 11*time.Second {
			t.Errorf("request timeout 1s: %+v after %v", r.ExitStatus, time.Since(start))
		}
		waitGone(t, sb, "sleep", 3*time.Second)
	})
	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		sb := newComputer(t, d, func(s *sandbox.Spec) { s.Timeout = time.Minute })
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "setsid sleep 1000 & sleep 1000"}, sandbox.ExecIO{})
		if !errors.Is(err, context.DeadlineExceeded) || st.Signal != int(syscall.SIGKILL) {
			t.Errorf("cancelled: %+v %v, want killed and context.DeadlineExceeded", st, err)
		}
		if d := time.Since(start); d > 11*time.Second {
			t.Errorf("cancelled after 1s: returned after %v", d)
		}
		waitGone(t, sb, "sleep", 3*time.Second)
	})
	// Sandbox.Exec: "Cancelling ctx kills the process tree". A context that
	// is already done when Exec is called must not let the process run on.
	t.Run("context cancelled before the start", func(t *testing.T) {
		t.Parallel()
		const timeout = 6 * time.Second // bounds the damage while the bug exists
		sb := newComputer(t, d, func(s *sandbox.Spec) { s.Timeout = timeout })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 1000"}, sandbox.ExecIO{})
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("Exec with a cancelled context returned after %v (%+v, %v): the cancellation was lost "+
				"and the process ran until the computer's timeout", elapsed, st, err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Exec with a cancelled context: err %v, want context.Canceled", err)
		}
		waitGone(t, sb, "sleep", 3*time.Second)
	})
}

// freeBytes is the space available to unprivileged users on dir's filesystem.
func freeBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// allocatedBytes sums the disk blocks of the files under dir.
func allocatedBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // a computer's directory may vanish meanwhile
		}
		if info, err := e.Info(); err == nil && e.Type().IsRegular() {
			total += info.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func TestLimitDisk(t *testing.T) {
	const disk = 64 << 20
	const memory = 128 << 20 // /tmp gets a quarter: 32 MiB
	state := t.TempDir()
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	sb := newComputer(t, d, func(s *sandbox.Spec) { s.DiskBytes = disk; s.MemoryBytes = memory })
	computers := filepath.Join(state, "computers")
	freeBefore, usedBefore := freeBytes(t, state), allocatedBytes(t, computers)

	t.Run("workspace", func(t *testing.T) {
		r := run(t, sb, "dd if=/dev/zero of=/workspace/big bs=1M; sync; stat -c %s /workspace/big")
		if r.ExitCode != 0 || !strings.Contains(r.Stderr, "No space left on device") {
			t.Fatalf("filling /workspace: %+v\nstdout %s\nstderr %s", r.ExitStatus, r.Stdout, r.Stderr)
		}
		size, _ := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
		if size < disk/2 || size > disk {
			t.Errorf("/workspace/big is %d bytes on a %d byte disk", size, disk)
		}
		// The host paid the disk's size when the computer was created
		// (reserved), and nothing more for filling it (+10% for metadata).
		grown := allocatedBytes(t, computers) - usedBefore
		dropped := freeBefore - freeBytes(t, state)
		t.Logf("image grew %d MiB, host free space dropped %d MiB", grown>>20, dropped>>20)
		if usedBefore < disk || grown > disk/10 {
			t.Errorf("the computer's disk image held %d bytes before and grew by %d bytes for a %d byte file, disk %d", usedBefore, grown, size, disk)
		}
		if dropped > disk*11/10 {
			t.Errorf("host free space dropped by %d bytes, limit %d", dropped, disk)
		}
	})
	t.Run("file API", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "/workspace/more"}, io.LimitReader(zeros{}, 8<<20))
		if !errors.Is(err, sandbox.ErrNoSpace) {
			t.Errorf("upload to a full disk: %v, want ErrNoSpace", err)
		}
	})
	t.Run("tmp", func(t *testing.T) {
		for _, dir := range []string{"/tmp", "/dev/shm"} {
			r := run(t, sb, "dd if=/dev/zero of="+dir+"/big bs=1M; stat -c %s "+dir+"/big")
			if r.ExitCode != 0 || !strings.Contains(r.Stderr, "No space left on device") {
				t.Errorf("filling %s: %+v\nstderr %s", dir, r.ExitStatus, r.Stderr)
				continue
			}
			if size, _ := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64); size > memory/4 {
				t.Errorf("%s holds %d bytes, want at most a quarter of the memory (%d)", dir, size, memory/4)
			}
		}
	})
	t.Run("recovers", func(t *testing.T) {
		out := mustSucceed(t, sb, "rm /workspace/big /tmp/big /dev/shm/big; echo hi > /workspace/small; cat /workspace/small")
		if out != "hi\n" {
			t.Errorf("after freeing space: %q", out)
		}
	})
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestLimitCPU(t *testing.T) {
	const cpus = 0.5
	sb := newComputer(t, newDriver(t), func(s *sandbox.Spec) { s.CPUs = cpus })
	// Each process spins for 2 s of wall time and reports the CPU time it got.
	spin := "import os, time\nt0, c0 = time.monotonic(), os.times()\n" +
		"while time.monotonic() - t0 < 2: pass\n" +
		"c1 = os.times()\nprint(c1.user - c0.user + c1.system - c0.system, time.monotonic() - t0)"
	// Two at once: the quota is the computer's, not each process's.
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errb bytes.Buffer
			st, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{python, "-c", spin}},
				sandbox.ExecIO{Stdout: &out, Stderr: &errb})
			if err != nil {
				errb.WriteString(err.Error())
			}
			results[i] = result{ExitStatus: st, Stdout: out.String(), Stderr: errb.String()}
		}()
	}
	wg.Wait()
	var cpu, wall float64
	for _, r := range results {
		var c, w float64
		if _, err := fmt.Sscanf(r.Stdout, "%g %g", &c, &w); err != nil || r.ExitCode != 0 {
			t.Fatalf("spin: %+v %q %q", r.ExitStatus, r.Stdout, r.Stderr)
		}
		cpu += c
		wall = max(wall, w)
	}
	t.Logf("two spinning processes got %.2f s of CPU in %.2f s (limit %.1f CPUs)", cpu, wall, cpus)
	// Enforcement, not precision: 0.5 CPUs with generous slack; two free
	// spinners on this 2-core host would get close to 2 CPUs.
	if ratio := cpu / wall; ratio > 0.7 || ratio < 0.1 {
		t.Errorf("the computer used %.2f CPUs with a limit of %.1f", ratio, cpus)
	}
}

func TestLimitExitStatus(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	statuses := []struct {
		command        string
		code, signal   int
		stdout, stderr string
	}{
		{"exit 3", 3, 0, "", ""},
		{"exit 255", 255, 0, "", ""},
		{"true", 0, 0, "", ""},
		{"kill -TERM $$", -1, 15, "", ""},
		{"kill -SEGV $$", -1, 11, "", ""},
		{"no-such-command-xyz", 127, 0, "", "not found"},
	}
	for _, s := range statuses {
		t.Run(s.command, func(t *testing.T) {
			r := run(t, sb, s.command)
			if r.ExitCode != s.code || r.Signal != s.signal || r.TimedOut || r.OOMKilled {
				t.Errorf("%q: %+v, want exit %d signal %d", s.command, r.ExitStatus, s.code, s.signal)
			}
			if !strings.Contains(r.Stderr, s.stderr) {
				t.Errorf("%q: stderr %q, want %q", s.command, r.Stderr, s.stderr)
			}
		})
	}
	mustSucceed(t, sb, "printf '#!/bin/sh\\necho hi\\n' > /workspace/noexec; chmod 644 /workspace/noexec; mkdir -p /workspace/dir")
	failures := []struct {
		argv []string
		want error
	}{
		{[]string{"no-such-command-xyz"}, sandbox.ErrNotFound},
		{[]string{"/usr/bin/no-such-command-xyz"}, sandbox.ErrNotFound},
		{[]string{"/workspace/noexec"}, sandbox.ErrPermission},
		{[]string{"/workspace/dir"}, sandbox.ErrPermission},
	}
	for _, f := range failures {
		t.Run(strings.Join(f.argv, " "), func(t *testing.T) {
			st, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: f.argv}, sandbox.ExecIO{})
			if !errors.Is(err, f.want) {
				t.Errorf("%v: %+v %v, want an error wrapping %v", f.argv, st, err, f.want)
			}
		})
	}
	if out := mustSucceed(t, sb, "echo ok"); out != "ok\n" {
		t.Errorf("after the failures: %q", out)
	}
}

// TestLimitProcessAttributes checks what DESIGN.md promises of every user
// process: its own process group, and rlimits core 0, nofile and fsize.
func TestLimitProcessAttributes(t *testing.T) {
	const disk = 64 << 20
	sb := newComputer(t, newDriver(t), func(s *sandbox.Spec) { s.DiskBytes = disk })
	code := "import os, resource as r\n" +
		"print(os.getpgrp() == os.getpid())\n" +
		"for n in ('CORE', 'NOFILE', 'FSIZE'):\n  print(n, *r.getrlimit(getattr(r, 'RLIMIT_' + n)))"
	r := runReq(t, sb, sandbox.ExecRequest{Argv: []string{python, "-c", code}}, nil)
	if r.ExitCode != 0 {
		t.Fatalf("%+v %s", r.ExitStatus, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("unexpected output %q", r.Stdout)
	}
	if lines[0] != "True" {
		t.Errorf("the user's process does not lead its own process group")
	}
	limits := map[string][2]int64{}
	for _, l := range lines[1:] {
		var name string
		var soft, hard int64
		fmt.Sscanf(l, "%s %d %d", &name, &soft, &hard)
		limits[name] = [2]int64{soft, hard}
	}
	if l := limits["CORE"]; l != [2]int64{0, 0} {
		t.Errorf("RLIMIT_CORE = %v, want 0 0", l)
	}
	if l := limits["NOFILE"]; l[1] <= 0 || l[1] > 1<<20 {
		t.Errorf("RLIMIT_NOFILE = %v, want a finite hard limit", l)
	}
	// RLIM_INFINITY reads as -1.
	if l := limits["FSIZE"]; l[0] < 0 || l[1] < 0 || l[1] > disk {
		t.Errorf("RLIMIT_FSIZE = %v (-1 is unlimited), want at most the disk size %d", l, disk)
	}
}

// TestSetLimits (issue 15 goal 2): a running computer takes other memory
// and process limits on its live cgroup, in force for the next process;
// a memory limit under what its processes hold is refused, and nothing
// of the computer is OOM-killed by the attempt.
func TestSetLimits(t *testing.T) {
	d := newDriver(t)
	sb := newComputer(t, d, func(s *sandbox.Spec) { s.MemoryBytes = 512 << 20 })

	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan struct{})
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		st, _ := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{python, "-c",
			"import time\nb = bytearray(160 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('held', flush=True)\ntime.sleep(60)"}},
			sandbox.ExecIO{Stdout: io.MultiWriter(&out, signalOnce(held))})
		done <- result{ExitStatus: st, Stdout: out.String()}
	}()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not take its 160 MiB within 30 s")
	}
	spec := sb.Spec()
	spec.MemoryBytes = 128 << 20
	if err := d.SetLimits(context.Background(), sb, spec); !errors.Is(err, sandbox.ErrLimitsBelowUse) {
		t.Fatalf("a 128 MiB limit on a computer holding 160 MiB: %v, want ErrLimitsBelowUse", err)
	}
	cancel()
	if r := <-done; r.OOMKilled {
		t.Fatalf("the refused change OOM-killed the process: %+v", r.ExitStatus)
	}
	if got := sb.Spec().MemoryBytes; got != 512<<20 {
		t.Fatalf("after the refusal the computer's memory limit is %d, want 512 MiB", got)
	}

	spec.MemoryBytes, spec.Pids = 192<<20, 40
	if err := d.SetLimits(context.Background(), sb, spec); err != nil {
		t.Fatal(err)
	}
	if got := sb.Spec(); got.MemoryBytes != 192<<20 || got.Pids != 40 {
		t.Fatalf("Spec after SetLimits: memory %d, pids %d", got.MemoryBytes, got.Pids)
	}
	bomb := "a=[]\nfor i in range(24):\n  a.append(bytearray(16<<20))\n  print(len(a)*16, flush=True)\nprint('escaped')"
	r := runReq(t, sb, sandbox.ExecRequest{Argv: []string{python, "-c", bomb}}, nil)
	if !r.OOMKilled || strings.Contains(r.Stdout, "escaped") {
		t.Fatalf("384 MiB under the new 192 MiB limit: %+v, stdout %q", r.ExitStatus, r.Stdout)
	}
	forks := run(t, sb, "n=0; for i in $(seq 60); do sleep 5 & n=$((n+1)); done 2>/dev/null; echo started; kill $(jobs -p) 2>/dev/null")
	if forks.ExitCode == 0 && !strings.Contains(forks.Stderr, "fork") && !strings.Contains(forks.Stderr, "Resource temporarily unavailable") {
		t.Fatalf("60 processes under a 40-process limit: %+v %q %q", forks.ExitStatus, forks.Stdout, forks.Stderr)
	}
	if ok := run(t, sb, "echo ok"); ok.Stdout != "ok\n" {
		t.Fatalf("after the limits: %+v %q %q", ok.ExitStatus, ok.Stdout, ok.Stderr)
	}
}

// signalOnce closes ch at the first write.
type signalOnce chan struct{}

func (w signalOnce) Write(p []byte) (int, error) {
	select {
	case <-w:
	default:
		close(w)
	}
	return len(p), nil
}
